"""The ``custom`` task source: every sentence of the spec about tasks files.

Tasks files are real files in tmp_path; starting files land on the real disk.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import pickle
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from ksi.errors import KsiError, TaskLoadError, UserInputError
from ksi.models import Problem, TaskSpec
from ksi.task_parts import EvalSpec, Runtime, Solution, StartingFiles, TaskOrigin
from ksi.tasks.custom import CustomTaskSource, load_custom_tasks, write_files
from ksi.tasks.prompts import REPO_NOTE, agent_prompt
from ksi.tasks.seed import describe_starting_files, seed_repo

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def write_jsonl(path: Path, *records: Any) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def load(path: Path) -> list[TaskSpec]:
    """The original KSI's entry point: starting files on disk, the original metadata keys."""
    return load_custom_tasks(path)


def load_typed(path: Path) -> list[TaskSpec]:
    """What ``ksi run`` loads: typed parts, nothing written."""
    return CustomTaskSource().load(path)


def problems_of(path: Path) -> list[Problem]:
    return CustomTaskSource().validate(path)


def only_problem(path: Path) -> Problem:
    found = problems_of(path)
    assert len(found) == 1, [str(p) for p in found]
    return found[0]


MINIMAL = {"task_id": "t1", "prompt": "Do the thing."}


# -- file formats --------------------------------------------------------------------


def test_jsonl_file_one_record_per_line_blank_lines_ignored(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        json.dumps({"task_id": "a", "prompt": "A"})
        + "\n\n   \n"
        + json.dumps({"task_id": "b", "prompt": "B"})
        + "\n\n",
        encoding="utf-8",
    )
    tasks = load(path)
    assert [t.id for t in tasks] == ["a", "b"]
    assert [t.metadata["source_location"] for t in tasks] == ["line 1", "line 4"]


def test_json_file_is_an_array_of_records(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(
        json.dumps([{"task_id": "a", "prompt": "A"}, {"task_id": "b", "prompt": "B"}], indent=2)
    )
    tasks = load(path)
    assert [t.id for t in tasks] == ["a", "b"]
    assert tasks[1].metadata["source_location"] == "record 2"


def test_json_file_that_is_not_an_array_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(MINIMAL))
    problem = only_problem(path)
    assert "must hold a JSON array" in problem.message
    assert "got an object" in problem.message


def test_json_lines_in_a_json_file_get_a_hint(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tasks.json", MINIMAL, {"task_id": "b", "prompt": "B"})
    problem = only_problem(path)
    assert problem.location == "line 2"
    assert ".jsonl" in problem.message


def test_other_suffixes_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text("task_id: x\n")
    assert "must end in .json" in only_problem(path).message


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert "does not exist" in only_problem(tmp_path / "nope.jsonl").message
    for name in ("dir.jsonl", "dir"):  # a directory is named as such, whatever its suffix
        (tmp_path / name).mkdir()
        assert "is a directory" in only_problem(tmp_path / name).message


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_file_is_an_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(content)
    assert "empty" in only_problem(path).message
    with pytest.raises(TaskLoadError):
        load(path)


def test_empty_json_array_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text("[]")
    assert "no records" in only_problem(path).message


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tasks.jsonl", MINIMAL, '{"task_id": "x" "prompt": "y"}')
    problem = only_problem(path)
    assert problem.location == "line 2"
    assert "invalid JSON at column 17" in problem.message
    assert str(problem).startswith(f"{path}:line 2: invalid JSON at column 17")


def test_invalid_json_in_a_json_file_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text('[\n  {"task_id": "a",\n   "prompt": }\n]')
    problem = only_problem(path)
    assert problem.location == "line 3"
    assert "column 14" in problem.message


def test_non_utf8_bytes_name_the_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(
        json.dumps(MINIMAL).encode()
        + b'\n{"task_id": "caf\xe9", "prompt": "p"}\n'
        + json.dumps({"task_id": "ok", "prompt": 5}).encode()
        + b"\n"
    )
    found = problems_of(path)
    assert [p.location for p in found] == ["line 2", "line 3"]
    assert "not valid UTF-8" in found[0].message and "0xe9" in found[0].message
    assert found[1].field == "$.prompt"  # the other lines are still checked


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(MINIMAL).encode() + b"\n")
    assert [t.id for t in load(path)] == ["t1"]


@pytest.mark.parametrize(
    ("line", "got"),
    [("[1, 2]", "an array"), ('"text"', '"text"'), ("42", "42"), ("null", "null")],
)
def test_a_record_that_is_not_an_object(tmp_path: Path, line: str, got: str) -> None:
    problem = only_problem(write_jsonl(tmp_path / "tasks.jsonl", line))
    assert problem.field == "$"
    assert "must be a JSON object" in problem.message and f"got {got}" in problem.message


# -- required fields ---------------------------------------------------------------------


def test_task_id_and_prompt_are_required(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tasks.jsonl", {"prompt": "p"}, {"task_id": "x"})
    found = problems_of(path)
    assert [(p.location, p.task_id, p.field) for p in found] == [
        ("line 1", None, "$.task_id"),
        ("line 2", "x", "$.prompt"),
    ]
    assert all("is required" in p.message for p in found)


@pytest.mark.parametrize("value", ["", "   ", 7, None, ["a"]])
def test_task_id_must_be_a_non_empty_string(tmp_path: Path, value: Any) -> None:
    problem = only_problem(write_jsonl(tmp_path / "t.jsonl", {"task_id": value, "prompt": "p"}))
    assert problem.field == "$.task_id"


@pytest.mark.parametrize("value", ["", 3, {"text": "x"}])
def test_prompt_must_be_a_non_empty_string(tmp_path: Path, value: Any) -> None:
    problem = only_problem(write_jsonl(tmp_path / "t.jsonl", {"task_id": "a", "prompt": value}))
    assert (problem.task_id, problem.field) == ("a", "$.prompt")


def test_task_ids_must_be_unique(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tasks.jsonl", MINIMAL, {"task_id": "b", "prompt": "p"}, MINIMAL)
    problem = only_problem(path)
    assert (problem.location, problem.task_id, problem.field) == ("line 3", "t1", "$.task_id")
    assert "duplicate task_id (first used at line 1)" in problem.message


def test_only_task_id_and_prompt_needed(tmp_path: Path) -> None:
    (typed,) = load_typed(write_jsonl(tmp_path / "tasks.jsonl", MINIMAL))
    assert typed.prompt == "Do the thing."  # kept exactly as written
    (task,) = load(tmp_path / "tasks.jsonl")
    assert task.prompt == "Do the thing.\n\n" + REPO_NOTE  # the original loader's prompt
    assert task.metadata["eval_command"] == ""
    assert task.metadata["eval_timeout_sec"] == 300.0
    assert task.metadata["solution"] is None
    repo = Path(task.metadata["repo_path"])
    assert repo.is_dir() and list(repo.iterdir()) == []  # empty repo/


# -- unknown keys -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "field", "suggestion"),
    [
        ({**MINIMAL, "promt": "x"}, "$.promt", "'prompt'"),
        ({**MINIMAL, "eval": {"command": "true", "timeout": 5}}, "$.eval.timeout", "'timeout_sec'"),
        ({**MINIMAL, "solution": {"file": {"a": "b"}}}, "$.solution.file", "'files'"),
    ],
)
def test_unknown_keys_rejected_at_every_level_with_a_suggestion(
    tmp_path: Path, record: dict[str, Any], field: str, suggestion: str
) -> None:
    found = problems_of(write_jsonl(tmp_path / "t.jsonl", record))
    unknown = [p for p in found if "unknown key" in p.message]
    assert len(unknown) == 1
    assert unknown[0].field == field
    assert f"did you mean {suggestion}?" in unknown[0].message


def test_unknown_key_far_from_any_valid_one_lists_the_valid_keys(tmp_path: Path) -> None:
    problem = only_problem(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "zzz": 1}))
    assert "did you mean" not in problem.message
    assert problem.message == (
        "unknown key 'zzz' in the record. "
        "Valid keys: task_id, prompt, workspace_dir, files, eval, solution"
    )


# -- starting files ------------------------------------------------------------------------


def test_inline_files_are_materialized_into_repo_path(tmp_path: Path) -> None:
    files = {"main.py": "print('hi')\n", "pkg/sub/data.txt": "héllo\n"}
    (task,) = load(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": files}))
    repo = Path(task.metadata["repo_path"])
    assert repo.is_dir() and repo.is_absolute()
    assert (repo / "main.py").read_text() == "print('hi')\n"
    assert (repo / "pkg/sub/data.txt").read_text(encoding="utf-8") == "héllo\n"


def test_inline_file_paths_are_normalized(tmp_path: Path) -> None:
    files = {"./a//b.txt": "x", "c/./d.txt": "y"}
    (task,) = load(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": files}))
    repo = Path(task.metadata["repo_path"])
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*.txt")) == ["a/b.txt", "c/d.txt"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/etc/passwd", "must be relative"),
        ("../outside.py", "'..' is not allowed"),
        ("a/../../b.py", "'..' is not allowed"),
        ("", "must not be empty"),
        ("./", "names no file"),
    ],
)
def test_inline_file_path_rules(tmp_path: Path, path: str, expected: str) -> None:
    problem = only_problem(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": {path: "x"}}))
    assert problem.field == f"$.files[{json.dumps(path)}]"
    assert expected in problem.message


def test_inline_paths_that_collide_are_rejected(tmp_path: Path) -> None:
    same = only_problem(
        write_jsonl(tmp_path / "a.jsonl", {**MINIMAL, "files": {"a.py": "1", "./a.py": "2"}})
    )
    assert "same file" in same.message
    nested = only_problem(
        write_jsonl(tmp_path / "b.jsonl", {**MINIMAL, "files": {"a": "1", "a/b.py": "2"}})
    )
    assert "cannot also be a directory" in nested.message


@pytest.mark.parametrize("files", [[], "main.py", 3])
def test_files_must_be_an_object(tmp_path: Path, files: Any) -> None:
    problem = only_problem(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": files}))
    assert problem.field == "$.files"
    assert "must be an object mapping relative file paths" in problem.message


def test_file_content_must_be_a_string(tmp_path: Path) -> None:
    problem = only_problem(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": {"a.py": ["x"]}}))
    assert problem.field == '$.files["a.py"]'
    assert "content must be a string" in problem.message and "got an array" in problem.message


def test_workspace_dir_is_relative_to_the_tasks_file(tmp_path: Path) -> None:
    (tmp_path / "tasks" / "ws" / "src").mkdir(parents=True)
    (tmp_path / "tasks" / "ws" / "src" / "x.py").write_text("x = 1\n")
    path = write_jsonl(tmp_path / "tasks" / "t.jsonl", {**MINIMAL, "workspace_dir": "ws"})
    (task,) = load(path)
    assert task.metadata["repo_path"] == str((tmp_path / "tasks" / "ws").resolve())
    assert describe_starting_files(task) == task.metadata["repo_path"]


def test_workspace_dir_may_be_absolute(tmp_path: Path) -> None:
    ws = tmp_path / "elsewhere"
    ws.mkdir()
    (tmp_path / "sub").mkdir()
    path = write_jsonl(tmp_path / "sub" / "t.jsonl", {**MINIMAL, "workspace_dir": str(ws)})
    (task,) = load(path)
    assert task.metadata["repo_path"] == str(ws.resolve())


def test_workspace_dir_must_be_an_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    path = write_jsonl(
        tmp_path / "t.jsonl",
        {**MINIMAL, "workspace_dir": "missing"},
        {"task_id": "t2", "prompt": "p", "workspace_dir": "file.txt"},
    )
    found = problems_of(path)
    assert [(p.task_id, p.field) for p in found] == [
        ("t1", "$.workspace_dir"),
        ("t2", "$.workspace_dir"),
    ]
    assert '"missing" does not exist' in found[0].message
    assert str(tmp_path / "missing") in found[0].message
    assert "is not a directory" in found[1].message


def test_files_and_workspace_dir_are_mutually_exclusive(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    problem = only_problem(
        write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "workspace_dir": "ws", "files": {"a": "b"}})
    )
    assert problem.field == "$"
    assert "mutually exclusive" in problem.message


# -- eval ---------------------------------------------------------------------------------


def test_eval_command_and_timeout(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "t.jsonl",
        {**MINIMAL, "eval": {"command": "python3 tests.py", "timeout_sec": 12}},
        {"task_id": "t2", "prompt": "p", "eval": {"command": "true"}},
    )
    first, second = load(path)
    assert first.metadata["eval_command"] == "python3 tests.py"
    assert first.metadata["eval_timeout_sec"] == 12.0
    assert isinstance(first.metadata["eval_timeout_sec"], float)
    assert second.metadata["eval_timeout_sec"] == 300.0


def test_timeout_sec_problem_reads_as_documented(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "tasks.jsonl",
        *[{"task_id": f"t{i}", "prompt": "p"} for i in range(6)],
        {"task_id": "x", "prompt": "p", "eval": {"command": "true", "timeout_sec": "fast"}},
    )
    problem = only_problem(path)
    assert str(problem).startswith(
        f"{path}:line 7: task 'x': $.eval.timeout_sec: must be a number > 0, got \"fast\""
    )


@pytest.mark.parametrize("timeout", [0, -1, True, None, "300", 1e400])
def test_timeout_sec_must_be_a_positive_number(tmp_path: Path, timeout: Any) -> None:
    record = {**MINIMAL, "eval": {"command": "true", "timeout_sec": timeout}}
    problem = only_problem(write_jsonl(tmp_path / "t.jsonl", record))
    assert problem.field == "$.eval.timeout_sec"


@pytest.mark.parametrize(
    ("ev", "field"),
    [
        ({}, "$.eval.command"),
        ({"command": ""}, "$.eval.command"),
        ({"command": 5}, "$.eval.command"),
        ("python3 t.py", "$.eval"),
    ],
)
def test_eval_needs_a_command(tmp_path: Path, ev: Any, field: str) -> None:
    problem = only_problem(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "eval": ev}))
    assert problem.field == field


# -- solution -------------------------------------------------------------------------------


def test_solution_files_and_command_are_kept(tmp_path: Path) -> None:
    solution = {"files": {"./src/a.py": "x = 1\n"}, "command": "make fix"}
    (task,) = load(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "solution": solution}))
    assert task.metadata["solution"] == {"files": {"src/a.py": "x = 1\n"}, "command": "make fix"}


@pytest.mark.parametrize(
    ("solution", "field", "expected"),
    [
        ({}, "$.solution", "needs 'files'"),
        ({"files": {"../x": "1"}}, '$.solution.files["../x"]', "'..'"),
        ({"command": ""}, "$.solution.command", "must not be empty"),
        ("cp a b", "$.solution", "must be an object"),
    ],
)
def test_solution_rules(tmp_path: Path, solution: Any, field: str, expected: str) -> None:
    found = problems_of(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "solution": solution}))
    assert any(p.field == field and expected in p.message for p in found), [str(p) for p in found]


# -- all problems at once ----------------------------------------------------------------------


def test_loader_raises_one_error_with_every_problem(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "tasks.jsonl",
        {"task_id": "a", "prompt": "p", "eval": {"command": "true", "timeout_sec": "fast"}},
        "not json",
        {"task_id": "b", "prompt": "p", "files": []},
    )
    with pytest.raises(TaskLoadError) as info:
        load(path)
    err = info.value
    assert isinstance(err, KsiError) and isinstance(err, ValueError)
    assert [p.location for p in err.problems] == ["line 1", "line 2", "line 3"]
    text = str(err)
    assert "3 problems" in text and "no task was loaded" in text
    assert all(str(p) in text for p in err.problems)


def test_loading_leaves_the_garbage_collector_as_it_was_and_frees_no_less(
    tmp_path: Path,
) -> None:
    """Loading pauses the collector and moves what it built to the oldest generation: a
    program that embeds KSI finds the collector as it left it (on or off, nothing frozen),
    and a reference cycle it dropped just before the load is still collected."""
    good = write_jsonl(tmp_path / "tasks.jsonl", {"task_id": "a", "prompt": "p"})
    bad = write_jsonl(tmp_path / "bad.jsonl", {"task_id": "a"})
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            gc.collect()  # no collection due before the load's own
            dropped = weakref.ref(Cycle())
            assert CustomTaskSource().load(good)[0].id == "a"
            with pytest.raises(TaskLoadError):
                CustomTaskSource().load(bad)
            assert gc.isenabled() is enabled and gc.get_freeze_count() == 0
            assert dropped() is not None  # only a cycle: freed by a collection
            gc.collect()
            assert dropped() is None
        finally:
            gc.enable()


class Cycle:
    """An object that only a collection frees: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


def test_validate_returns_empty_list_for_a_clean_file() -> None:
    assert problems_of(EXAMPLES / "tasks.jsonl") == []


# -- prompts ------------------------------------------------------------------------------------


def test_agent_prompt_appends_the_repo_note() -> None:
    task = TaskSpec(id="x", prompt="Fix the bug.")
    prompt = agent_prompt(task)
    assert prompt.startswith("Fix the bug.\n\n")
    assert prompt.endswith(REPO_NOTE)
    assert "repo/" in REPO_NOTE and "current working directory" in REPO_NOTE
    # The spec: the prompt says repo/ holds the starting files and to create or edit files there.
    assert "holds this task's starting files" in REPO_NOTE
    assert "Create or edit files there" in REPO_NOTE
    assert agent_prompt(TaskSpec(id="x", prompt=prompt)) == prompt  # never noted twice


def test_loaded_prompt_is_kept_as_written(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "prompt": "  Line 1\nLine 2 "})
    (task,) = load_typed(path)
    assert task.prompt == "  Line 1\nLine 2 "
    assert agent_prompt(task) == "  Line 1\nLine 2\n\n" + REPO_NOTE
    # The original KSI's loader returns the prompt with the note; it is never added twice.
    (original,) = load(path)
    assert original.prompt == "  Line 1\nLine 2\n\n" + REPO_NOTE
    assert agent_prompt(original) == original.prompt
    assert original.prompt.count(REPO_NOTE) == 1


# -- starting files are written only when asked -------------------------------------------


def _inline_task(tmp_path: Path) -> TaskSpec:
    (task,) = load_typed(
        write_jsonl(
            tmp_path / f"t{len(list(tmp_path.iterdir()))}.jsonl",
            {**MINIMAL, "files": {"a/b.py": "B"}},
        )
    )
    assert task.starting_files.kind == "inline" and task.starting_files.directory is None
    return task


ROUTES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "getitem": lambda m: m["repo_path"],
    "get": lambda m: m.get("repo_path"),
    "items": lambda m: dict(m.items())["repo_path"],
    "values": lambda m: next(
        v for k, v in zip(m.keys(), m.values(), strict=True) if k == "repo_path"
    ),
    "iteration": lambda m: next(m[k] for k in m if k == "repo_path"),
    "copy": lambda m: m.copy()["repo_path"],
    "copy.copy": lambda m: copy.copy(m)["repo_path"],
    "deepcopy": lambda m: copy.deepcopy(m)["repo_path"],
    "dict()": lambda m: dict(m)["repo_path"],
    "unpacking": lambda m: {**m}["repo_path"],
    "union": lambda m: (m | {})["repo_path"],
    "json.dumps": lambda m: json.loads(json.dumps(m))["repo_path"],
    "json.dumps indent": lambda m: json.loads(json.dumps(m, indent=2))["repo_path"],
    "pickle": lambda m: pickle.loads(pickle.dumps(m))["repo_path"],
    "kwargs": lambda m: (lambda **kw: kw["repo_path"])(**m),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_original_loader_repo_path_is_a_directory_by_every_read_route(
    tmp_path: Path, route: str
) -> None:
    (task,) = load(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": {"a/b.py": "B"}}))
    repo = Path(ROUTES[route](task.metadata))
    assert (repo / "a" / "b.py").read_text() == "B"


def test_reading_a_typed_task_writes_nothing(tmp_path: Path) -> None:
    task = _inline_task(tmp_path)
    assert task.eval.command == "" and task.origin.source == "custom"
    assert task.metadata == {}  # the custom source owns no extra keys
    assert pickle.loads(pickle.dumps(task)) == task
    assert task.starting_files.directory is None


def test_materialize_writes_the_inline_files_once_into_a_new_directory(tmp_path: Path) -> None:
    task = _inline_task(tmp_path)
    done = task.starting_files.materialize()
    assert done.kind == "directory" and done.directory is not None
    assert (Path(done.directory) / "a" / "b.py").read_text() == "B"
    assert done.materialize() is done  # a directory is already on disk
    assert task.starting_files.directory is None  # the task itself is unchanged


def test_replacing_repo_path_hands_the_starting_files_to_the_caller(tmp_path: Path) -> None:
    (task,) = load(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": {"a/b.py": "B"}}))
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "sub" / "own.txt").write_text("own")
    metadata = dict(task.metadata)
    metadata["repo_path"] = str(mine)
    dest = tmp_path / "dest"
    seed_repo(TaskSpec(id="t1", metadata=metadata), dest)
    assert (dest / "sub" / "own.txt").read_text() == "own"
    assert not (dest / "a").exists()


def test_temporary_starting_files_are_removed_at_exit(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": {"x.py": "1"}})
    script = (
        "import sys; from ksi.tasks.loaders import load_tasks_for_source as l\n"
        f"t = l(task_source='custom', tasks_path={str(path)!r})[0]\n"
        "print(t.metadata['repo_path'])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    repo = Path(out.stdout.strip())
    assert repo.name.startswith("task-")
    assert not repo.exists() and not repo.parent.exists()


# -- seeding ------------------------------------------------------------------------------------


def test_seed_writes_inline_files_without_materializing(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "files": {"a/b.py": "B"}})
    dest = tmp_path / "attempt" / "repo"
    # In a fresh process, so "no temporary directory of this process" can be checked.
    script = (
        "import glob, os, sys, tempfile\n"
        "from pathlib import Path\n"
        "from ksi.tasks.custom import CustomTaskSource\n"
        "from ksi.tasks.seed import seed_repo\n"
        f"(t,) = CustomTaskSource().load({str(path)!r})\n"
        f"seed_repo(t, Path({str(dest)!r}))\n"
        "pattern = os.path.join(tempfile.gettempdir(), f'ksi-tasks-{os.getpid()}-*')\n"
        "print(len(glob.glob(pattern)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert (dest / "a" / "b.py").read_text() == "B"
    assert out.stdout.strip() == "0"


def test_seed_copies_a_workspace_dir_keeping_symlinks(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (ws / "run.sh").chmod(0o755)
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    (ws / "link_out").symlink_to(secret)
    (ws / "link_in").symlink_to("pkg/mod.py")
    os.mkfifo(ws / "fifo")
    (task,) = load(write_jsonl(tmp_path / "t.jsonl", {**MINIMAL, "workspace_dir": "ws"}))
    dest = tmp_path / "dest"
    seed_repo(task, dest)
    assert (dest / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert os.access(dest / "run.sh", os.X_OK)
    assert (dest / "link_out").is_symlink()
    assert os.readlink(dest / "link_out") == str(secret)
    assert os.readlink(dest / "link_in") == "pkg/mod.py"
    assert not (dest / "fifo").exists()
    assert (ws / "pkg" / "mod.py").read_text() == "x = 1\n"  # the source is untouched


def test_seed_hand_built_task_copies_repo_path(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_files(src, {"a.txt": "A", "d/b.txt": "B"})
    task = TaskSpec(
        id="x", repo="", prompt="p", metadata={"task_source": "custom", "repo_path": str(src)}
    )
    seed_repo(task, tmp_path / "dest")
    assert (tmp_path / "dest" / "d" / "b.txt").read_text() == "B"


def test_seed_without_repo_path_gives_an_empty_dir(tmp_path: Path) -> None:
    seed_repo(TaskSpec(id="x", prompt="p"), tmp_path / "dest")
    assert (tmp_path / "dest").is_dir() and list((tmp_path / "dest").iterdir()) == []


def test_seed_with_a_missing_repo_path_is_a_user_error(tmp_path: Path) -> None:
    task = TaskSpec(id="x", metadata={"repo_path": str(tmp_path / "gone")})
    with pytest.raises(UserInputError, match=r"task 'x': metadata\['repo_path'\]"):
        seed_repo(task, tmp_path / "dest")


# -- the bundled examples are honest ------------------------------------------------------------


def _grade(task: TaskSpec, repo: Path) -> float:
    """The spec's scoring contract, applied by hand (exit code, score.json override)."""
    (repo / "score.json").unlink(missing_ok=True)
    done = subprocess.run(task.eval.command, shell=True, cwd=repo, capture_output=True, timeout=120)
    score_file = repo / "score.json"
    if score_file.exists():
        return float(json.loads(score_file.read_text())["score"])
    return 1.0 if done.returncode == 0 else 0.0


@pytest.mark.parametrize("task", load(EXAMPLES / "tasks.jsonl"), ids=lambda t: t.id)
def test_example_fails_untouched_and_passes_with_its_solution(
    task: TaskSpec, tmp_path: Path
) -> None:
    untouched = tmp_path / "nop" / "repo"
    seed_repo(task, untouched)
    assert _grade(task, untouched) == 0.0

    solved = tmp_path / "oracle" / "repo"
    seed_repo(task, solved)
    solution = task.metadata["solution"]
    assert solution, "every example task has a solution"
    write_files(solved, solution.get("files", {}))
    if "command" in solution:
        subprocess.run(solution["command"], shell=True, cwd=solved, check=True)
    assert _grade(task, solved) == 1.0
    # The checks live in test-named files, which capture always restores from the seed.
    assert not any("test" in name for name in solution.get("files", {}))


def test_examples_cover_both_kinds_of_starting_files_and_partial_credit(tmp_path: Path) -> None:
    tasks = {t.id: t for t in load_typed(EXAMPLES / "tasks.jsonl")}
    kinds = {describe_starting_files(t).endswith("(inline)") for t in tasks.values()}
    assert kinds == {True, False}
    roman = tasks["roman-numerals"]
    repo = tmp_path / "repo"
    seed_repo(roman, repo)
    (repo / "roman.py").write_text(
        "def to_roman(n):\n    return {1: 'I', 4: 'IV', 9: 'IX'}[n]\n\n"
        "def from_roman(s):\n    raise NotImplementedError\n"
    )
    assert _grade(roman, repo) == pytest.approx(0.3)


def test_workspace_note_false_gives_the_prompt_verbatim() -> None:
    from ksi.models import TaskSpec
    from ksi.tasks.prompts import REPO_NOTE, agent_prompt

    plain = TaskSpec(id="a", prompt="do it")
    assert agent_prompt(plain).endswith(REPO_NOTE)
    verbatim = TaskSpec(id="b", prompt="do it in /app", metadata={"workspace_note": False})
    assert agent_prompt(verbatim) == "do it in /app"


def test_a_loaded_task_is_the_task_its_parts_build(tmp_path: Path) -> None:
    """The loader sets a task's slots itself (attrs' ``__init__`` was a tenth of loading):
    what it builds is the task the public constructor makes of the same parts, every slot set,
    pickled and evolved like any other."""
    record = {
        "task_id": "t",
        "prompt": "Fix it.",
        "files": {"src/a.py": "x = 1\n"},
        "eval": {"command": "python3 -c 1", "timeout_sec": 5},
        "solution": {"files": {"src/a.py": "x = 2\n"}, "command": "true"},
    }
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    (task,) = CustomTaskSource().load(path)
    built = TaskSpec(
        "t",
        "",
        "Fix it.",
        {},
        eval=EvalSpec("python3 -c 1", 5),
        starting_files=StartingFiles(files={"src/a.py": "x = 1\n"}),
        runtime=Runtime(),
        solution=Solution({"src/a.py": "x = 2\n"}, "true"),
        origin=TaskOrigin("custom", str(path.resolve()), "line 1"),
        workspace_note=True,
    )
    assert task == built and repr(task) == repr(built)
    assert pickle.loads(pickle.dumps(task)) == built
    assert attrs.evolve(task, prompt="Other.") == attrs.evolve(built, prompt="Other.")


#: Ways a task is first read that do not go through its attributes by name.
FIRST_READS: dict[str, Callable[[TaskSpec], Any]] = {
    "pickle": lambda t: pickle.loads(pickle.dumps(t)),
    "evolve": lambda t: attrs.evolve(t),
    "asdict": lambda t: attrs.asdict(t, recurse=False),
    "astuple": lambda t: attrs.astuple(t, recurse=False),
    "repr": repr,
}


@pytest.mark.parametrize("route", list(FIRST_READS))
def test_parts_built_on_first_read_are_there_by_every_route(tmp_path: Path, route: str) -> None:
    """The starting files, solution and origin of a loaded task are built when first read:
    whatever reads the task first (a worker process gets it pickled) sees them all."""
    record = {
        **MINIMAL,
        "files": {"src/a.py": "x = 1\n"},
        "solution": {"command": "true"},
    }
    path = write_jsonl(tmp_path / "tasks.jsonl", record)
    (fresh,) = CustomTaskSource().load(path)
    (task,) = CustomTaskSource().load(path)
    assert (task.starting_files.files, task.origin.location) == ({"src/a.py": "x = 1\n"}, "line 1")
    assert task.solution == Solution(None, "true")
    assert FIRST_READS[route](fresh) == FIRST_READS[route](task) and fresh == task
    with pytest.raises(AttributeError, match="'TaskSpec' object has no attribute 'sollution'"):
        task.sollution  # noqa: B018 - a misspelt name is still an AttributeError
