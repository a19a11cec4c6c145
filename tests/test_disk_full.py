"""A full disk during a run: a clear stop, every finished attempt journalled, no filler left.

The run directory lives on a small tmpfs the test mounts (root only); after
the disk is enlarged, the same command resumes the run to the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ksi.attempt.diskfull import DiskFullError
from ksi.records import AttemptRecord
from ksi.rundir.journal import Journal, read_journal
from tests.run_helpers import journal_lines, ksi, write_tasks

pytestmark = pytest.mark.mounts

#: t2's agent writes 1 MiB files into repo/ until the disk is full; every agent then waits
#: a little, so the attempts running beside it meet the full disk too.
AGENT = (
    'if [ "$KSI_TASK_ID" = t2 ]; then '
    "for i in $(seq 12); do head -c 1048576 /dev/zero > repo/fill$i || break; done; "
    "sleep 1; fi; sleep 0.5; echo done > repo/ok.txt"
)


def _mount(target: Path, size: str, *remount: str) -> subprocess.CompletedProcess[str]:
    options = ",".join((*remount, f"size={size}"))
    return subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = _mount(mnt, "8m")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True)


def _enlarge(mnt: Path) -> None:
    result = _mount(mnt, "64m", "remount")
    assert result.returncode == 0, result.stderr


def _run_args(tasks: Path, run_dir: Path) -> list[str]:
    return [
        "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={AGENT}",
        "--run-dir", str(run_dir), "--concurrency", "2",
    ]  # fmt: skip


def _tasks(tmp_path: Path, n: int) -> Path:
    return write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": f"t{i}",
                "prompt": "write ok.txt",
                "files": {"notes.txt": "starting file\n" * 100},
                "eval": {"command": "grep -q done ok.txt"},
            }
            for i in range(n)
        ],
    )


def _fillers(root: Path) -> list[Path]:
    return [p for p in root.rglob("fill*") if p.is_file()]


def test_full_disk_stops_the_run_cleanly_and_resume_finishes_it(
    tmp_path: Path, small_disk: Path
) -> None:
    tasks = _tasks(tmp_path, 6)
    run_dir = small_disk / "run"

    first = ksi(*_run_args(tasks, run_dir))
    assert first.returncode == 1, first.stderr
    assert "Traceback" not in first.stderr
    assert "error: disk full: the filesystem mounted at " + str(small_disk) in first.stderr
    assert "KSI stopped launching attempts" in first.stderr
    assert f"ksi run --resume --run-dir {run_dir}" in first.stderr
    assert _fillers(small_disk) == [], "the filler went with the workspace"

    records = journal_lines(run_dir)
    tries = Counter((r["task_id"], r["attempt"], r["try_number"]) for r in records)
    assert all(n == 1 for n in tries.values()), tries
    by_task = {r["task_id"]: r for r in records}
    assert by_task["t2"]["status"] == "error" and by_task["t2"]["error_kind"] == "disk_full"
    assert by_task["t2"]["error"].startswith("disk full: ")
    assert len(records) < 6, "no attempt is launched once the disk is full"
    for path in (run_dir / "attempts").glob("*/*/record.json"):
        rel = str(path.parent.relative_to(run_dir))
        assert [r["attempt_dir"] for r in records].count(rel) == 1, f"{rel} journalled once"
    assert read_journal(run_dir / "journal.jsonl").corrupt == ()

    # Still full (something else holds the space): resuming says so, and changes nothing.
    blocker = small_disk / "blocker"
    subprocess.run(["sh", "-c", f"head -c 64m /dev/zero > {blocker}"], capture_output=True)
    still_full = ksi(*_run_args(tasks, run_dir))
    assert still_full.returncode == 1, still_full.stderr
    assert "disk full" in still_full.stderr and "Traceback" not in still_full.stderr
    assert journal_lines(run_dir) == records
    blocker.unlink()

    _enlarge(small_disk)
    resumed = ksi(*_run_args(tasks, run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert "solved: 6/6" in resumed.stdout and "run: complete" in resumed.stdout
    after = journal_lines(run_dir)
    assert after[: len(records)] == records, "finished attempts are never redone"
    tries = Counter((r["task_id"], r["attempt"], r["try_number"]) for r in after)
    assert all(n == 1 for n in tries.values()), tries
    latest = {(r["task_id"], r["attempt"]): r for r in after}
    assert sorted(latest) == [(f"t{i}", 1) for i in range(6)]
    assert all(r["status"] == "scored" and r["score"] == 1.0 for r in latest.values())
    assert latest[("t2", 1)]["try_number"] == 1, "the attempt the disk stopped ran again"


def test_logs_that_fill_the_disk_are_cut_to_their_tail(tmp_path: Path, small_disk: Path) -> None:
    flood = (
        'if [ "$KSI_TASK_ID" = t1 ]; then head -c 30000000 /dev/zero | tr "\\0" x; fi; '
        "echo done > repo/ok.txt"
    )
    tasks = _tasks(tmp_path, 3)
    run_dir = small_disk / "run"
    args = [
        "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={flood}",
        "--run-dir", str(run_dir), "--concurrency", "1",
    ]  # fmt: skip
    first = ksi(*args)
    assert first.returncode == 1, first.stderr
    assert "error: disk full" in first.stderr and "Traceback" not in first.stderr
    log = run_dir / "attempts" / "t1" / "1" / "agent.stdout.log"
    kept = log.read_bytes()
    assert kept.startswith(b"[ksi: the disk filled up; only the last 65536 of ")
    assert kept.endswith(b"x" * 65536)
    assert shutil.disk_usage(small_disk).free > 6 * 1024 * 1024, "the space came back"
    assert {r["task_id"]: r["error_kind"] for r in journal_lines(run_dir)}["t1"] == "disk_full"

    _enlarge(small_disk)  # room for the 20 MiB the log cap allows
    resumed = ksi(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert "solved: 3/3" in resumed.stdout


def _record(task_id: str) -> AttemptRecord:
    return AttemptRecord(
        task_id=task_id,
        attempt=1,
        status="scored",
        score=1.0,
        agent="a",
        evaluator="e",
        environment="local",
        final_message="m" * 2000,
    )


def test_journal_writes_the_record_from_its_reserve_and_never_leaves_half_a_line(
    small_disk: Path,
) -> None:
    path = small_disk / "journal.jsonl"
    journal = Journal(path)
    try:
        journal.append(_record("before"))
        subprocess.run(
            ["sh", "-c", f"head -c 64m /dev/zero > {small_disk / 'filler'}"], capture_output=True
        )
        with pytest.raises(OSError):  # the disk is really full
            (small_disk / "probe").write_bytes(b"x" * 4096)
        journal.append(_record("while-full"))  # the reserve makes room for it
        # Nothing left to give back: a clear error, and the journal keeps only whole lines.
        with pytest.raises(DiskFullError, match="disk full"):
            for i in range(2000):
                journal.append(_record(f"more-{i}"))
    finally:
        journal.close()
    # Opening it again while the disk is still full: a clear error, not a traceback.
    with pytest.raises(DiskFullError, match="has no space left for the journal"):
        Journal(path)
    contents = read_journal(path)
    assert contents.corrupt == () and contents.torn_tail == b""
    assert [r.task_id for r in contents.records][:2] == ["before", "while-full"]


def test_a_forum_session_that_fills_the_disk_runs_again_on_resume(
    tmp_path: Path, small_disk: Path
) -> None:
    """The forum's sessions obey the disk as attempts do: the run stops with the disk-full
    error, the filler goes, and the session that met the full disk (only it) runs again."""
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": f"t{i}", "prompt": "p", "eval": {"command": "grep -q done ok.txt"}}
         for i in range(2)],
    )  # fmt: skip
    calls, mark = tmp_path / "calls", tmp_path / "filled"
    forum = (
        f"grep -o 'attempts/t./1' repo/evidence/attempt.json >> {calls}; "
        f"if grep -q attempts/t1/1 repo/evidence/attempt.json && [ ! -f {mark} ]; then "
        f"touch {mark}; for i in $(seq 12); do head -c 1048576 /dev/zero > repo/fill$i || break; "
        'done; fi; echo \'{"kind": "done"}\' > repo/posts/1.json'
    )
    run_dir = small_disk / "run"
    args = ["run", str(tasks), "--agent", "command",
            "--agent-option", "cmd=echo done > repo/ok.txt", "--generations", "2",
            "--forum-rounds", "1", "--forum-agent", "command",
            "--forum-agent-option", f"cmd={forum}", "--concurrency", "1",
            "--run-dir", str(run_dir)]  # fmt: skip
    first = ksi(*args)
    assert first.returncode == 1, first.stderr
    assert "error: disk full" in first.stderr and "Traceback" not in first.stderr
    assert _fillers(small_disk) == [], "the filler went with the session's workspace"
    sessions = (run_dir / "forum" / "1" / "sessions.jsonl").read_text().splitlines()
    assert not any("attempts/t1/1" in line for line in sessions), "the filled one is not kept"
    assert not (run_dir / "knowledge" / "1").exists(), "not distilled before its forum ended"

    _enlarge(small_disk)
    resumed = ksi(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert Counter(calls.read_text().split()) == {"attempts/t0/1": 1, "attempts/t1/1": 2}
    assert (run_dir / "knowledge" / "1" / "notes.json").is_file()
