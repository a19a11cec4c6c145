"""Warnings for reference solutions that capture would undo, before any run.

Capture drops new files that look like tests and restores the seed's test
files (:mod:`ksi.protected_files`). A reference solution that writes such a
file is graded without it, so ``ksi tasks validate`` says so, file by file,
instead of letting ``ksi check`` (or a real agent's score) find out.
Only ``solution.files`` can be checked ahead: what ``solution.command``
writes is known only after it runs (``ksi check`` lists that).
"""

from __future__ import annotations

import os

from ksi.models import TaskSpec
from ksi.protected_files import ProtectRule


def _seed_files(task: TaskSpec) -> set[str]:
    """The relative paths of the task's starting files (``/``-separated)."""
    starting = task.starting_files
    if starting.directory is None:
        return set(starting.files or {})
    found = set()
    for root, dirs, files in os.walk(starting.directory):
        rel_root = os.path.relpath(root, starting.directory)
        for name in files:
            rel = name if rel_root == "." else f"{rel_root}/{name}"
            found.add(rel.replace(os.sep, "/"))
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
    return found


def solution_capture_warnings(task: TaskSpec, rule: ProtectRule) -> list[str]:
    """One warning per ``solution.files`` path that capture would drop or restore."""
    solution = task.solution
    files = (solution.files if solution is not None else None) or {}
    rule = rule.plus(task.eval.protect)
    protected = [rel for rel in sorted(files) if rule.protects(rel)]
    if not protected:
        return []
    seed = _seed_files(task)
    out = []
    for rel in protected:
        if rel in seed:
            what = "edits the starting file"
            fate = "capture restores the starting version before grading"
        else:
            what = "writes"
            fate = "capture drops it before grading (tests come from the starting files)"
        out.append(
            f"task {task.id!r}: solution.files {what} {rel!r}, which {rule.why(rel)}: {fate}; "
            "rename it, or move it into the task's starting files"
        )
    return out
