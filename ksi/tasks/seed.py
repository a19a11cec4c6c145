"""Putting a task's starting files into an attempt's ``repo/``.

The runner calls :func:`seed_repo` once per attempt. Inline ``files`` are
written straight into the destination (never via ``metadata["repo_path"]``,
so a big tasks file never writes its temporary copies at all); anything else
(a ``workspace_dir``, a hand-built TaskSpec) is copied from ``repo_path``.
Symlinks are copied as symlinks and never followed, so a starting tree that
links outside itself cannot pull outside files into a workspace.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ksi.errors import UserInputError
from ksi.models import TaskSpec
from ksi.tasks.custom import REPO_PATH, TaskMetadata, write_files


def _inline_files(task: TaskSpec) -> Mapping[str, str] | None:
    metadata = task.metadata
    if isinstance(metadata, TaskMetadata):
        return metadata.inline_files
    return None


def seed_repo(task: TaskSpec, dest: Path) -> None:
    """Fill ``dest`` (created if missing) with ``task``'s starting files.

    A task with no ``repo_path`` (or an empty one) starts from an empty
    directory. A ``repo_path`` that is not an existing directory is a user
    error: a hand-built TaskSpec must point at real starting files.
    """
    dest = Path(dest)
    files = _inline_files(task)
    if files is not None:
        write_files(dest, files)
        return
    dest.mkdir(parents=True, exist_ok=True)
    repo_path: Any = task.metadata.get(REPO_PATH) if task.metadata else None
    if repo_path is None or repo_path == "":
        return
    src = Path(repo_path)
    if not src.is_dir():
        raise UserInputError(
            f"task {task.id!r}: metadata['repo_path'] = {str(repo_path)!r} is not an "
            "existing directory; it must hold the task's starting files"
        )
    copy_tree(src, dest)


def copy_tree(src: Path, dest: Path) -> None:
    """Copy ``src`` into ``dest``: files with their modes, symlinks as links, no specials.

    FIFOs, sockets and device files are skipped (reading a FIFO would hang).
    """
    dest.mkdir(parents=True, exist_ok=True)
    with os.scandir(src) as entries:
        for entry in entries:
            target = dest / entry.name
            if entry.is_symlink():
                if target.is_symlink() or target.exists():
                    target.unlink()
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir(follow_symlinks=False):
                copy_tree(Path(entry.path), target)
            elif stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                shutil.copy2(entry.path, target, follow_symlinks=False)


def describe_starting_files(task: TaskSpec) -> str:
    """A short human description of where a task's starting files come from."""
    files = _inline_files(task)
    if files is not None:
        count = len(files)
        return f"{count} file{'s' if count != 1 else ''} (inline)" if count else "(empty)"
    repo_path = task.metadata.get(REPO_PATH) if task.metadata else None
    return str(repo_path) if repo_path else "(empty)"
