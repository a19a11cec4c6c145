"""Harbor's own ATIF validator, run on the ``trajectory.json`` files the tests produce.

KSI writes ATIF so other tools can read its trajectories; the proof is the
validator of the format's home, the ``harbor`` package from PyPI (it needs
Python 3.12+, KSI's tests run on 3.11). :func:`harbor_venv` makes a venv with
it once (``.venv-harbor`` in the checkout, or ``$KSI_HARBOR_VENV``) and keeps
it for later sessions; :class:`HarborValidator` runs Harbor's
``TrajectoryValidator`` there on the files given. Without a Python 3.12 the
tests that need it skip, saying so, unless ``KSI_REQUIRE_AGENT_CLIS=1`` (CI)
makes that a failure.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The harbor release the tests validate against.
HARBOR_VERSION = "0.26.0"
#: Runs in the harbor venv: validates each path given, prints {path: [errors]}.
_VALIDATE = """
import json, sys
from harbor.utils.trajectory_validator import TrajectoryValidator
out = {}
for path in sys.argv[1:]:
    v = TrajectoryValidator()
    v.validate(path)
    out[path] = v.get_errors()
print(json.dumps(out))
"""


def python312() -> str | None:
    """A Python 3.12 or newer on this machine (PATH, then pyenv's versions)."""
    for name in ("python3.12", "python3.13"):
        found = shutil.which(name)
        if found and subprocess.run([found, "-V"], capture_output=True).returncode == 0:
            return found
    for pattern in ("/root/.pyenv/versions/3.1[2-9]*/bin/python", "/usr/bin/python3.1[2-9]"):
        for found in sorted(glob.glob(pattern)):
            return found
    return None


def _missing(reason: str) -> None:
    if os.environ.get("KSI_REQUIRE_AGENT_CLIS") == "1":
        pytest.fail(reason + " (KSI_REQUIRE_AGENT_CLIS=1)")
    pytest.skip(reason)


def harbor_venv() -> Path:
    """The venv holding harbor (made on first use, kept); skip (or fail in CI) without one."""
    venv = Path(os.environ.get("KSI_HARBOR_VENV", ROOT / ".venv-harbor"))
    python = venv / "bin" / "python"
    probe = [
        str(python),
        "-c",
        f"import harbor, importlib.metadata as m; assert m.version('harbor') == {HARBOR_VERSION!r}",
    ]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return venv
    base = python312()
    if base is None:
        _missing("Harbor's ATIF validator needs Python 3.12 or newer, and none is installed")
    assert base is not None
    shutil.rmtree(venv, ignore_errors=True)
    made = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        _missing(f"could not make a venv with {base}: {made.stderr[-500:]}")
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"harbor=={HARBOR_VERSION}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if pip.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        _missing(f"could not install harbor=={HARBOR_VERSION}: {pip.stderr[-1000:]}")
    return venv


@attrs.frozen
class HarborValidator:
    """Harbor's ``TrajectoryValidator`` in its venv."""

    venv: Path

    def errors(self, paths: Sequence[Path]) -> dict[str, list[str]]:
        """Each file's validation errors (empty when valid)."""
        proc = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", _VALIDATE, *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        result: dict[str, list[str]] = json.loads(proc.stdout)
        return result

    def check(self, *paths: Path) -> None:
        """Fail the test unless every file is valid ATIF to Harbor."""
        assert paths, "no trajectory to validate"
        for path in paths:
            assert path.is_file(), f"{path} was not written"
        bad = {p: e for p, e in self.errors(paths).items() if e}
        assert not bad, f"Harbor's validator refuses: {json.dumps(bad, indent=2)[:4000]}"
