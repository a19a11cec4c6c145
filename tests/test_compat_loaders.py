"""Code written against the original KSI's task-loading API keeps working."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ksi
from ksi.errors import KsiError, TaskLoadError, UnknownComponentError
from ksi.models import Problem, TaskSpec
from ksi.plugins import registry
from ksi.tasks.custom import CustomTaskSource, load_custom_tasks
from ksi.tasks.loaders import (
    get_task_source,
    load_tasks_for_source,
    validate_tasks_for_source,
)
from ksi.tasks.prompts import REPO_NOTE
from ksi.tasks.seed import seed_repo

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    records = [
        {
            "task_id": "with-eval",
            "prompt": "Write hello.py",
            "files": {"x.txt": "x"},
            "eval": {"command": "python3 hello.py", "timeout_sec": 30},
        },
        {"task_id": "no-eval", "prompt": "Look around"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_load_tasks_for_source_returns_taskspecs_with_the_documented_metadata(
    tasks_file: Path,
) -> None:
    tasks = load_tasks_for_source(task_source="custom", tasks_path=str(tasks_file))
    assert all(isinstance(t, TaskSpec) for t in tasks)
    first, second = tasks
    # As the original's loader did, the prompt already ends with the note about repo/.
    assert (first.id, first.repo, first.prompt) == (
        "with-eval",
        "",
        "Write hello.py\n\n" + REPO_NOTE,
    )
    for task in tasks:
        meta = task.metadata
        assert meta["task_source"] == "custom"
        assert Path(meta["repo_path"]).is_dir()
        assert isinstance(meta["eval_timeout_sec"], float)
        assert meta["tasks_file"] == str(tasks_file.resolve())
    assert (Path(first.metadata["repo_path"]) / "x.txt").read_text() == "x"
    assert first.metadata["eval_command"] == "python3 hello.py"
    assert first.metadata["eval_timeout_sec"] == 30.0
    assert second.metadata["eval_command"] == ""
    assert second.metadata["eval_timeout_sec"] == 300.0
    assert first.metadata["solution"] is None
    assert first.metadata["source_location"] == "line 1"


def test_load_custom_tasks_matches_the_loader(tasks_file: Path) -> None:
    direct = load_custom_tasks(tasks_file)
    via_source = load_tasks_for_source("custom", tasks_file)
    assert [(t.id, t.prompt) for t in direct] == [(t.id, t.prompt) for t in via_source]


def test_loader_errors_are_ksi_errors_and_value_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "x"}\n')
    for call in (
        lambda: load_custom_tasks(bad),
        lambda: load_tasks_for_source(task_source="custom", tasks_path=bad),
    ):
        with pytest.raises(ValueError) as info:
            call()
        assert isinstance(info.value, KsiError)
        assert isinstance(info.value, ksi.KsiError)
        assert isinstance(info.value, TaskLoadError)
        assert "$.prompt: is required" in str(info.value)


def test_validate_tasks_for_source_returns_problems(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "x", "prompt": 1}\n')
    (problem,) = validate_tasks_for_source(task_source="custom", tasks_path=bad)
    assert isinstance(problem, Problem)
    assert (problem.location, problem.task_id, problem.field) == ("line 1", "x", "$.prompt")
    assert validate_tasks_for_source("custom", EXAMPLES / "tasks.jsonl") == []


def test_tasks_path_is_required() -> None:
    with pytest.raises(KsiError, match="needs a tasks path"):
        load_tasks_for_source(task_source="custom")


def test_custom_source_is_registered_through_the_plugin_hook() -> None:
    reg = registry("task source").get("CUSTOM")
    assert reg.obj is CustomTaskSource
    assert reg.plugin == "ksi.tasks.custom"
    assert CustomTaskSource.default_evaluator == "command"
    assert isinstance(get_task_source("custom"), CustomTaskSource)


def test_unknown_task_source_suggests_the_right_name(tasks_file: Path) -> None:
    with pytest.raises(UnknownComponentError) as info:
        load_tasks_for_source(task_source="custm", tasks_path=tasks_file)
    assert "did you mean 'custom'?" in str(info.value)
    assert isinstance(info.value, KsiError)


def test_custom_source_takes_no_options() -> None:
    with pytest.raises(KsiError, match="has no option 'x'"):
        get_task_source("custom", {"x": "1"})


def test_hand_built_taskspec_from_the_spec_works(tmp_path: Path) -> None:
    repo = tmp_path / "starting"
    repo.mkdir()
    (repo / "tests.py").write_text("print('ok')\n")
    task = TaskSpec(
        id="my-task-1",
        repo="",
        prompt="…instruction for the agent…",
        metadata={
            "task_source": "custom",
            "repo_path": str(repo),
            "eval_command": "python3 tests.py",
            "eval_timeout_sec": 300.0,
        },
    )
    seed_repo(task, tmp_path / "ws" / "repo")
    assert (tmp_path / "ws" / "repo" / "tests.py").read_text() == "print('ok')\n"
