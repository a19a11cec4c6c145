"""A run directory written by KSI 0.1.0 still reports, views and resumes.

``fixtures/run-0.1.0.tar.gz`` was made by ``ksi run`` at commit 3272d5e (before
the second structural pass) and killed with SIGKILL in its second generation:
five tasks (solved, partial credit, failing, no eval, and ``slow``, whose agent
sleeps once it has notes), ``--generations 3 --attempts 2``, so it holds a
finished and distilled generation 1, a torn generation 2 and notes in
``knowledge/1/``. ``fixtures/README.md`` has the command. Its files are what a
user's disk holds, so this test reads them as they are, never regenerated.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "run-0.1.0.tar.gz"
#: The options the run was started with; a resume must repeat them.
RUN_ARGS = [
    "run",
    "tasks.jsonl",
    "--agent",
    "command",
    "--agent-option",
    "cmd=sh ../../../../../agent.sh",
    "--run-dir",
    "run",
    "--generations",
    "3",
    "--attempts",
    "2",
    "--concurrency",
    "2",
]


def _ksi(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ksi", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _records(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path


def test_the_killed_old_run_reports_as_it_stands(old_run: Path) -> None:
    done = _ksi(old_run, "report", "run", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["run_complete"] is False
    assert report["summary"]["n_attempts"] == 16
    assert report["summary"]["solved_tasks"] == 1
    generations = report["summary"]["generations"]["generations"]
    assert [g["generation"] for g in generations] == [1, 2]
    assert generations[0]["distilled"] is True


def test_the_old_run_resumes_exactly_once_and_then_reports_and_views(old_run: Path) -> None:
    run = old_run / "run"
    journal_before = (run / "journal.jsonl").read_bytes()
    phases_before = [
        json.loads(line) for line in (run / "generations.jsonl").read_text().splitlines()
    ]
    # The agent no longer sleeps, so the resumed run can finish.
    agent = old_run / "agent.sh"
    agent.write_text(agent.read_text().replace("sleep 120", "true"))

    done = _ksi(old_run, *RUN_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "run: complete" in done.stdout

    # What the old run journalled stays, byte for byte; what it lacked is added once.
    assert (run / "journal.jsonl").read_bytes().startswith(journal_before)
    records = _records(run)
    keys = [(r["task_id"], r["attempt"], r["try_number"]) for r in records]
    # Generation 2 keeps the plan it started with (the task without an eval, `manual`,
    # included); generation 3, planned by this KSI, runs only tasks that can be scored.
    assert len(keys) == len(set(keys)) == 24
    assert {r["task_id"] for r in records if r["generation"] == 3} == {"partial", "failing", "slow"}
    gen2_tasks = next(p for p in phases_before if p["kind"] == "started" and p["generation"] == 2)
    assert {r["task_id"] for r in records if r["generation"] == 2} == set(gen2_tasks["task_ids"])
    assert sum(1 for r in records if r["generation"] == 1) == 10

    phases = [json.loads(line) for line in (run / "generations.jsonl").read_text().splitlines()]
    assert phases[: len(phases_before)] == phases_before
    distilled = [p["generation"] for p in phases if p["kind"] == "distilled"]
    assert distilled == [1, 2, 3]
    assert (run / "knowledge" / "3" / "notes.json").is_file()

    report = json.loads(_ksi(old_run, "report", "run", "--json").stdout)
    assert report["run_complete"] is True
    assert report["summary"]["n_attempts"] == 24
    assert [g["generation"] for g in report["summary"]["generations"]["generations"]] == [1, 2, 3]

    page = old_run / "view.html"
    viewed = _ksi(old_run, "view", "run", "-o", str(page))
    assert viewed.returncode == 0, viewed.stderr
    html = page.read_text()
    for task in ("solved", "partial", "failing", "manual", "slow"):
        assert task in html

    shown = _ksi(old_run, "show", "run", "partial")
    assert shown.returncode == 0, shown.stderr
    assert "0.50" in shown.stdout

    # Running the same command again finds nothing left to do.
    again = _ksi(old_run, *RUN_ARGS)
    assert again.returncode == 0, again.stderr
    assert len(_records(run)) == 24


def test_the_old_runs_notes_can_be_searched_and_its_resume_stores_them(old_run: Path) -> None:
    run = old_run / "run"
    assert not (run / "knowledge.sqlite").exists(), "0.1.0 had no knowledge store"
    # Read as it is: its notes and evidence, into a store in memory; nothing is written.
    stats = _ksi(old_run, "knowledge", "stats", "--run-dir", "run", "--json")
    assert stats.returncode == 0, stats.stderr
    figures = json.loads(stats.stdout)
    assert figures["stored_generations"] == 1 and figures["notes"] > 0
    found = _ksi(old_run, "knowledge", "search", "score", "--run-dir", "run", "--json")
    assert found.returncode == 0 and json.loads(found.stdout)["hits"]
    assert not (run / "knowledge.sqlite").exists()

    agent = old_run / "agent.sh"
    agent.write_text(agent.read_text().replace("sleep 120", "true"))
    done = _ksi(old_run, *RUN_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    # The first resume stored the old notes (generation 1, as its files hold them) and
    # the journal's evidence; the rest went in as the run went on.
    stats = _ksi(old_run, "knowledge", "stats", "--run-dir", "run", "--json")
    figures = json.loads(stats.stdout)
    assert figures["stored_generations"] == 3
    scored = {(r["task_id"], r["attempt"]) for r in _records(run) if r["status"] == "scored"}
    assert figures["attempts"] == len(scored)
    old_notes = json.loads((run / "knowledge" / "1" / "notes.json").read_text())["notes"]
    shown = _ksi(old_run, "knowledge", "show", old_notes[0]["id"], "--run-dir", "run", "--json")
    assert json.loads(shown.stdout)["note"]["text"] == old_notes[0]["text"]
