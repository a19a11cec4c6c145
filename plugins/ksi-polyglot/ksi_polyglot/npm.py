"""One ``node_modules`` per set of JavaScript dependencies, shared by every exercise that needs it.

Aider's benchmark installs the exercises' npm packages once (in its image)
and links ``node_modules`` into each exercise before ``npm run test``. On the
host KSI does the same: the exercise's ``dependencies`` and
``devDependencies`` (nothing else of ``package.json``: the exercises differ
only in name) name a directory under ``npm_dir``; the first grade that needs
it runs ``npm install`` there (holding a lock, so concurrent grades wait for
one install), later ones reuse it. ``npm_dir`` is outside the home
directory (default ``/var/tmp/ksi-polyglot-npm``) so a sandboxed grade,
which hides homes, still sees it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

INSTALL_TIMEOUT_SEC = 900.0


class NpmError(RuntimeError):
    """node_modules could not be made (no npm, no network, a bad package.json)."""


def default_npm_dir() -> str:
    return os.environ.get("KSI_POLYGLOT_NPM_DIR") or "/var/tmp/ksi-polyglot-npm"


def node_modules_for(package_json: Path, npm_dir: Path) -> Path:
    """The installed ``node_modules`` for ``package_json``'s dependencies (installed if missing)."""
    try:
        package = json.loads(package_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NpmError(f"cannot read {package_json.name}: {exc}") from None
    if not isinstance(package, dict):
        raise NpmError(f"{package_json.name} is not a JSON object")
    deps = {k: package.get(k) or {} for k in ("dependencies", "devDependencies")}
    key = hashlib.sha256(json.dumps(deps, sort_keys=True).encode()).hexdigest()[:16]
    home = npm_dir / key
    modules = home / "node_modules"
    done = home / ".installed"
    if done.is_file():
        return modules
    npm = shutil.which("npm")
    if npm is None:
        raise NpmError("npm is not on PATH (apt-get install npm)")
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            return modules
        (home / "package.json").write_text(
            json.dumps({"name": "ksi-polyglot-npm", "private": True, **deps}, indent=2)
        )
        try:
            proc = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=home,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_SEC,
            )
        except subprocess.TimeoutExpired:
            raise NpmError(f"npm install in {home} took over {INSTALL_TIMEOUT_SEC:g}s") from None
        if proc.returncode != 0:
            raise NpmError(f"npm install in {home} failed: {proc.stderr.strip()[-600:]}")
        done.write_text("ok\n")
    return modules
