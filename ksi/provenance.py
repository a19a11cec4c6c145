"""Where a run's inputs came from: the tasks file's hash and the git commits behind it and KSI.

A result is only reproducible if one can tell which tasks and which KSI made
it. ``run.json`` records (:attr:`ksi.rundir.run_state.RunState.provenance`)
the sha256 of the tasks file, and, when the tasks path or KSI's own source
sits in a git checkout, that checkout's commit and whether it had changes
not committed. ``git`` runs with a short timeout; no git, no checkout, or a
git that does not answer in time records nothing rather than delaying a run.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import attrs

#: Seconds one ``git`` call may take (a huge checkout's ``git status``): past it, not recorded.
GIT_TIMEOUT_SEC = 5.0
#: Variables that would point ``git`` at another repository than the directory asked about.
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES")


@attrs.frozen
class GitCheckout:
    """A git working tree: its top directory, the commit checked out, local changes."""

    root: str
    commit: str
    #: Changes not committed (tracked files changed, or untracked files); None: unknown.
    dirty: bool | None = None

    def describe(self) -> str:
        state = {True: "with changes not committed", False: "clean", None: "state unknown"}
        return f"git {self.commit[:12]} ({state[self.dirty]}) in {self.root}"


@attrs.frozen
class Provenance:
    """What the run's results rest on, as far as KSI can tell (each part None: not known)."""

    #: sha256 of the tasks file (None for in-memory tasks, a directory, a non-file name).
    tasks_sha256: str | None = None
    #: The git checkout holding the tasks path.
    tasks_git: GitCheckout | None = None
    #: The git checkout KSI runs from (an editable install); None for an installed wheel.
    ksi_git: GitCheckout | None = None


def _git(directory: Path, *args: str) -> str | None:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
    try:
        proc = subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SEC,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_checkout(path: Path) -> GitCheckout | None:
    """The git checkout ``path`` (a file or directory) is in; None when it is in none."""
    directory = path if path.is_dir() else path.parent
    if not directory.is_dir():
        return None
    top = _git(directory, "rev-parse", "--show-toplevel", "HEAD")
    if top is None:
        return None  # no git, no checkout, or one without a commit yet
    lines = top.splitlines()
    if len(lines) != 2:
        return None
    status = _git(directory, "status", "--porcelain")
    return GitCheckout(
        root=lines[0], commit=lines[1], dirty=None if status is None else bool(status.strip())
    )


def file_sha256(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def ksi_checkout() -> GitCheckout | None:
    """KSI's own checkout, only when KSI runs from one (not a venv that lives in some repo)."""
    package = Path(__file__).resolve().parent
    checkout = git_checkout(package)
    if checkout is None or Path(checkout.root).resolve() != package.parent:
        return None
    return checkout


def collect(tasks_path: str | None) -> Provenance:
    """The provenance of a run reading ``tasks_path`` (None: tasks given in memory)."""
    path = Path(tasks_path).expanduser() if tasks_path else None
    exists = path is not None and path.exists()
    return Provenance(
        tasks_sha256=file_sha256(path) if path is not None and path.is_file() else None,
        tasks_git=git_checkout(path.resolve()) if path is not None and exists else None,
        ksi_git=ksi_checkout(),
    )


def collect_in_background(tasks_path: str | None) -> Callable[[], Provenance]:
    """:func:`collect` started now, in a thread; call the result for it (waiting if need be).

    Its ``git`` commands (10-30 ms spent waiting on other processes) then overlap the
    run's own set-up (loading the tasks, resolving the components) instead of adding to it.
    """
    done: list[Provenance] = []
    worker = threading.Thread(
        target=lambda: done.append(collect(tasks_path)), name="ksi-provenance", daemon=True
    )
    worker.start()

    def result() -> Provenance:
        worker.join()
        return done[0] if done else collect(tasks_path)  # it raised: again, here, to report it

    return result
