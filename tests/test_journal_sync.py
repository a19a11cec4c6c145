"""The journal's background sync: lines written at once, synced off the driver's path, and a
failed sync never leaves a record anyone heard of out of the file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ksi.attempt.diskfull import DiskFullError
from ksi.records import AttemptRecord, AttemptStatus
from ksi.rundir import journal as journal_mod
from ksi.rundir.journal import Journal, read_records


def _record(n: int) -> AttemptRecord:
    return AttemptRecord(
        task_id=f"t{n}",
        attempt=1,
        status=AttemptStatus.SCORED,
        score=1.0,
        agent="command",
        evaluator="command",
        environment="local",
        attempt_dir=f"attempts/t{n}/1",
    )


def test_written_lines_are_in_the_file_at_once_and_durable_once_synced(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    counts = [journal.write(_record(n)) for n in range(5)]
    assert counts == [1, 2, 3, 4, 5]
    # Written with one write each: another reader (a kill -9 of KSI) sees every line now.
    assert [r.task_id for r in read_records(path)] == [f"t{n}" for n in range(5)]
    journal.wait_durable(5)
    assert journal.durable() == 5
    journal.close()
    assert [r.task_id for r in read_records(path)] == [f"t{n}" for n in range(5)]


def test_a_failed_sync_cuts_back_to_the_last_synced_line_and_stops_every_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC from fsync (delayed allocation): once the reserve is spent, the lines not yet
    synced leave the file (their attempts run again on a resume: nobody heard of them) and
    the error reaches whoever waits or writes next."""
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.append(_record(0))  # synced
    journal_mod.reserve_path(path).unlink()  # no reserve left to give back
    real_fsync = os.fsync

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_mod.os, "fsync", full)
    count = journal.write(_record(1))
    with pytest.raises(DiskFullError):
        journal.wait_durable(count)
    with pytest.raises(DiskFullError):
        journal.write(_record(2))
    monkeypatch.setattr(journal_mod.os, "fsync", real_fsync)
    journal.close()
    assert [r.task_id for r in read_records(path)] == ["t0"]
    assert path.read_bytes().endswith(b"\n")


def test_a_failed_sync_with_the_reserve_left_writes_the_lines_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    real_fsync = os.fsync
    failures = [OSError(errno.ENOSPC, "No space left on device")]

    def once_full(fd: int) -> None:
        if failures:
            raise failures.pop()
        real_fsync(fd)

    monkeypatch.setattr(journal_mod.os, "fsync", once_full)
    journal.wait_durable(journal.write(_record(1)))
    assert journal.durable() == 1
    assert not journal_mod.reserve_path(path).exists()  # given back to make room
    journal.close()
    assert [r.task_id for r in read_records(path)] == ["t1"]
