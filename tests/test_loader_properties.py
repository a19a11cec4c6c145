"""Property tests: whatever a tasks file holds, the loader fails only with a KsiError.

And ``validate`` agrees with ``load``: a file loads exactly when validate finds
no problem, and every problem names the file.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ksi.errors import KsiError, TaskLoadError
from ksi.tasks.custom import CustomTaskSource, load_custom_tasks
from ksi.tasks.schema import check_record, plain_record
from ksi.tasks.seed import seed_repo

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
paths = st.sampled_from(
    ["a.py", "src/b.py", "../x", "/abs", "", ".", "a//b", "a", "a/b", "C:/w", "x\\..\\y"]
) | st.text(max_size=10)
files_maps = st.dictionaries(paths, st.text(max_size=8) | json_values, max_size=3)
records = st.fixed_dictionaries(
    {},
    optional={
        "task_id": st.sampled_from(["t1", "t2", ""]) | json_values,
        "prompt": st.text(max_size=10) | json_values,
        "workspace_dir": st.sampled_from([".", "missing", "tasks.jsonl"]) | json_values,
        "files": files_maps | json_values,
        "eval": st.fixed_dictionaries(
            {},
            optional={
                "command": st.text(max_size=6) | json_values,
                "timeout_sec": st.floats() | st.integers() | json_values,
                "timout": json_values,
            },
        )
        | json_values,
        "solution": st.fixed_dictionaries(
            {},
            optional={
                "files": files_maps | json_values,
                "command": st.text(max_size=6) | json_values,
                "cmd": json_values,
            },
        )
        | json_values,
        "extra": json_values,
    },
)


def _check(path: Path) -> None:
    source = CustomTaskSource()
    problems = source.validate(path)
    assert all(p.file == str(path) and p.message for p in problems)
    try:
        # The original's entry point: every task's starting files on disk at repo_path.
        tasks = load_custom_tasks(path)
    except KsiError as exc:
        assert isinstance(exc, TaskLoadError) and isinstance(exc, ValueError)
        assert problems and exc.problems == problems
        return
    assert problems == []
    for i, task in enumerate(tasks):
        assert Path(task.metadata["repo_path"]).is_dir()
        seed_repo(task, path.parent / f"seed{i}")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(records | json_values, min_size=0, max_size=4), st.sampled_from([".jsonl", ".json"])
)
def test_any_json_records_give_tasks_or_a_ksi_error(values: list[Any], suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"tasks{suffix}"
        if suffix == ".json":
            path.write_text(json.dumps(values), encoding="utf-8")
        else:
            path.write_text("\n".join(json.dumps(v) for v in values), encoding="utf-8")
        _check(path)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=5), st.sampled_from([".jsonl", ".json"]))
def test_any_bytes_give_tasks_or_a_ksi_error(lines: list[bytes], suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"tasks{suffix}"
        path.write_bytes(b"\n".join(lines))
        _check(path)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=5))
def test_any_text_lines_give_tasks_or_a_ksi_error(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tasks.jsonl"
        path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
        _check(path)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=5), min_size=1, max_size=4)
)
def test_accepted_inline_files_are_written_inside_repo(files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tasks.jsonl"
        path.write_text(json.dumps({"task_id": "t", "prompt": "p", "files": files}))
        try:
            (task,) = load_custom_tasks(path)
        except TaskLoadError:
            return
        repo = Path(task.metadata["repo_path"]).resolve()
        written = [p for p in repo.rglob("*") if p.is_file()]
        assert len(written) == len(files)
        dest = Path(tmp) / "dest"
        seed_repo(task, dest)
        assert sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file()) == sorted(
            p.relative_to(repo) for p in written
        )
        # What ksi run seeds from (the inline files, never written at load) is the same.
        (typed,) = CustomTaskSource().load(path)
        direct = Path(tmp) / "direct"
        seed_repo(typed, direct)
        assert sorted(p.relative_to(direct) for p in direct.rglob("*") if p.is_file()) == sorted(
            p.relative_to(repo) for p in written
        )


#: Records close to valid ones: each field most often valid, else off in one of the ways a
#: checker must catch (a list repeats a valid value to weight it).
def _mostly(valid: list[Any], invalid: list[Any]) -> st.SearchStrategy[Any]:
    return st.sampled_from(valid * 4 + invalid)


near_files = st.dictionaries(
    _mostly(
        ["a.py", "src/b.py", "src"],
        ["src/b.py/c", ".hidden", "a/../b", "a//b", "x" * 70, "é.py", "a\\b", "/abs"],
    ),
    _mostly(["x", "", "h\u00e9"], ["\udc80", 1, None]),
    max_size=3,
)
near_text = _mostly(["t1", "do it", "t\u00e9"], ["", " ", "\t", "p\ud800", 7, None])
near_records = st.fixed_dictionaries(
    {"task_id": near_text, "prompt": near_text},
    optional={
        "files": near_files | st.none(),
        "workspace_dir": _mostly([None], ["."]),
        "eval": st.fixed_dictionaries(
            {"command": near_text},
            optional={
                "timeout_sec": _mostly(
                    [1, 0.5, 604800],
                    [0, -1, 604801, float("nan"), float("inf"), True, "5", 10**400],
                ),
                "timout": st.just(1),
            },
        )
        | st.none(),
        "solution": st.fixed_dictionaries(
            {}, optional={"files": near_files | st.none(), "command": near_text}
        )
        | st.none(),
    },
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_records | near_records | records | json_values)
def test_the_one_pass_check_accepts_only_what_the_field_checker_accepts_unchanged(
    value: Any,
) -> None:
    """Loading checks a plain record in one pass and words problems with the field-by-field
    checker: a record the first accepts gets no problem from the second, and the same task."""
    plain = plain_record(value, {})
    if plain is None:
        return
    record, problems = check_record(value, "tasks.jsonl", "line 1", Path("."))
    assert problems == [] and record is not None
    task_id, prompt, files, command, timeout, solution = plain
    assert (record.task_id, record.prompt, record.files) == (task_id, prompt, files)
    assert (record.eval_command, record.eval_timeout_sec) == (command, timeout)
    assert record.workspace_dir is None and record.solution == solution
