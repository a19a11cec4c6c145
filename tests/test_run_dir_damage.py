"""A run directory damaged by hand or by the machine: KSI says so and loses nothing more.

A damaged journal line in the middle, a run directory deleted while the run
goes, ``run.json`` deleted beside a journal, and two runs started in the same
second without ``--run-dir``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ksi
from ksi.errors import RunError
from ksi.rundir.journal import read_journal
from ksi.runs.api import default_run_dir
from tests.run_helpers import journal_lines, write_tasks
from tests.run_helpers import ksi as ksi_cli

OK = "echo > repo/ok.txt"


def _tasks(tmp_path: Path, n: int) -> Path:
    return write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"task_id": f"t{i}", "prompt": "make ok.txt", "eval": {"command": "test -f ok.txt"}}
            for i in range(n)
        ],
    )


def _run_args(tasks: Path, run_dir: Path, cmd: str = OK, *extra: str) -> list[str]:
    return [
        "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={cmd}",
        "--run-dir", str(run_dir), *extra,
    ]  # fmt: skip


# -- a damaged line in the middle of the journal ---------------------------------


def test_damaged_middle_line_is_reported_kept_and_its_attempt_dir_never_overwritten(
    tmp_path: Path,
) -> None:
    tasks = _tasks(tmp_path, 4)
    run_dir = tmp_path / "run"
    first = ksi_cli(*_run_args(tasks, run_dir))
    assert first.returncode == 0, first.stderr
    journal = run_dir / "journal.jsonl"
    lines = journal.read_bytes().split(b"\n")
    damaged_task = json.loads(lines[1])["task_id"]
    damaged_dir = run_dir / json.loads(lines[1])["attempt_dir"]
    old_record = (damaged_dir / "record.json").read_text()
    bad = lines[1][:40] + b"\xff\x00 bit rot" + lines[1][60:]
    lines[1] = bad
    journal.write_bytes(b"\n".join(lines))

    report = ksi_cli("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    assert "solved: 3/4" in report.stdout
    assert f"warning: {journal}: damaged line 2 (" in report.stderr
    assert "counts as not run" in report.stderr
    as_json = json.loads(ksi_cli("report", str(run_dir), "--json").stdout)
    assert any("damaged line 2" in w for w in as_json["summary"]["warnings"])

    resumed = ksi_cli(*_run_args(tasks, run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert "solved: 4/4" in resumed.stdout
    assert f"{journal}: damaged line 2" in resumed.stderr
    aside = damaged_dir.with_name(damaged_dir.name + ".unreadable-1")
    assert f"moved it to {aside.name}" in resumed.stderr
    assert (aside / "record.json").read_text() == old_record, "the old attempt is kept whole"
    assert json.loads((damaged_dir / "record.json").read_text())["task_id"] == damaged_task
    assert journal.read_bytes().split(b"\n")[1] == bad, "the journal is never rewritten"
    assert (run_dir / "journal.corrupt").read_bytes() == b"line 2: " + bad + b"\n"

    # Another resume: nothing runs, nothing more is kept aside or copied.
    again = ksi_cli(*_run_args(tasks, run_dir))
    assert again.returncode == 0, again.stderr
    assert len(journal_lines_skipping_damage(journal)) == 4
    assert (run_dir / "journal.corrupt").read_bytes() == b"line 2: " + bad + b"\n"
    assert not damaged_dir.with_name(damaged_dir.name + ".unreadable-2").exists()


def journal_lines_skipping_damage(journal: Path) -> list[object]:
    return list(read_journal(journal).records)


def test_torn_last_line_is_trimmed_without_a_warning_and_its_bytes_kept(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, 2)
    run_dir = tmp_path / "run"
    ksi.run(tasks, agent="command", agent_options={"cmd": OK}, run_dir=run_dir)
    journal = run_dir / "journal.jsonl"
    torn = b'{"task_id":"t1","attempt":1,"sta'
    journal.write_bytes(journal.read_bytes().split(b"\n")[0] + b"\n" + torn)  # crash mid-write
    report = ksi_cli("report", str(run_dir))
    assert report.returncode == 0 and "warning" not in report.stderr, report.stderr
    summary = ksi.run(tasks, agent="command", agent_options={"cmd": OK}, run_dir=run_dir)
    assert summary.solved_tasks == 2
    # The attempt whose line was torn had finished: its directory is kept, and that is said.
    (lost,) = {"t0", "t1"} - {json.loads(journal.read_bytes().split(b"\n")[0])["task_id"]}
    assert len(summary.warnings) == 1 and "moved it to 1.unreadable-1" in summary.warnings[0]
    assert (run_dir / "attempts" / lost / "1.unreadable-1" / "record.json").exists()
    assert (run_dir / "journal.corrupt").read_bytes() == (
        b"line 2 (torn last line, trimmed): " + torn + b"\n"
    )
    assert read_journal(journal).torn_tail == b""


def test_directory_left_by_an_attempt_in_flight_is_still_just_replaced(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, 1)
    run_dir = tmp_path / "run"
    ksi.run(tasks, agent="command", agent_options={"cmd": OK}, run_dir=run_dir)
    (run_dir / "journal.jsonl").write_text("")
    attempt = run_dir / "attempts" / "t0" / "1"
    (attempt / "record.json").unlink()  # killed before the attempt finished
    summary = ksi.run(tasks, agent="command", agent_options={"cmd": OK}, run_dir=run_dir)
    assert summary.solved_tasks == 1 and summary.warnings == ()
    assert sorted(p.name for p in attempt.parent.iterdir()) == ["1"]


# -- the run directory deleted while the run goes ---------------------------------


def test_run_directory_deleted_mid_run_stops_the_run_loudly(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, 8)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ksi", *_run_args(tasks, run_dir, f"sleep 0.3; {OK}")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not journal_lines(run_dir):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.05)
    # As `rm -rf` would: the run may create an attempt directory meanwhile, so errors
    # (a directory not empty any more) are ignored; the journal is gone either way.
    shutil.rmtree(run_dir, ignore_errors=True)
    assert not (run_dir / "journal.jsonl").exists()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert f"error: run directory {run_dir}: " in err and "the run stopped" in err
    assert "Traceback" not in err
    assert not (run_dir / "journal.jsonl").exists() and not (run_dir / "run.json").exists()
    assert "solved" not in out, "no summary of a run that is gone"


# -- run.json deleted, journal kept ------------------------------------------------


def test_a_journal_without_run_json_is_never_adopted_by_a_new_run(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, 2)
    run_dir = tmp_path / "run"
    ksi.run(tasks, agent="command", agent_options={"cmd": OK}, run_dir=run_dir)
    (run_dir / "run.json").unlink()
    before = (run_dir / "journal.jsonl").read_bytes()

    other_agent = ksi_cli("run", str(tasks), "--agent", "nop", "--run-dir", str(run_dir))
    assert other_agent.returncode == 2, other_agent.stderr
    assert "holds a journal (journal.jsonl) but no run.json" in other_agent.stderr
    assert "use another --run-dir" in other_agent.stderr
    assert not (run_dir / "run.json").exists()
    assert (run_dir / "journal.jsonl").read_bytes() == before

    for args in (("run", "--resume", "--run-dir", str(run_dir)), ("report", str(run_dir))):
        result = ksi_cli(*args)
        assert result.returncode == 2, result.stderr
        assert "holds a journal (journal.jsonl) but no run.json" in result.stderr

    with pytest.raises(RunError, match=r"Restore run\.json to resume that run"):
        ksi.run(tasks, agent="nop", run_dir=run_dir)


# -- default run directory names ----------------------------------------------------


def test_default_run_names_are_unique_within_a_second(tmp_path: Path) -> None:
    names = {default_run_dir(tmp_path).name for _ in range(200)}
    assert len(names) == 200
    assert all(re.fullmatch(r"run-\d{8}-\d{6}-[0-9a-f]{6}", n) for n in names), names
    assert default_run_dir(tmp_path, "mine") == tmp_path / "mine"


def test_two_runs_started_together_without_run_dir_both_run(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, 1)
    root = tmp_path / "runs"
    args = [
        sys.executable, "-m", "ksi", "run", str(tasks), "--agent", "command",
        "--agent-option", f"cmd={OK}", "--runs-root", str(root),
    ]  # fmt: skip
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    runs = sorted(root.iterdir())
    assert len(runs) == 2
    assert all(len(journal_lines(r)) == 1 for r in runs)
