"""Rounds with feedback (Aider's second try): an evaluator that asks for more rounds gets them.

The agent is a real shell command; the evaluator is KSI's ``command`` evaluator
with ``rounds`` and ``feedback`` added, given to :func:`ksi.run` as a class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import attrs

import ksi
from ksi.eval.command import CommandEvaluator
from ksi.interfaces import GivesFeedback
from ksi.models import EvalResult, TaskSpec
from ksi.records import RoundResult
from tests.run_helpers import journal_lines, write_tasks

TASK = {
    "task_id": "greet",
    "prompt": "Write hi into answer.txt.",
    "eval": {"command": "cat answer.txt; grep -qx hi answer.txt", "timeout_sec": 30},
}

#: Counts its runs in the workspace (beside repo/, never graded); writes "hello" until the
#: prompt carries the evaluator's feedback, then does what the feedback says.
AGENT = (
    "echo run >> runs.txt; "
    'if grep -q "FEEDBACK" "$KSI_PROMPT_FILE"; then echo hi > repo/answer.txt; '
    "else echo hello > repo/answer.txt; fi; echo done"  # printed: each round's log exists
)


@attrs.frozen
class TwoTries(CommandEvaluator):
    """The command evaluator, with up to ``tries`` rounds and the eval output as feedback."""

    name: ClassVar[str] = "two-tries"
    tries: int = 2

    @property
    def rounds(self) -> int:
        return self.tries

    def feedback(self, task: TaskSpec, result: EvalResult) -> str | None:
        return f"FEEDBACK: the check printed {result.stdout_tail.strip()!r}; write hi instead."


@attrs.frozen
class NeverSatisfied(TwoTries):
    """Feedback that does not help: the agent keeps writing the wrong answer."""

    def feedback(self, task: TaskSpec, result: EvalResult) -> str | None:
        return f"Still wrong ({result.stdout_tail.strip()}), try again."


def run(tmp_path: Path, evaluator: Any, **kw: Any) -> Any:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK])
    return ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": AGENT},
        evaluator=evaluator,
        run_dir=tmp_path / "run",
        wipe_workspace=False,
        **kw,
    )


def attempt_dir(tmp_path: Path) -> Path:
    return tmp_path / "run" / "attempts" / "greet" / "1"


def test_the_second_round_sees_the_feedback_and_its_grade_is_the_score(tmp_path: Path) -> None:
    assert isinstance(TwoTries(), GivesFeedback)
    summary = run(tmp_path, TwoTries(tries=3))
    [record] = summary.records
    assert record.score == 1.0
    # Round 1 failed and is kept; round 2 solved it, so round 3 never ran.
    assert record.rounds == (RoundResult(1, 0.0, "scored", "completed"),)
    adir = attempt_dir(tmp_path)
    assert (adir / "workspace" / "runs.txt").read_text() == "run\nrun\n"
    assert (adir / "rounds" / "1" / "captured" / "repo" / "answer.txt").read_text() == "hello\n"
    prompt = (adir / "rounds" / "2" / "prompt.md").read_text()
    assert prompt.startswith("FEEDBACK: the check printed 'hello'; write hi instead.")
    assert "repo/" in prompt  # the usual note about repo/ follows the feedback
    assert (adir / "rounds" / "2" / "agent.stdout.log").exists()
    assert not (adir / "rounds" / "3").exists()
    assert (adir / "captured" / "repo" / "answer.txt").read_text() == "hi\n"
    [line] = journal_lines(tmp_path / "run")
    assert line["rounds"] == [
        {"round": 1, "score": 0.0, "eval_status": "scored", "agent_status": "completed"}
    ]


def test_every_round_is_used_when_none_succeeds(tmp_path: Path) -> None:
    summary = run(tmp_path, NeverSatisfied(tries=3))
    [record] = summary.records
    assert record.score == 0.0
    assert [r.round for r in record.rounds] == [1, 2]
    assert (attempt_dir(tmp_path) / "workspace" / "runs.txt").read_text() == "run\n" * 3
    assert (
        "Still wrong (hello)" in (attempt_dir(tmp_path) / "rounds" / "3" / "prompt.md").read_text()
    )


def test_a_first_round_that_succeeds_ends_the_attempt(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK])
    summary = ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": "echo run >> runs.txt; echo hi > repo/answer.txt"},
        evaluator=TwoTries(),
        run_dir=tmp_path / "run",
        wipe_workspace=False,
    )
    [record] = summary.records
    assert (record.score, record.rounds) == (1.0, ())
    assert (attempt_dir(tmp_path) / "workspace" / "runs.txt").read_text() == "run\n"


def test_an_evaluator_without_rounds_runs_the_agent_once(tmp_path: Path) -> None:
    summary = run(tmp_path, "command")
    [record] = summary.records
    assert (record.score, record.rounds) == (0.0, ())
    assert (attempt_dir(tmp_path) / "workspace" / "runs.txt").read_text() == "run\n"
    assert not (attempt_dir(tmp_path) / "rounds").exists()
