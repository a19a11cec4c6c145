"""A full disk during a run: recognise it, clean up after it, say so, resume later.

An agent (or its logs) can fill the disk a run lives on. KSI must not then
crash with a traceback, lose the attempt, or leave the filler behind. The
runner asks this module three things: is this exception a full disk
(:func:`is_disk_full`, also through wrapped errors and capture's skip list),
what does the attempt's record say (:func:`disk_full_message`, on an ``error``
of kind ``disk_full``: a resume runs it again, whatever ``--retries`` says),
and what to delete so space comes back (:func:`wipe_after_disk_full`: the
agent's files and their copies; its logs are cut to their tail).
:class:`DiskFullWatch` remembers where the disk filled and words the one error
the run ends with.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ksi.attempt.capture import remove_tree
from ksi.errors import KsiError
from ksi.records import AttemptRecord, ErrorKind
from ksi.serialization import write_json_atomic

#: Out of space, or out of the user's quota: the same remedy.
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: Parts of an attempt directory that hold the agent's files (or copies of them).
_AGENT_FILES = ("workspace", "captured", "eval/repo", "eval/workspace")
#: What is kept of each log of an attempt the full disk stopped.
LOG_TAIL_BYTES = 64 * 1024


class DiskFullError(KsiError):
    """The disk filled up: the run stopped; it resumes once there is space again."""

    exit_code = 1


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or any error it was raised from, says the disk is full."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _FULL_ERRNOS:
            return True
        if isinstance(current, shutil.Error) and any(
            _says_disk_full(str(item)) for item in _flatten(current.args)
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def _flatten(items: Iterable[Any]) -> Iterator[Any]:
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flatten(item)
        else:
            yield item


def _says_disk_full(text: str) -> bool:
    return any(os.strerror(code) in text for code in _FULL_ERRNOS)


def disk_full_message(exc: BaseException) -> str:
    """The ``error`` of an attempt a full disk stopped (its ``error_kind`` is ``disk_full``)."""
    return f"disk full: {_describe(exc)}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else str(exc.strerror)
    return f"{type(exc).__name__}: {exc}"


def reruns_on_resume(record: AttemptRecord) -> bool:
    """A full disk, or a worker that died, is no fault of the attempt: resume runs it
    again, ``--retries`` or not."""
    return record.error_kind in (ErrorKind.DISK_FULL, ErrorKind.WORKER_LOST)


def wipe_after_disk_full(attempt_dir: Path) -> None:
    """Give back what the attempt took, so a filler (or a flood of output) does not outlive it.

    The agent's files and their copies are deleted; its logs are cut to
    their last :data:`LOG_TAIL_BYTES` (an agent printing without end fills a
    disk as surely as one writing files). The prompt and record stay.
    """
    for part in _AGENT_FILES:
        with contextlib.suppress(OSError):
            remove_tree(attempt_dir / part)
    for log in (*attempt_dir.glob("*.log"), *attempt_dir.glob("eval/*.log")):
        with contextlib.suppress(OSError):
            _keep_tail(log)


def _keep_tail(path: Path) -> None:
    with open(path, "rb+") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= LOG_TAIL_BYTES:
            return
        fh.seek(size - LOG_TAIL_BYTES)
        tail = fh.read()
        fh.seek(0)
        fh.truncate()  # frees the space first: the tail then fits
        fh.write(
            f"[ksi: the disk filled up; only the last {LOG_TAIL_BYTES} of {size} bytes "
            "of this log are kept]\n".encode()
            + tail
        )


def save_unless_disk_full(path: Path, data: Any, **options: Any) -> bool:
    """``write_json_atomic``, but ``False`` instead of an exception when the disk is full.

    For files whose content is also kept elsewhere (an attempt's
    ``record.json`` copies its journal line) or that can wait (``run.json``
    at the end of a session the disk stopped): a full disk must not cost the
    attempt its journal line or the run its clear message. With
    ``parents=False`` a directory deleted meanwhile is not re-created and the
    write is skipped: the journal reports the deletion.
    """
    try:
        write_json_atomic(path, data, **options)
    except FileNotFoundError:
        if options.get("parents", True):
            raise
    except OSError as exc:
        if is_disk_full(exc):
            return False
        raise
    return True


def mount_point(path: Path) -> Path:
    """The mount point of the filesystem holding ``path`` (or its nearest existing parent)."""
    current = Path(os.path.abspath(path))
    while not current.exists() and current != current.parent:
        current = current.parent
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def _size(n: int) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, i = float(n), 0
    while value >= 1024 and i < len(units) - 1:
        value, i = value / 1024, i + 1
    return f"{n} B" if i == 0 else f"{value:.1f} {units[i]}"


def where_full(path: Path) -> str:
    """``the filesystem mounted at /x (8.0 MiB, 0 B free now)`` for messages."""
    mount = mount_point(path)
    try:
        usage = shutil.disk_usage(mount)
    except OSError:
        return f"the filesystem mounted at {mount}"
    return f"the filesystem mounted at {mount} ({_size(usage.total)}, {_size(usage.free)} free now)"


class DiskFullWatch:
    """What a run saw of a full disk; thread-safe (attempts report from their threads)."""

    def __init__(self, run_root: Path) -> None:
        self.run_root = run_root
        self._lock = threading.Lock()
        self._where: Path | None = None
        self.attempts_stopped = 0
        #: The journal itself could not take a record (its reserve was used up).
        self.journal_failed = False

    @property
    def happened(self) -> bool:
        return self._where is not None

    def note(
        self,
        exc: BaseException | None = None,
        *,
        attempt_stopped: bool = False,
        journal_failed: bool = False,
    ) -> None:
        """Remember the full disk (the first path that could not be written)."""
        filename = getattr(exc, "filename", None)
        where = Path(filename) if isinstance(filename, (str, os.PathLike)) else self.run_root
        with self._lock:
            if self._where is None:
                self._where = Path(where)
            if attempt_stopped:
                self.attempts_stopped += 1
            self.journal_failed = self.journal_failed or journal_failed

    def stop_reason(self) -> str:
        return f"disk full: {where_full(self._where or self.run_root)} ran out of space"

    def error(self, resume_hint: str) -> DiskFullError:
        """The error the run ends with: what happened, what KSI did, how to go on."""
        stopped = self.attempts_stopped
        plural = stopped != 1
        done = (
            f"{stopped} attempt{'s' if plural else ''} it stopped "
            f"{'are' if plural else 'is'} journalled as errors (run again on resume) and "
            f"{'their workspaces' if plural else 'its workspace'} removed; "
            if stopped
            else ""
        )
        kept = (
            "the journal could not take the record of an attempt that finished meanwhile "
            "(it runs again on resume); every other finished attempt is in the journal"
            if self.journal_failed
            else "every finished attempt is in the journal"
        )
        where = self._where or self.run_root
        return DiskFullError(
            f"disk full: {where_full(where)} ran out of space (writing {where}).\n"
            f"KSI stopped launching attempts; {done}{kept}.\n"
            "Free some space, then resume with the same command "
            f"(or: {resume_hint}): the attempts that did not finish run then."
        )


@contextlib.contextmanager
def disk_full_as_error(run_root: Path, doing: str) -> Iterator[None]:
    """Turn a full disk while ``doing`` something into a clear error instead of a traceback."""
    try:
        yield
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        raise DiskFullError(
            f"disk full: {where_full(run_root)} has no space left for {doing} "
            f"({run_root}). Free some space, then run the same command again."
        ) from exc
