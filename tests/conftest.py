"""Shared fixtures: a clean plugin state and cache directory for each test, the example paths."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from atif_validator import HarborValidator, harbor_venv

from ksi.plugins import reset_plugins

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _own_cache_dir(ksi_cache_dir: Path) -> None:
    """KSI's caches (``ksi run --help``'s flags) in a directory of this test's own.

    The CLI, in-process or in a subprocess, never reads another test's cache or
    the user's ``~/.cache/ksi``, and never writes there (``ksi.testing``).
    """


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test loads plugins anew, with KSI_* plugin variables unset unless it sets them."""
    for var in ("KSI_LOAD_PLUGINS", "KSI_DISABLE_PLUGINS", "KSI_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture(scope="session")
def harbor_venv_dir() -> Path:
    """A venv with the ``harbor`` package (made once, kept): see ``tests/atif_validator.py``."""
    return harbor_venv()


@pytest.fixture
def harbor(harbor_venv_dir: Path) -> HarborValidator:
    """Harbor's ATIF validator: ``harbor.check(path, ...)`` fails the test on an invalid file."""
    return HarborValidator(harbor_venv_dir)
