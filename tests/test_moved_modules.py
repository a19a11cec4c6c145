"""Plugins written against 0.1's module paths keep working for one release."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ksi._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_imports_the_moved_module_with_a_warning(old: str) -> None:
    # A fresh interpreter: the old path must work as a plugin's first import of KSI.
    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({MOVED[old]!r})\n"
        "assert old is new, (old, new)\n"
        "messages = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        f"assert any({MOVED[old]!r} in m for m in messages), messages\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_from_import_of_an_old_path_gives_the_same_objects() -> None:
    code = (
        "import warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from ksi.runner.job import AttemptJob as old\n"
        "from ksi.knowledge.strategies import RetryUnsolved as old_strategy\n"
        "from ksi.jobs import AttemptJob\n"
        "from ksi.generations.strategies import RetryUnsolved\n"
        "assert old is AttemptJob and old_strategy is RetryUnsolved\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_unknown_old_path_still_fails_to_import() -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("ksi.runner.no_such_module")
