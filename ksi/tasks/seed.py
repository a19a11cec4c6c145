"""Putting a task's starting files into an attempt's ``repo/``.

:func:`seed_repo` is :meth:`ksi.task_parts.StartingFiles.seed_into`, which the
runner and the ``command`` evaluator call directly; it stays here for code
written against the task-level helper. Inline ``files`` are written
straight into the destination (a big tasks file never writes temporary
copies), a directory is copied with symlinks kept as links and never
followed, so a starting tree that links outside itself cannot pull outside
files into a workspace.
"""

from __future__ import annotations

from pathlib import Path

from ksi.fstree import copy_tree
from ksi.models import TaskSpec

__all__ = ["copy_tree", "describe_starting_files", "seed_repo"]


def seed_repo(task: TaskSpec, dest: Path) -> None:
    """Fill ``dest`` (created if missing) with ``task``'s starting files.

    A task without starting files starts from an empty directory. A
    directory that does not exist is a user error
    (:class:`~ksi.errors.InvalidTaskError`): a hand-built TaskSpec must point
    at real starting files.
    """
    task.starting_files.seed_into(Path(dest), task_id=task.id)


def describe_starting_files(task: TaskSpec) -> str:
    """A short human description of where a task's starting files come from."""
    return task.starting_files.describe()
