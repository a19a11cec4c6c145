"""``ksi run --eval-in environment``: the ``command`` evaluator grades in a fresh environment.

The eval commands here check things only true inside the test image (it has no
``/etc/os-release``; the host does), so a pass proves where they ran. The
scoring contract is the host one: score.json read back on the host, a stale
one deleted first, timeout and spawn failure unscored.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import TEST_IMAGE, needs_docker
from tests.run_helpers import journal_lines, ksi, write_tasks

#: True only in the test image: the host (Debian, CI) has /etc/os-release.
IN_IMAGE = "test ! -e /etc/os-release"


def _task(task_id: str, eval_command: str, timeout: float = 60) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "prompt": "Create hello.txt containing hi.",
        "files": {"README.md": "start\n"},
        "eval": {"command": eval_command, "timeout_sec": timeout},
    }


def _run(tmp_path: Path, tasks: list[dict[str, Any]], *extra: str, cmd: str) -> dict[str, Any]:
    path = write_tasks(tmp_path / "tasks.jsonl", tasks)
    run_dir = tmp_path / "run"
    res = ksi(
        "run", str(path), "--agent", "command", "--agent-option", f"cmd={cmd}",
        "--eval-in", "environment", "--run-dir", str(run_dir), *extra,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    records = {r["task_id"]: r for r in journal_lines(run_dir)}
    assert len(records) == len(tasks)
    return records


def _eval_stdout(tmp_path: Path, task_id: str) -> str:
    return (tmp_path / "run" / "attempts" / task_id / "1" / "eval" / "eval.stdout.log").read_text()


def _containers(run_dir: Path) -> list[str]:
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    res = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=ksi.run={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return res.stdout.split()


DOCKER = ("--environment", "docker", "--image", TEST_IMAGE, "--network", "none")


@pytest.mark.docker
@needs_docker
def test_the_eval_command_runs_in_a_fresh_container_of_the_image(tmp_path: Path) -> None:
    partial = (
        f"{IN_IMAGE} && grep -qx hi hello.txt && echo '{{\"score\": 0.75}}' > score.json; "
        'echo "workdir=$KSI_EVAL_WORKDIR task=$KSI_TASK_ID pwd=$(pwd)"'
    )
    records = _run(
        tmp_path,
        [
            _task("partial", partial),
            # The agent plants a perfect score.json; only the eval command's own output counts.
            _task("planted", f"{IN_IMAGE} && exit 1"),
            _task("host-only", "test -e /etc/os-release"),
        ],
        *DOCKER,
        cmd="echo hi > repo/hello.txt; echo '{\"score\": 1.0}' > repo/score.json",
    )
    assert (records["partial"]["status"], records["partial"]["score"]) == ("scored", 0.75)
    assert records["partial"]["eval"]["details"]["score_source"] == "score.json"
    assert _eval_stdout(tmp_path, "partial").split() == [
        "workdir=/workspace/repo",
        "task=partial",
        "pwd=/workspace/repo",
    ]
    planted = records["planted"]
    assert (planted["status"], planted["score"]) == ("scored", 0.0)
    assert planted["eval"]["details"]["score_source"] == "exit_code"
    assert records["host-only"]["score"] == 0.0  # the host's /etc is not there
    assert _containers(tmp_path / "run") == []


@pytest.mark.docker
@needs_docker
def test_timeout_and_a_missing_shell_in_the_image_are_unscored(tmp_path: Path) -> None:
    records = _run(
        tmp_path,
        [_task("slow", "sleep 60", timeout=1)],
        *DOCKER,
        cmd="true",
    )
    slow = records["slow"]
    assert (slow["status"], slow["score"], slow["eval"]["status"]) == ("unscored", None, "timeout")
    assert _containers(tmp_path / "run") == []

    # The image has no bash: the shell cannot start, which is not a wrong answer.
    nobash = tmp_path / "nobash"
    records = _run(
        nobash,
        [_task("t", "true")],
        *DOCKER,
        "--evaluator-option",
        "shell=/bin/bash",
        cmd="true",
    )
    rec = records["t"]
    assert (rec["status"], rec["score"], rec["eval"]["status"]) == (
        "unscored",
        None,
        "spawn_failed",
    )
    assert any("/bin/bash" in n for n in rec["eval"]["notes"]), rec["eval"]["notes"]


def test_with_the_local_environment_it_grades_a_copy_on_the_host(tmp_path: Path) -> None:
    records = _run(
        tmp_path,
        [
            _task(
                "t",
                "grep -qx hi hello.txt && echo '{\"score\": 0.5}' > score.json; "
                'echo "$KSI_EVAL_WORKDIR"',
            )
        ],
        cmd="echo hi > repo/hello.txt",
    )
    assert (records["t"]["status"], records["t"]["score"]) == ("scored", 0.5)
    attempt = tmp_path / "run" / "attempts" / "t" / "1"
    workdir = Path(_eval_stdout(tmp_path, "t").strip())
    assert workdir == (attempt / "eval" / "workspace" / "repo").resolve()
    assert not workdir.exists(), "the grading copy is removed after grading"
    assert (attempt / "captured" / "repo" / "hello.txt").read_text() == "hi\n"


@pytest.mark.parametrize("shell", ["/no/such/shell"])
def test_local_spawn_failure_is_unscored_too(tmp_path: Path, shell: str) -> None:
    records = _run(
        tmp_path,
        [_task("t", "true")],
        "--evaluator-option",
        f"shell={shell}",
        cmd="true",
    )
    assert (records["t"]["status"], records["t"]["eval"]["status"]) == (
        "unscored",
        "spawn_failed",
    )


@pytest.mark.docker
@needs_docker
def test_concurrent_attempts_grade_in_their_own_containers(tmp_path: Path) -> None:
    """Attempts of one task graded at once in fresh containers must not collide."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({
        "task_id": "slow", "prompt": "p",
        "eval": {"command": "sleep 2; echo '{\"score\": 1.0}' > score.json", "timeout_sec": 60},
    }) + "\n")  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "ksi", "run", str(tasks), "--agent", "nop",
         "--environment", "docker", "--image", TEST_IMAGE, "--eval-in", "environment",
         "--attempts", "3", "--concurrency", "3", "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = [json.loads(x) for x in (tmp_path / "run" / "journal.jsonl").read_text().splitlines()]
    assert [(r["status"], r["score"]) for r in records] == [("scored", 1.0)] * 3
