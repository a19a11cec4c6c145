"""Sentences of the user's spec (custom-tasks.txt) checked end to end through ``ksi.run``.

Most of the spec is tested where it is implemented (test_custom_source.py,
test_command_evaluator.py, test_capture.py); these are the sentences that
only show when a whole attempt runs: the ``--wipe-workspace-per-task false``
caveats and how an eval timeout counts in a task's best score.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ksi
from tests.run_helpers import journal_lines, write_tasks

TASK: dict[str, Any] = {
    "task_id": "hello",
    "prompt": "Create hello.txt containing hi.",
    "files": {"test_hello.sh": "grep -q hi hello.txt\n"},
    "eval": {"command": "sh test_hello.sh", "timeout_sec": 30},
}


def run(tmp_path: Path, task: dict[str, Any], cmd: str, **kw: Any) -> Any:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    return ksi.run(
        tasks, agent="command", agent_options={"cmd": cmd}, run_dir=tmp_path / "run", **kw
    )


def test_wipe_false_still_deletes_a_score_json_the_agent_wrote(tmp_path: Path) -> None:
    # "a stale score.json is still deleted before the eval command runs"
    cmd = "echo '{\"score\": 1.0}' > repo/score.json"
    summary = run(tmp_path, TASK, cmd, wipe_workspace=False)
    (record,) = summary.records
    assert record.score == 0.0, "the agent's own score.json must not count"
    assert any("stale score.json" in note for note in record.eval.notes)


def test_wipe_false_grades_an_edited_test_file_as_is(tmp_path: Path) -> None:
    # "edited test files are not restored from the seed" (the default capture restores them:
    # test_run_lifecycle.py::test_edited_test_file_is_restored_before_grading)
    summary = run(tmp_path, TASK, "echo 'exit 0' > repo/test_hello.sh", wipe_workspace=False)
    assert summary.records[0].score == 1.0


def test_an_eval_timeout_is_unscored_and_left_out_of_the_best_score(tmp_path: Path) -> None:
    # "the attempt is unscored (None), not scored 0.0 — it is excluded from best-score tracking"
    task = dict(TASK, eval={"command": "sleep 30", "timeout_sec": 1})
    summary = run(tmp_path, task, "true", attempts=2)
    assert [r["eval"]["status"] for r in journal_lines(tmp_path / "run")] == ["timeout"] * 2
    assert summary.unscored_attempts == 2
    (task_summary,) = summary.tasks
    assert (task_summary.scored, task_summary.unscored) == (0, 2)
    assert task_summary.best_score is None and not task_summary.solved


def test_a_timeout_does_not_pull_down_a_scored_attempt(tmp_path: Path) -> None:
    # Attempt 1 times out, attempt 2 scores 0.5: the best score is 0.5, the timeout counts apart.
    cmd = 'if [ "$KSI_ATTEMPT" = 1 ]; then touch repo/slow; fi'
    partial = json.dumps({"score": 0.5})
    task = dict(
        TASK,
        eval={
            "command": f"[ -f slow ] && sleep 30; echo '{partial}' > score.json",
            "timeout_sec": 1,
        },
    )
    summary = run(tmp_path, task, cmd, attempts=2)
    statuses = sorted((r["attempt"], r["eval"]["status"]) for r in journal_lines(tmp_path / "run"))
    assert statuses == [(1, "timeout"), (2, "scored")]
    (task_summary,) = summary.tasks
    assert (task_summary.scored, task_summary.unscored) == (1, 1)
    assert task_summary.best_score == 0.5
