"""Damaged or hostile knowledge files give clear errors, never crashes (issue 29 §5).

A damaged ``knowledge/<g>/notes.json`` used to break ``ksi report``, ``ksi view``
and resume with a traceback; a seed bundle holding a lone surrogate failed
after the run directory was created.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.run_helpers import ksi

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "generations"
RUN = ["run", str(DEMO / "tasks.jsonl"), "--agent", f"{DEMO / 'scripted_agent.py'}:ScriptedAgent"]


@pytest.fixture(scope="module")
def two_generations(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("damaged")
    done = ksi(*RUN, "--run-dir", str(root / "run"), "--generations", "2")
    assert done.returncode == 0, done.stderr
    return root / "run"


@pytest.fixture(params=["truncated", "wrong type", "not utf-8"])
def damaged(request: pytest.FixtureRequest, two_generations: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    subprocess.run(["cp", "-a", str(two_generations), str(run)], check=True)
    notes = run / "knowledge" / "1" / "notes.json"
    if request.param == "truncated":
        notes.write_bytes(notes.read_bytes()[:40])
    elif request.param == "wrong type":
        data = json.loads(notes.read_text())
        data["generation"] = "one"
        notes.write_text(json.dumps(data))
    else:
        notes.write_bytes(b'{"generation": "\xff"}')
    return run


def test_report_and_view_stand_without_the_damaged_notes_and_say_so(
    damaged: Path, tmp_path: Path
) -> None:
    report = ksi("report", str(damaged))
    assert report.returncode == 0, report.stderr
    assert "knowledge/1/notes.json: unreadable" in report.stdout + report.stderr
    assert "solved: 4/4" in report.stdout
    page = tmp_path / "page.html"
    view = ksi("view", str(damaged), "-o", str(page))
    assert view.returncode == 0, view.stderr
    assert "notes.json: unreadable" in page.read_text()


def test_resume_refuses_with_the_file_and_the_fix_and_changes_nothing(damaged: Path) -> None:
    journal = (damaged / "journal.jsonl").read_bytes()
    done = ksi(*RUN, "--run-dir", str(damaged), "--generations", "3")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "knowledge/1/notes.json: unreadable" in done.stderr
    assert "delete" in done.stderr and "distils generation 1 again" in done.stderr
    assert "Traceback" not in done.stderr
    assert (damaged / "journal.jsonl").read_bytes() == journal


def test_a_seed_bundle_with_a_lone_surrogate_is_refused_before_the_run_dir_exists(
    two_generations: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle.json"
    assert ksi("knowledge", "export", str(two_generations), "-o", str(bundle)).returncode == 0
    text = bundle.read_text()
    data = json.loads(text)
    first_text = json.dumps(data["notes"][0]["text"])
    bundle.write_text(text.replace(first_text, '"\\ud800 bad"', 1))
    done = ksi(*RUN, "--run-dir", str(tmp_path / "new"), "--seed-knowledge", str(bundle))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "$.notes[0].text" in done.stderr and "lone surrogate" in done.stderr
    assert not (tmp_path / "new").exists()
