"""Writing files: starting files, scratch directories, JSON written atomically (copying a
tree is :func:`ksi.fstree.copy_tree`).

Kept at the bottom of the package (it imports nothing from KSI) so that
:class:`ksi.task_parts.StartingFiles` can seed a workspace without importing
the task sources or the runner, and the CLI can write its cache without
importing cattrs.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_files(dest: Path, files: Mapping[str, str]) -> None:
    """Write ``{relative/path: text}`` under ``dest`` (paths already validated)."""
    dest.mkdir(parents=True, exist_ok=True)
    made: set[Path] = {dest}
    for rel, content in files.items():
        target = dest / rel
        parent = target.parent
        if parent not in made:
            parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        target.write_bytes(content.encode("utf-8"))


class _ScratchRoot:
    """This process's directory for materialized starting files, removed at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._owner = 0

    def new_dir(self) -> Path:
        with self._lock:
            if self._path is None or self._owner != os.getpid():
                # A forked child gets its own root: it must not write into (or remove)
                # its parent's.
                path = Path(tempfile.gettempdir()) / f"ksi-tasks-{os.getpid()}-{uuid.uuid4().hex}"
                path.mkdir(mode=0o700)
                atexit.register(_remove_tree, path, os.getpid())
                self._path, self._owner = path, os.getpid()
            root = self._path
        return Path(tempfile.mkdtemp(prefix="task-", dir=root))


def _remove_tree(path: Path, owner_pid: int) -> None:
    # A forked child that exits normally must not delete its parent's files.
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)


_SCRATCH = _ScratchRoot()


def scratch_dir() -> Path:
    """A new empty directory that lives until this process exits."""
    return _SCRATCH.new_dir()


def write_json_atomic(
    path: Path,
    data: Any,
    *,
    durable: bool = True,
    indent: int | None = 2,
    parents: bool = True,
) -> None:
    """Write JSON so a reader sees either the old file or the new one, never half of one.

    ``durable=False`` skips the fsync, for copies of data whose durable home
    is elsewhere (an attempt's ``record.json`` duplicates its journal line);
    ``indent=None`` writes one line with the (much faster) C encoder.
    ``parents=False`` raises ``FileNotFoundError`` rather than re-creating a
    directory that was deleted (a run directory removed while the run goes).
    A failure (a full disk...) leaves the old file as it was and no
    temporary file behind.
    """
    # dumps, not dump: only a one-shot encode uses the C encoder
    text = json.dumps(data, indent=indent, ensure_ascii=False, default=str)
    write_text_atomic(path, text + "\n", durable=durable, parents=parents)


def write_text_atomic(path: Path, text: str, *, durable: bool = True, parents: bool = True) -> None:
    """Write ``text`` (UTF-8) as :func:`write_json_atomic` writes JSON: all or nothing."""
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_line_durably(path: Path, line: bytes) -> None:
    """Append ``line`` (one JSON line, newline included) with one ``write``, then ``fsync``.

    A ``kill -9`` leaves at most a torn last line, which readers skip; this
    trims it before appending, so the torn line never glues itself to the new one.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":  # torn: read back to its start
            keep = os.pread(fd, size, 0).rfind(b"\n") + 1
            os.ftruncate(fd, keep)
        os.lseek(fd, 0, os.SEEK_END)
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
