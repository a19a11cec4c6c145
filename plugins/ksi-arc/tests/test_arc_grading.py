"""The arc evaluator: exact match, two candidates per test input, a bad answer scores 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import write_task
from ksi_arc.evaluator import ArcEvaluator
from ksi_arc.source import ArcTaskSource

from ksi.models import EvalResult, TaskSpec

TWO_TESTS = {
    "train": [{"input": [[1]], "output": [[2]]}],
    "test": [
        {"input": [[1, 1]], "output": [[2, 2]]},
        {"input": [[1], [0]], "output": [[2], [0]]},
    ],
}
RIGHT_1, RIGHT_2 = [[2, 2]], [[2], [0]]


@pytest.fixture
def task(tmp_path: Path) -> TaskSpec:
    [loaded] = ArcTaskSource().load(write_task(tmp_path / "two.json", TWO_TESTS))
    return loaded


def grade(task: TaskSpec, tmp_path: Path, answer: Any) -> EvalResult:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    if answer is not None:
        text = answer if isinstance(answer, str) else json.dumps(answer)
        (repo / "answer.json").write_text(text)
    return ArcEvaluator().grade(task, repo, log_dir=tmp_path / "eval")


def test_every_test_input_right_scores_one(task: TaskSpec, tmp_path: Path) -> None:
    result = grade(task, tmp_path, [RIGHT_1, RIGHT_2])
    assert (result.status, result.native_score) == ("scored", 1.0)
    assert result.notes == ("test 1: solved (candidate 1)", "test 2: solved (candidate 1)")
    assert (tmp_path / "eval" / "arc-verdicts.txt").read_text().startswith("test 1: solved")


def test_the_score_is_the_fraction_of_test_inputs_solved(task: TaskSpec, tmp_path: Path) -> None:
    result = grade(task, tmp_path, [RIGHT_1, [[2, 0], [0, 0]]])
    assert result.native_score == 0.5
    assert result.notes[1] == "test 2: not solved (candidate 1 is 2x2, expected 2x1)"
    result = grade(task, tmp_path, [[[2, 9]], RIGHT_2])
    assert result.native_score == 0.5
    assert result.notes[0] == "test 1: not solved (candidate 1 has 1 wrong cell(s))"


def test_either_of_two_candidates_counts(task: TaskSpec, tmp_path: Path) -> None:
    result = grade(task, tmp_path, [[[[0, 0]], RIGHT_1], RIGHT_2])
    assert result.native_score == 1.0
    assert result.details["solved_by_candidate"] == [2, 1]
    prize_form = [{"attempt_1": [[0, 0]], "attempt_2": RIGHT_1}, {"attempt_1": RIGHT_2}]
    assert grade(task, tmp_path, prize_form).native_score == 1.0


def test_a_bare_grid_answers_a_task_with_one_test_input(tmp_path: Path) -> None:
    one = {"train": TWO_TESTS["train"], "test": TWO_TESTS["test"][:1]}
    [task] = ArcTaskSource().load(write_task(tmp_path / "one.json", one))
    assert grade(task, tmp_path, RIGHT_1).native_score == 1.0
    assert grade(task, tmp_path, [[9, 9]]).native_score == 0.0


@pytest.mark.parametrize(
    ("answer", "status", "note"),
    [
        (None, "no_answer", "repo/answer.json was not written"),
        ("[[[2, 2]]", "bad_answer", "repo/answer.json is not valid JSON"),
        ({"test": 1}, "bad_answer", "expected a JSON list with one entry per test input (2)"),
        ([RIGHT_1], "bad_answer", "has 1 entries; the task has 2 test input(s)"),
        ([[RIGHT_1, RIGHT_1, RIGHT_1], RIGHT_2], "bad_answer", "test 1: 3 candidates; at most 2"),
        ([RIGHT_1, [[["x"]]]], "bad_answer", "test 2, candidate 1: not a grid"),
        ([RIGHT_1, []], "bad_answer", "test 2: empty list"),
        ([RIGHT_1, {"attempt_3": RIGHT_2}], "bad_answer", "test 2: unknown key 'attempt_3'"),
    ],
)
def test_a_missing_or_malformed_answer_is_a_zero_with_the_reason(
    task: TaskSpec, tmp_path: Path, answer: Any, status: str, note: str
) -> None:
    result = grade(task, tmp_path, answer)
    # The agent's failure, not infrastructure: a real 0.0, never unscored.
    assert result.native_score == 0.0 and result.status == status
    assert any(n.startswith(note) for n in result.notes), result.notes


def test_a_task_without_outputs_is_unscored(tmp_path: Path) -> None:
    hidden = {"train": TWO_TESTS["train"], "test": [{"input": [[1]]}]}
    [task] = ArcTaskSource().load(write_task(tmp_path / "h.json", hidden))
    result = grade(task, tmp_path, [[[2]]])
    assert (result.status, result.native_score) == ("no_eval", None)
