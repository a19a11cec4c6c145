"""What the tests run on: the pristine exercise, with only the agent's solution files in it.

In Aider's benchmark the model edits only the exercise's solution files (they
are the files in its chat); the tests, the build files (``package.json``,
``CMakeLists.txt``, ``Cargo.toml``, ``go.mod``, ``build.gradle``...) are the
benchmark's. A KSI agent can write anywhere in ``repo/``, so before the tests
run the graded copy is rebuilt the same way: every file of the exercise
(without ``.meta/``) from the checkout, the skipped tests turned on, then the
agent's version of each solution file on top. Nothing else the agent wrote
is kept — a ``pytest.ini`` that only collects, a ``package.json`` whose test
script is ``true``, a test it rewrote — and the result lists what was left out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

import attrs

from ksi.fstree import copy_tree, remove_tree

#: Build output the test commands make themselves; never worth listing as left out.
_BUILD_OUTPUT = frozenset({"node_modules", "build", "target", "__pycache__", ".pytest_cache"})
#: How many left-out paths the grade's notes name.
MAX_LISTED = 10


@attrs.frozen
class GradedTree:
    #: Solution files taken from the agent's work (a missing one is the stub's absence).
    from_agent: tuple[str, ...]
    #: Files the agent added or changed that the benchmark does not grade (first ones).
    left_out: tuple[str, ...]
    left_out_count: int


def _regular_file(root: Path, rel: str) -> Path | None:
    """``root/rel`` when it is a regular file reached through no symlink, else None."""
    path = root
    for part in PurePosixPath(rel).parts:
        path = path / part
        if path.is_symlink():
            return None
    return path if path.is_file() else None


def _files(root: Path) -> set[str]:
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = [d for d in dirnames if not (rel_dir == Path(".") and d in _BUILD_OUTPUT)]
        found.update((rel_dir / name).as_posix() for name in filenames)
    return found


def rebuild(
    workdir: Path,
    exercise_dir: Path,
    solution_files: Sequence[str],
    test_files: Sequence[str],
    unskip: Callable[[str, str], str],
) -> GradedTree:
    """Make ``workdir`` the exercise with the agent's solution files (read from ``workdir``)."""
    ours = {f for f in _files(exercise_dir) if PurePosixPath(f).parts[0] != ".meta"}
    agent_files = _files(workdir)
    kept: dict[str, bytes] = {}
    for rel in solution_files:
        path = _regular_file(workdir, rel)
        if path is not None:
            kept[rel] = path.read_bytes()
    left_out = sorted(
        rel
        for rel in agent_files - set(kept)
        if rel not in ours
        or _regular_file(workdir, rel) is None  # a link is never read
        or (workdir / rel).read_bytes() != (exercise_dir / rel).read_bytes()
    )
    for entry in list(workdir.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            remove_tree(entry)
        else:
            entry.unlink()
    copy_tree(exercise_dir, workdir, merge=True)
    remove_tree(workdir / ".meta")
    for rel in test_files:
        path = workdir / rel
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            path.write_text(unskip(rel, text), encoding="utf-8")
    for rel, data in kept.items():
        path = workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return GradedTree(
        from_agent=tuple(sorted(kept)),
        left_out=tuple(left_out[:MAX_LISTED]),
        left_out_count=len(left_out),
    )
