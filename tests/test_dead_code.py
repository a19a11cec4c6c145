"""No dead code in ksi/: vulture, with pyproject.toml's settings, finds nothing unused.

A name that only a framework, a template or a plugin uses goes in
tests/vulture_whitelist.py, saying which; anything else nothing uses is deleted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def vulture(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vulture", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_nothing_in_ksi_is_unused() -> None:
    found = vulture()
    assert found.returncode == 0 and not found.stdout, (
        "unused code in ksi/ (delete it, or say in tests/vulture_whitelist.py who uses it):\n"
        + found.stdout
        + found.stderr
    )


def test_a_function_nothing_calls_is_found(tmp_path: Path) -> None:
    dead = tmp_path / "dead.py"
    dead.write_text("def left_behind() -> int:\n    return 1\n\n\nPHASES = ('a', 'b')\n")
    found = vulture("ksi", "tests/vulture_whitelist.py", str(dead))
    assert found.returncode != 0
    assert "unused function 'left_behind'" in found.stdout
    assert "unused variable 'PHASES'" in found.stdout
