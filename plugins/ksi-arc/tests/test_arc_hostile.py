"""Hostile ARC inputs: a task file linking to a host file, files nested 100,000 deep.

A tasks directory may come from anyone and ``answer.json`` from the agent:
neither may pull a host file into a prompt, crash KSI ("this is a bug in
ksi"), or turn a wrong answer into an error that runs again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ksi_cli, run_report, write_task
from ksi_arc.evaluator import ArcEvaluator
from ksi_arc.source import ArcTaskSource

from ksi.errors import TaskLoadError

GOOD = {
    "train": [{"input": [[1, 2], [3, 4]], "output": [[2, 1], [4, 3]]}],
    "test": [{"input": [[5, 0, 0]], "output": [[0, 0, 5]]}],
}
DEEP = 100_000


def host_secret(tmp_path: Path) -> Path:
    """A host file outside the tasks directory that parses as an ARC task (the worst case)."""
    secret = {
        "train": [{"input": [[7, 7, 7]], "output": [[7, 7, 7]]}],
        "test": [{"input": [[7, 3, 1, 4, 1, 5, 9]], "output": [[7]]}],
    }
    return write_task(tmp_path / "host" / "private.json", secret)


def test_a_task_file_linking_out_of_the_tasks_directory_is_a_problem(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks / "fine.json", GOOD)
    (tasks / "evaluation").mkdir()
    (tasks / "evaluation" / "leak.json").symlink_to(host_secret(tmp_path))
    problems = [str(p) for p in ArcTaskSource().validate(tasks)]
    assert len(problems) == 1, problems
    assert str(tasks / "evaluation" / "leak.json") in problems[0]
    assert "symlink" in problems[0] and "outside" in problems[0]
    with pytest.raises(TaskLoadError):
        ArcTaskSource().load(tasks)
    res = ksi_cli("tasks", "validate", str(tasks), "--task-source", "arc")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "leak.json" in res.stderr and "7 3 1 4 1 5 9" not in res.stdout + res.stderr


def test_a_link_inside_the_tasks_directory_is_fine(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks / "training" / "fine.json", GOOD)
    (tasks / "alias.json").symlink_to("training/fine.json")
    assert ArcTaskSource().validate(tasks) == []
    assert sorted(t.id for t in ArcTaskSource().load(tasks)) == ["alias", "fine"]


def test_a_task_file_nested_100000_deep_is_a_clear_problem(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks / "fine.json", GOOD)
    deep = '{"train": [{"input": ' + "[" * DEEP + "]" * DEEP + ', "output": [[1]]}], "test": []}'
    write_task(tasks / "deep.json", deep)
    [problem] = ArcTaskSource().validate(tasks)
    assert problem.file == str(tasks / "deep.json")
    assert problem.field.startswith("$.train[0].input[0]")
    assert "too deep" in problem.message
    res = ksi_cli("tasks", "validate", str(tasks), "--task-source", "arc")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "deep.json" in res.stderr and "$.train[0].input" in res.stderr
    assert "bug in ksi" not in res.stderr and "Traceback" not in res.stderr


def test_an_answer_nested_100000_deep_scores_zero_and_is_not_retried(tmp_path: Path) -> None:
    [task] = ArcTaskSource().load(write_task(tmp_path / "t.json", GOOD))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "answer.json").write_text("[" * DEEP + "]" * DEEP)
    result = ArcEvaluator().grade(task, repo, log_dir=tmp_path / "eval")
    assert (result.status, result.native_score) == ("bad_answer", 0.0)
    assert any("too deep" in note for note in result.notes), result.notes
    # A whole run: the failure is the agent's, scored 0, final (no retry, counted in pass@k).
    write_task(tmp_path / "tasks" / "t.json", GOOD)
    cmd = f"python3 -c \"open('repo/answer.json','w').write('['*{DEEP} + ']'*{DEEP})\""
    report = run_report(
        tmp_path, tmp_path / "tasks", "command", "--agent-option", f"cmd={cmd}", "--retries", "2"
    )
    [attempt] = report["attempts"]
    assert (attempt["status"], attempt["score"]) == ("scored", 0.0), attempt
    assert attempt["eval"]["status"] == "bad_answer"
    assert attempt["try_number"] == 0 and not attempt.get("retryable")
