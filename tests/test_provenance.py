"""run.json records where a run's inputs came from, and ``ksi report`` shows it (issue 28 #16).

Real git repositories in a temporary directory and the real ``ksi`` command line.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from run_helpers import ksi, write_tasks

ROOT = Path(__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()


def _tasks(path: Path) -> Path:
    return write_tasks(
        path,
        [
            {
                "task_id": "ok",
                "prompt": "write ok.txt",
                "eval": {"command": "test -f ok.txt"},
                "solution": {"files": {"ok.txt": "ok"}},
            }
        ],
    )


def test_run_json_and_report_record_the_tasks_commit_hash_and_dirty_flag(tmp_path: Path) -> None:
    repo = tmp_path / "bench"
    repo.mkdir()
    git(repo, "init", "-q")
    tasks = _tasks(repo / "tasks.jsonl")
    git(repo, "add", "tasks.jsonl")
    git(repo, "commit", "-q", "-m", "tasks")
    commit = git(repo, "rev-parse", "HEAD")

    clean = ksi("run", str(tasks), "--agent", "oracle", "--run-dir", str(tmp_path / "clean"))
    assert clean.returncode == 0, clean.stderr
    recorded = json.loads((tmp_path / "clean" / "run.json").read_text())["provenance"]
    assert recorded["tasks_sha256"] == hashlib.sha256(tasks.read_bytes()).hexdigest()
    assert recorded["tasks_git"] == {"root": str(repo.resolve()), "commit": commit, "dirty": False}
    if (ROOT / ".git").exists():  # KSI runs from its checkout (the README's editable install)
        assert recorded["ksi_git"]["commit"] == git(ROOT, "rev-parse", "HEAD")
        assert recorded["ksi_git"]["root"] == str(ROOT)

    report = ksi("report", str(tmp_path / "clean"))
    assert report.returncode == 0, report.stderr
    assert (
        f"tasks file: sha256 {recorded['tasks_sha256']}, git {commit[:12]} (clean) in "
        f"{repo.resolve()}"
    ) in report.stdout.splitlines()
    as_json = json.loads(ksi("report", str(tmp_path / "clean"), "--json").stdout)
    assert as_json["summary"]["provenance"] == recorded

    (repo / "notes.txt").write_text("not committed\n")
    dirty = ksi("run", str(tasks), "--agent", "oracle", "--run-dir", str(tmp_path / "dirty"))
    assert dirty.returncode == 0, dirty.stderr
    assert json.loads((tmp_path / "dirty" / "run.json").read_text())["provenance"]["tasks_git"][
        "dirty"
    ]
    assert "(with changes not committed)" in ksi("report", str(tmp_path / "dirty")).stdout


def test_nothing_is_recorded_outside_a_checkout(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "tasks.jsonl")
    ran = ksi("run", str(tasks), "--agent", "oracle", "--run-dir", str(tmp_path / "run"))
    assert ran.returncode == 0, ran.stderr
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["provenance"]
    assert recorded["tasks_git"] is None
    assert recorded["tasks_sha256"] == hashlib.sha256(tasks.read_bytes()).hexdigest()
    assert not any(
        line.startswith("tasks file:") and "git" in line
        for line in ksi("report", str(tmp_path / "run")).stdout.splitlines()
    )
