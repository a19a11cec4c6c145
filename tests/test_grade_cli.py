"""``ksi grade``: grading a directory with a task's evaluator, via CliRunner and a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from ksi.cli import build_app

PARTIAL = "echo '{\"score\": 0.5}' > score.json"
CHECK = "grep -qx 42 answer.txt && echo right || { echo wrong >&2; exit 1; }"
TASKS = [
    {"task_id": "answer", "prompt": "Write 42 to answer.txt.", "eval": {"command": CHECK}},
    {"task_id": "answer-partial", "prompt": "p", "eval": {"command": PARTIAL}},
    {"task_id": "writes", "prompt": "p", "eval": {"command": "echo out > made.txt; ls"}},
    {"task_id": "slow", "prompt": "p", "eval": {"command": "sleep 30", "timeout_sec": 1}},
    {"task_id": "manual", "prompt": "Nothing to grade."},
]


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "answer.txt").write_text("42\n")
    return ws


def ksi(*args: str | Path) -> Result:
    return CliRunner().invoke(build_app(), ["grade", *map(str, args)])


def grade(tasks_file: Path, task_id: str, workspace: Path, *more: str) -> Result:
    return ksi("--tasks-path", tasks_file, "--task-id", task_id, "--workspace", workspace, *more)


def test_grades_a_correct_workspace(tasks_file: Path, workspace: Path) -> None:
    r = grade(tasks_file, "answer", workspace)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert "status:     scored" in lines and "score:      1.0" in lines
    assert "exit code:  0" in lines and "evaluator:  command" in lines
    assert "right" in lines


def test_a_wrong_workspace_is_graded_zero_and_still_exits_0(
    tasks_file: Path, workspace: Path
) -> None:
    (workspace / "answer.txt").write_text("41\n")
    r = grade(tasks_file, "answer", workspace)
    assert r.exit_code == 0, r.output
    assert "score:      0.0" in r.stdout.splitlines() and "exit code:  1" in r.stdout
    assert "wrong" in r.stdout  # the stderr tail is shown


def test_json_output_is_the_result_dict(tasks_file: Path, workspace: Path) -> None:
    r = grade(tasks_file, "answer-partial", workspace, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {
        "status",
        "native_score",
        "resolved",
        "exit_code",
        "stdout_tail",
        "stderr_tail",
        "eval_workdir",
    } <= set(data)
    assert (data["status"], data["native_score"], data["resolved"]) == ("scored", 0.5, False)
    assert data["details"]["graded_copy_of"] == str(workspace)


def test_the_workspace_itself_is_never_modified(tasks_file: Path, workspace: Path) -> None:
    (workspace / "score.json").write_text('{"score": 0.1}')
    r = grade(tasks_file, "writes", workspace, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    ran_in = Path(data["eval_workdir"])
    assert ran_in != workspace and not ran_in.exists()  # a temp copy, removed afterwards
    assert data["native_score"] == 1.0  # the stale score.json was not used...
    assert "score.json" not in data["stdout_tail"].split()  # ...nor visible to the command
    assert sorted(p.name for p in workspace.iterdir()) == ["answer.txt", "score.json"]
    assert (workspace / "score.json").read_text() == '{"score": 0.1}'


def test_keep_copy_keeps_the_graded_directory(tasks_file: Path, workspace: Path) -> None:
    r = grade(tasks_file, "writes", workspace, "--keep-copy", "--json")
    data = json.loads(r.stdout)
    ran_in = Path(data["eval_workdir"])
    assert (ran_in / "made.txt").read_text() == "out\n"
    assert not (workspace / "made.txt").exists()


def test_log_dir_gets_the_full_logs(tasks_file: Path, workspace: Path, tmp_path: Path) -> None:
    r = grade(tasks_file, "answer", workspace, "--log-dir", str(tmp_path / "logs"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "logs" / "eval.stdout.log").read_text() == "right\n"


def test_unusable_log_dir_exits_2_naming_it(
    tasks_file: Path, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    for bad in (tmp_path / "a-file", tmp_path / "a-file" / "logs"):
        r = grade(tasks_file, "answer", workspace, "--log-dir", str(bad))
        assert r.exit_code == 2, r.output
        assert r.stderr.startswith(f"error: --log-dir: cannot create {str(bad)!r}"), r.stderr
        assert "Traceback" not in r.output


@pytest.mark.parametrize(("task_id", "status"), [("slow", "timeout"), ("manual", "no_eval")])
def test_unscored_results_exit_1(
    tasks_file: Path, workspace: Path, task_id: str, status: str
) -> None:
    r = grade(tasks_file, task_id, workspace)
    assert r.exit_code == 1, r.output
    assert f"status:     {status}" in r.stdout.splitlines()
    assert "score:      unscored" in r.stdout.splitlines()


def test_evaluator_options_are_applied(tasks_file: Path, workspace: Path) -> None:
    r = grade(tasks_file, "answer", workspace, "--evaluator-option", "shell=/nonexistent/sh")
    assert r.exit_code == 1
    assert "status:     spawn_failed" in r.stdout.splitlines()


def test_unknown_task_id_exits_2_listing_close_ids(tasks_file: Path, workspace: Path) -> None:
    r = grade(tasks_file, "answr", workspace)
    assert r.exit_code == 2
    assert "no task 'answr'" in r.stderr and "did you mean 'answer'" in r.stderr
    assert "Traceback" not in r.output


def test_unknown_task_id_with_nothing_close_lists_ids(tasks_file: Path, workspace: Path) -> None:
    r = grade(tasks_file, "zzzzzz", workspace)
    assert r.exit_code == 2
    assert "'answer', 'answer-partial', 'writes', 'slow', 'manual'" in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--evaluator", "comand"), "did you mean 'command'"),
        (("--task-source", "nope"), "unknown task source 'nope'"),
        (("--evaluator-option", "timeout_sec=0"), "timeout_sec"),
        (("--evaluator-option", "shel=/bin/sh"), "no option 'shel'"),
    ],
)
def test_bad_names_and_options_exit_2(
    tasks_file: Path, workspace: Path, args: tuple[str, ...], message: str
) -> None:
    r = grade(tasks_file, "answer", workspace, *args)
    assert r.exit_code == 2, r.output
    assert message in r.stderr and r.stderr.startswith("error: ")


def test_missing_paths_exit_2(tasks_file: Path, workspace: Path, tmp_path: Path) -> None:
    r = grade(tasks_file, "answer", tmp_path / "nowhere")
    assert r.exit_code == 2 and "--workspace" in r.stderr and "does not exist" in r.stderr
    r = grade(tmp_path / "missing.jsonl", "answer", workspace)
    assert r.exit_code == 2 and "missing.jsonl" in r.stderr


def test_invalid_tasks_file_exits_2_with_its_problems(tmp_path: Path, workspace: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"task_id": "x", "prompt": "p", "eval": {"command": "true", "timeout_sec": "fast"}}\n'
    )
    r = grade(bad, "x", workspace)
    assert r.exit_code == 2
    assert "bad.jsonl" in r.stderr and "timeout_sec" in r.stderr


def _run_ksi(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ksi", "grade", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_real_process_exit_codes(tasks_file: Path, workspace: Path) -> None:
    good = _run_ksi(
        "--tasks-path",
        tasks_file,
        "--task-id",
        "answer",
        "--workspace",
        workspace,
        "--json",
        cwd=tasks_file.parent,
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["native_score"] == 1.0
    bad = _run_ksi(
        "--tasks-path",
        tasks_file,
        "--task-id",
        "nope",
        "--workspace",
        workspace,
        cwd=tasks_file.parent,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: --task-id: no task 'nope'")
    assert "Traceback" not in bad.stderr


def test_negative_zero_in_score_json_is_shown_as_zero(tmp_path: Path, workspace: Path) -> None:
    path = tmp_path / "neg.jsonl"
    negative_zero = "echo '{\"score\": -0.0}' > score.json"
    task = {"task_id": "neg", "prompt": "p", "eval": {"command": negative_zero}}
    path.write_text(json.dumps(task) + "\n")
    plain = grade(path, "neg", workspace)
    assert plain.exit_code == 0, plain.output
    assert "score:      0.0" in plain.stdout.splitlines()
    r = grade(path, "neg", workspace, "--json")
    assert '"native_score": 0.0,' in r.stdout.splitlines()[2]
