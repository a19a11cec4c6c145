"""The append-only journal: one durable JSON line per finished attempt.

Each record is written with a single ``write`` of a complete line followed by
``fsync``, under a lock, so a ``kill -9`` at any moment leaves every finished
attempt on disk and at most one torn line at the end. Reading skips (and the
next writer trims) that torn tail, so resume never trips over it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from ksi.runner.models import AttemptRecord
from ksi.serialization import dumps_line, from_data


def read_records(path: Path) -> list[AttemptRecord]:
    """Every complete record in the journal, in the order written."""
    return list(_iter_records(path))


def _iter_records(path: Path) -> Iterator[AttemptRecord]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    lines = data.split(b"\n")
    # The last element is b"" after a final newline, or a torn line after a crash.
    for raw in lines[:-1]:
        if not raw.strip():
            continue
        try:
            yield from_data(json.loads(raw), AttemptRecord)
        except Exception:  # a corrupt line is skipped, not fatal: resume re-runs it
            continue


def latest_by_attempt(records: list[AttemptRecord]) -> dict[tuple[str, int], AttemptRecord]:
    """The last record per (task, attempt): a retry or a regrade supersedes earlier ones."""
    latest: dict[tuple[str, int], AttemptRecord] = {}
    for rec in records:
        latest[(rec.task_id, rec.attempt)] = rec
    return latest


def spending_records(records: list[AttemptRecord]) -> list[AttemptRecord]:
    """The records of attempts that ran (every try spent tokens); regrades spent nothing.

    A regrade copies the attempt's usage into its new record, so counting
    it again would double the tokens and the cost.
    """
    return [r for r in records if not r.regraded_at]


class Journal:
    """Appends records durably; safe to call from many attempt threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._trim_torn_tail()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _trim_torn_tail(self) -> None:
        """Drop a partial last line left by a crash, so the next append starts clean."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with open(self.path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            content = fh.read()
            keep = content.rfind(b"\n") + 1
            fh.truncate(keep)

    def append(self, record: AttemptRecord) -> None:
        line = (dumps_line(record) + "\n").encode("utf-8")
        with self._lock:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
