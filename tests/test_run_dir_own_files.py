"""No KSI command writes over a run directory's own files (issue 29 §3).

Each writer was pointed at the journal of a real run: before the guard each
exited 0 and destroyed it, so a resume ran everything again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _ksi(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ksi", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


TASKS = (
    '{"task_id": "a", "prompt": "p", "eval": {"command": "test -f ok"}}\n'
    '{"task_id": "b", "prompt": "p", "eval": {"command": "test -f ok"}}\n'
)
RUN = ["run", "tasks.jsonl", "--agent", "command", "--agent-option", "cmd=touch repo/ok"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run with two generations (so it has notes), copied per test."""
    root = tmp_path_factory.mktemp("own")
    (root / "tasks.jsonl").write_text(TASKS)
    done = _ksi(root, *RUN, "--run-dir", "run", "--generations", "2")
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    subprocess.run(["cp", "-a", f"{finished_run}/.", str(tmp_path)], check=True)
    return tmp_path


def _snapshot(run: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(run)): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.mark.parametrize(
    "target",
    [
        "run/journal.jsonl",
        "run/run.json",
        "run/generations.jsonl",
        "run/knowledge/1/notes.json",
        "run/attempts/a/1/record.json",
    ],
)
def test_ksi_view_refuses_to_write_over_a_run_file(run_copy: Path, target: str) -> None:
    before = _snapshot(run_copy / "run")
    done = _ksi(run_copy, "view", "run", "-o", target)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "own files" in done.stderr and target.split("/", 1)[1].split("/")[0] in done.stderr
    assert _snapshot(run_copy / "run") == before


def test_ksi_view_may_write_beside_the_run_files(run_copy: Path) -> None:
    done = _ksi(run_copy, "view", "run", "-o", "run/report.html")
    assert done.returncode == 0, done.stderr
    assert (run_copy / "run" / "report.html").stat().st_size > 0


def test_a_link_to_the_journal_is_refused_too(run_copy: Path) -> None:
    os.symlink(run_copy / "run" / "journal.jsonl", run_copy / "innocent.html")
    before = _snapshot(run_copy / "run")
    done = _ksi(run_copy, "view", "run", "-o", "innocent.html")
    assert done.returncode == 2, done.stdout + done.stderr
    assert _snapshot(run_copy / "run") == before


def test_knowledge_export_refuses_the_journal(run_copy: Path) -> None:
    before = _snapshot(run_copy / "run")
    done = _ksi(run_copy, "knowledge", "export", "run", "-o", "run/journal.jsonl")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "journal.jsonl" in done.stderr
    assert _snapshot(run_copy / "run") == before


@pytest.mark.parametrize("target", ["run/journal.jsonl", "run/run.json"])
def test_run_output_json_refuses_its_own_files_before_starting(run_copy: Path, target: str) -> None:
    before = _snapshot(run_copy / "run")
    done = _ksi(run_copy, *RUN, "--run-dir", "run", "--generations", "2", "--output-json", target)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--output-json" in done.stderr
    assert _snapshot(run_copy / "run") == before


def test_a_new_run_refuses_output_json_inside_itself_and_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text(TASKS)
    done = _ksi(tmp_path, *RUN, "--run-dir", "new", "--output-json", "new/journal.jsonl")
    assert done.returncode == 2, done.stdout + done.stderr
    assert not (tmp_path / "new").exists()


def test_the_python_api_refuses_it_too(run_copy: Path) -> None:
    code = (
        "import ksi, sys\n"
        "try:\n"
        "    ksi.run('tasks.jsonl', agent='command', agent_options={'cmd': 'touch repo/ok'},\n"
        "            run_dir='run', generations=2, output_json='run/journal.jsonl')\n"
        "except ksi.KsiError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "    sys.exit(3)\n"
    )
    before = _snapshot(run_copy / "run")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=run_copy, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "UserInputError" in done.stdout
    assert _snapshot(run_copy / "run") == before
    assert json.loads((run_copy / "run" / "run.json").read_text())["run_id"]
