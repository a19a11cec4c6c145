"""The append-only journal: one durable JSON line per finished attempt.

Each record is written with a single ``write`` of a complete line, under a
lock, so a ``kill -9`` at any moment leaves every finished attempt in the file
and at most one torn line at the end. Reading skips (and the next writer
trims) that torn tail, so resume never trips over it. ``fsync`` makes the
lines survive a crash of the machine too: :meth:`Journal.append` syncs before
it returns; a run's driver writes with :meth:`Journal.write` and lets a
background thread sync (one ``fsync`` for every line written meanwhile, off
the driver's path), and nobody hears of a record before it is synced.

A damaged line anywhere else is not a crash's doing: reading skips it too,
but :func:`journal_warnings` says so (file, line number), and the writer
keeps the line's bytes in ``journal.corrupt`` beside the journal. A write
that fails half-way (a full disk) is cut back to the last whole line, and a
small reserve file, given back when the disk is full, leaves room for the
records of the attempts still in flight. Before each append the writer checks
that the journal and its directory are still the ones it opened: a run whose
directory was deleted must stop, not write into a file nobody can see.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from pathlib import Path

import attrs

from ksi.attempt.diskfull import DiskFullError, disk_full_as_error, is_disk_full, where_full
from ksi.errors import KsiError
from ksi.records import AttemptRecord
from ksi.relpaths import clean_relative_path
from ksi.serialization import dumps_line, from_data

#: Bytes kept free for the journal (``journal.reserve``), released on a full disk.
RESERVE_BYTES = 256 * 1024
#: Damaged lines named one by one in a warning; the rest are counted.
MAX_LINES_NAMED = 10


class RunDirectoryGone(KsiError):
    """The run directory (or its journal) was deleted or replaced while the run went."""

    exit_code = 1


@attrs.frozen
class CorruptLine:
    """A line of the journal that is not a record (1-based line number, bytes as found)."""

    line: int
    raw: bytes
    reason: str


@attrs.frozen
class JournalContents:
    records: tuple[AttemptRecord, ...]
    #: Damaged lines before the last one: the journal's content, not a crash, broke them.
    corrupt: tuple[CorruptLine, ...] = ()
    #: A partial last line (a crash mid-write), ``b""`` when there is none.
    torn_tail: bytes = b""
    #: The 1-based line number of ``torn_tail``.
    torn_tail_line: int = 0


def corrupt_path(journal: Path) -> Path:
    """Where the writer keeps the bytes of damaged lines: ``journal.corrupt`` beside it."""
    return journal.with_suffix(".corrupt")


def reserve_path(journal: Path) -> Path:
    return journal.with_suffix(".reserve")


def read_journal(path: Path) -> JournalContents:
    """Every record, and every line that is not one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JournalContents(records=())
    lines = data.split(b"\n")
    # The last element is b"" after a final newline, or a torn line after a crash.
    records: list[AttemptRecord] = []
    corrupt: list[CorruptLine] = []
    for number, raw in enumerate(lines[:-1], start=1):
        if not raw.strip():
            continue
        try:
            records.append(from_data(json.loads(raw), AttemptRecord))
        except Exception as exc:  # any damage: JSON, UTF-8, a field of the wrong type
            corrupt.append(CorruptLine(number, raw, _reason(exc)))
    return JournalContents(tuple(records), tuple(corrupt), lines[-1], len(lines))


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(exc).__name__}: {text}"


def read_records(path: Path) -> list[AttemptRecord]:
    """Every complete record in the journal, in the order written."""
    return list(read_journal(path).records)


def journal_warnings(path: Path, contents: JournalContents | None = None) -> list[str]:
    """What a user must hear about damaged journal lines (none for a clean journal)."""
    contents = contents if contents is not None else read_journal(path)
    bad = contents.corrupt
    if not bad:
        return []
    named = ", ".join(f"{c.line} ({c.reason})" for c in bad[:MAX_LINES_NAMED])
    more = f" and {len(bad) - MAX_LINES_NAMED} more" if len(bad) > MAX_LINES_NAMED else ""
    one = len(bad) == 1
    return [
        f"{path}: damaged {'line' if one else 'lines'} {named}{more} skipped. "
        "An attempt recorded on a damaged line counts as not run: it is missing from "
        "these figures, a resume runs it again, and its old directory is kept as "
        "<dir>.unreadable-<n>. `ksi run` keeps a copy of each damaged line in "
        f"{corrupt_path(path).name} beside the journal; delete "
        f"{'it' if one else 'them'} from the journal to end this warning."
    ]


def latest_by_attempt(records: list[AttemptRecord]) -> dict[tuple[str, int], AttemptRecord]:
    """The last record per (task, attempt): a retry or a regrade supersedes earlier ones."""
    latest: dict[tuple[str, int], AttemptRecord] = {}
    for rec in records:
        latest[(rec.task_id, rec.attempt)] = rec
    return latest


def in_run(rec: AttemptRecord) -> AttemptRecord:
    """``rec`` with no ``attempt_dir`` when the journal names one outside the run.

    The journal is data from whoever wrote the run directory: ``../x`` or an
    absolute path would make a reader (the view, ``ksi show``, ``ksi regrade``,
    the distillers' evidence) list, inline, grade or write another directory's
    files. Readers then reach what is inside through no symlink either
    (:func:`ksi.fstree.open_dir_inside`).
    """
    if rec.attempt_dir and clean_relative_path(rec.attempt_dir)[1]:
        return attrs.evolve(rec, attempt_dir="")
    return rec


def spending_records(records: list[AttemptRecord]) -> list[AttemptRecord]:
    """The records of attempts that ran (every try spent tokens); regrades spent nothing.

    A regrade copies the attempt's usage into its new record, so counting
    it again would double the tokens and the cost.
    """
    return [r for r in records if not r.regraded_at]


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _keep_damaged_lines(path: Path, contents: JournalContents) -> None:
    """Copy each damaged line to ``journal.corrupt`` once (resumes do not repeat it)."""
    entries = [b"line %d: %s\n" % (c.line, c.raw) for c in contents.corrupt]
    if contents.torn_tail:
        entries.append(
            b"line %d (torn last line, trimmed): %s\n"
            % (contents.torn_tail_line, contents.torn_tail)
        )
    if not entries:
        return
    target = corrupt_path(path)
    try:
        kept = target.read_bytes()
    except FileNotFoundError:
        kept = b""
    new = b"".join(e for e in entries if e not in kept)
    if new:
        with open(target, "ab") as fh:
            fh.write(new)
            fh.flush()
            os.fsync(fh.fileno())


def _trim_torn_tail(path: Path) -> None:
    """Drop a partial last line left by a crash, so the next append starts clean."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        content = fh.read()
        keep = content.rfind(b"\n") + 1
        fh.truncate(keep)


class Journal:
    """Appends records durably; safe to call from many attempt threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._dir_identity = _identity(os.stat(path.parent))
        #: What the journal held when opened (read once: a long journal takes a while).
        self.contents = read_journal(path)
        #: Every record in the journal now: those read at opening, then each one written
        #: here. Only one writer holds a run directory, so this is what a fresh read
        #: would return, without parsing a long journal again.
        self._records = list(self.contents.records)
        self._reserve = reserve_path(path)
        #: The background sync: how many of ``_records`` (and bytes of the file) are synced,
        #: and what a failed ``fsync`` raised (every later write and wait raises it).
        self._synced = threading.Condition(self._lock)
        self._sync_lock = threading.Lock()
        self._durable = len(self._records)
        self._durable_size = 0
        self._size = 0
        self._sync_error: BaseException | None = None
        self._syncer: threading.Thread | None = None
        self._closing = False
        with disk_full_as_error(path.parent, "the journal"):
            _keep_damaged_lines(path, self.contents)
            _trim_torn_tail(path)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                self._size = self._durable_size = os.fstat(self._fd).st_size
                self._make_reserve()
            except BaseException:
                self.close()
                raise

    # -- opening ----------------------------------------------------------------
    def _make_reserve(self) -> None:
        """Set aside room for the records of attempts still running when the disk fills."""
        try:
            if self._reserve.stat().st_size >= RESERVE_BYTES:
                return
        except FileNotFoundError:
            pass
        try:
            fd = os.open(self._reserve, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self._reserve.unlink()
            if is_disk_full(exc):
                raise
            # Another failure (a filesystem without fallocate): run without a reserve.

    # -- writing ----------------------------------------------------------------
    def check_present(self) -> None:
        """Raise :class:`RunDirectoryGone` if the journal or its directory was deleted or replaced.

        Appending to a deleted journal would succeed, into a file nobody can
        ever read again, and the run would end "complete" with nothing kept.
        """
        gone = os.fstat(self._fd).st_nlink == 0 if self._fd >= 0 else False
        try:
            moved = _identity(os.stat(self.path.parent)) != self._dir_identity
        except FileNotFoundError:
            moved = True
        if gone or moved:
            what = "its journal was deleted" if gone else "it was deleted, moved or replaced"
            raise RunDirectoryGone(
                f"run directory {self.path.parent}: {what} while the run was going; "
                "the run stopped. Records of attempts finished since then are lost, and "
                "whatever was written at that path since is not a run directory; restore "
                "the directory and resume it, or start a new run."
            )

    def append(self, record: AttemptRecord) -> None:
        """Write ``record``'s line and sync it: durable when this returns."""
        self._wait_durable(self.write(record, background_sync=False), sync_here=True)

    def write(self, record: AttemptRecord, *, background_sync: bool = True) -> int:
        """Append ``record``'s line with one ``write``; return how many records are written.

        A ``kill -9`` of KSI keeps the line from here on; a crash of the
        machine only once it is synced: the background thread syncs it (with
        every other line written meanwhile) unless ``background_sync`` is
        false. :meth:`durable` and :meth:`wait_durable` say when it is.
        """
        line = (dumps_line(record) + "\n").encode("utf-8")
        with self._lock:
            self._raise_sync_error()
            self.check_present()
            try:
                self._write_whole_line(line)
            except OSError as exc:
                if not is_disk_full(exc):
                    raise
                if not self._release_reserve():
                    raise self._full(exc) from exc
                try:
                    self._write_whole_line(line)
                except OSError as again:
                    if not is_disk_full(again):
                        raise
                    raise self._full(again) from again
            self._records.append(record)
            count = len(self._records)
            if background_sync:
                self._start_syncer()
                self._synced.notify_all()
            return count

    def durable(self) -> int:
        """How many records are synced (raises what a failed background sync raised)."""
        with self._lock:
            self._raise_sync_error()
            return self._durable

    def wait_durable(self, count: int) -> None:
        """Return once the first ``count`` records are synced (or raise why they cannot be)."""
        self._wait_durable(count, sync_here=self._syncer is None)

    def _wait_durable(self, count: int, *, sync_here: bool) -> None:
        if sync_here:
            with contextlib.suppress(OSError, DiskFullError):  # kept, and raised below
                self._sync()
        with self._lock:
            self._synced.wait_for(lambda: self._durable >= count or self._sync_error is not None)
            self._raise_sync_error()

    def records(self) -> list[AttemptRecord]:
        """The journal's records, in the order written (a copy: appends go on)."""
        with self._lock:
            return list(self._records)

    def current(self) -> JournalContents:
        """What reading the journal now would give (damaged lines as found at opening)."""
        return attrs.evolve(self.contents, records=tuple(self.records()), torn_tail=b"")

    def _write_whole_line(self, line: bytes) -> None:
        """Append ``line`` whole, or leave the journal exactly as it was."""
        size = os.fstat(self._fd).st_size
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            raise
        self._size = size + len(line)

    # -- syncing -----------------------------------------------------------------
    def _start_syncer(self) -> None:
        if self._syncer is None:
            self._syncer = threading.Thread(target=self._sync_loop, name="ksi-journal", daemon=True)
            self._syncer.start()

    def _sync_loop(self) -> None:
        """Sync whatever was written since the last sync, until :meth:`close`."""
        while True:
            with self._lock:
                self._synced.wait_for(lambda: self._closing or len(self._records) > self._durable)
                if len(self._records) == self._durable and self._closing:
                    return
            try:
                self._sync()
            except (OSError, DiskFullError):  # kept for the waiters: the run stops on it
                return

    def _sync(self) -> None:
        """``fsync`` the journal: every record written before the call becomes durable.

        A failed sync (a full disk that delayed allocation hits only now, an
        I/O error) cuts the journal back to its last synced line: the records
        after it were never told to anyone, so their attempts run again on a
        resume. The failure is kept and raised to every later caller.
        """
        with self._sync_lock:  # one sync at a time (the thread's, or append's own)
            with self._lock:
                if self._fd < 0 or self._sync_error is not None:
                    return
                count, size = len(self._records), self._size
            try:
                os.fsync(self._fd)
            except OSError as exc:
                with self._lock:
                    self._recover(exc)
                return
            with self._lock:
                if count > self._durable:
                    self._durable, self._durable_size = count, size
                self._synced.notify_all()

    def _recover(self, exc: OSError) -> None:
        """After a failed ``fsync``: back to the last synced line, and (a full disk) once
        more with the reserve given back; else keep the error and raise it."""
        error: BaseException = exc
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._durable_size)
        self._size = self._durable_size
        if is_disk_full(exc) and self._release_reserve():
            try:
                for record in self._records[self._durable :]:
                    self._write_whole_line((dumps_line(record) + "\n").encode("utf-8"))
                os.fsync(self._fd)
            except OSError as again:
                error = again
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._durable_size)
                self._size = self._durable_size
            else:
                self._durable, self._durable_size = len(self._records), self._size
                self._synced.notify_all()
                return
        del self._records[self._durable :]
        if isinstance(error, OSError) and is_disk_full(error):
            full = self._full(error)
            full.__cause__ = error
            error = full
        self._sync_error = error
        self._synced.notify_all()
        raise error

    def _raise_sync_error(self) -> None:
        error = self._sync_error
        if error is None:
            return
        if isinstance(error, DiskFullError):
            raise DiskFullError(*error.args) from error.__cause__
        raise OSError(
            getattr(error, "errno", None) or errno.EIO, f"the journal could not be synced: {error}"
        ) from error

    def _release_reserve(self) -> bool:
        try:
            self._reserve.unlink()
        except FileNotFoundError:
            return False
        return True

    def _full(self, exc: OSError) -> DiskFullError:
        return DiskFullError(
            f"disk full: {where_full(self.path.parent)} has no space left: "
            f"a record could not be written to {self.path} ({exc.strerror})."
        )

    def close(self) -> None:
        """Sync what was written (the background thread's last round), then close."""
        with self._lock:
            self._closing = True
            self._synced.notify_all()
            syncer = self._syncer
        if syncer is not None:
            syncer.join()
        with self._lock:
            if self._fd >= 0:
                if self._sync_error is None and self._durable < len(self._records):
                    with contextlib.suppress(OSError):
                        os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1
