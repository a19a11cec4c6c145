"""Readers of a run directory read only inside it, whatever its journal or its links say.

A run directory may come from someone else (a shared artifact, a colleague's
run); its journal names each attempt's directory. A record whose
``attempt_dir`` leaves the run (``../x``, an absolute path), or an attempt
directory that is a symlink to elsewhere, must not make ``ksi view`` inline
or ``ksi show`` print the files it names.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from ksi.view.runs import load_run_view
from tests.run_helpers import ksi
from tests.view_runs import record, write_run

SECRET = "host-secret-b4dc0de"


def outside_dir(tmp_path: Path) -> Path:
    """A directory beside the run holding what an attempt directory holds: all secret."""
    where = tmp_path / "outside"
    (where / "eval").mkdir(parents=True)
    for name in ("prompt.md", "diff.patch", "agent.stdout.log", "agent.stderr.log"):
        (where / name).write_text(f"{SECRET} in {name}\n")
    (where / "eval" / "eval.stdout.log").write_text(f"{SECRET} in eval\n")
    return where


@pytest.fixture
def hostile_run(tmp_path: Path) -> Path:
    outside = outside_dir(tmp_path)
    run = write_run(
        tmp_path / "run",
        ["up", "abs", "linked", "fine"],
        [
            attrs.evolve(record("up", 1, 0.0), attempt_dir="../outside"),
            attrs.evolve(record("abs", 1, 0.0), attempt_dir=str(outside)),
            record("linked", 1, 0.0),
            record("fine", 1, 1.0),
        ],
    )
    (run / "attempts" / "linked").mkdir(parents=True)
    (run / "attempts" / "linked" / "1").symlink_to(outside, target_is_directory=True)
    (run / "attempts" / "fine" / "1").mkdir(parents=True)
    (run / "attempts" / "fine" / "1" / "agent.stdout.log").write_text("the fine agent's log\n")
    # A file inside an attempt directory linking out is not read either.
    (run / "attempts" / "fine" / "1" / "prompt.md").symlink_to(outside / "prompt.md")
    (outside / "trajectory.json").write_text(
        json.dumps({"agent": {"name": SECRET}, "steps": [{"source": "user", "message": SECRET}]})
    )
    (run / "attempts" / "fine" / "1" / "trajectory.json").symlink_to(outside / "trajectory.json")
    return run


def test_the_view_model_holds_nothing_from_outside_the_run(hostile_run: Path) -> None:
    view = load_run_view(hostile_run)
    by_task = {t.task_id: t.attempts[0] for t in view.tasks}
    for task_id in ("up", "abs", "linked"):
        attempt = by_task[task_id]
        assert attempt.files == {}, (task_id, attempt.files)
        for excerpt in (attempt.diff, attempt.agent_stdout, attempt.agent_stderr):
            assert SECRET not in excerpt.text
    fine = by_task["fine"]
    assert fine.agent_stdout.text == "the fine agent's log\n"
    assert fine.trajectory is None  # its trajectory.json links out of the run
    assert "prompt.md" not in fine.files
    assert all(SECRET not in t.prompt.text for t in view.tasks)


def test_ksi_view_and_ksi_show_never_show_files_outside_the_run(
    hostile_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "page.html"
    page = ksi("view", str(hostile_run), "-o", str(out))
    assert page.returncode == 0, page.stderr
    html = out.read_text(encoding="utf-8")
    assert SECRET not in html
    assert "outside" not in html  # no link leads out of the run either
    for task_id in ("up", "abs", "linked"):
        shown = ksi("show", str(hostile_run), task_id, "1")
        assert shown.returncode == 0, shown.stderr
        assert SECRET not in shown.stdout, shown.stdout
    fine = ksi("show", str(hostile_run), "fine", "1")
    assert "the fine agent's log" in fine.stdout and SECRET not in fine.stdout
    for task_id in ("up", "abs", "linked", "fine"):
        steps = ksi("show", str(hostile_run), task_id, "1", "--steps")
        assert steps.returncode == 0, steps.stderr
        assert SECRET not in steps.stdout and "no trajectory.json" in steps.stdout


def test_export_never_copies_a_trajectory_from_outside_the_run(
    hostile_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "exported"
    result = ksi("export", "trajectories", str(hostile_run), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "wrote 0 trajectories" in result.stdout
    # The linked directory and the linked file are named as not read; the journal's
    # paths out of the run are not even looked at.
    assert "unreadable: linked/1: not read" in result.stderr
    assert "unreadable: fine/1: not read" in result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert [p.name for p in out.rglob("*")] == ["index.jsonl"]
