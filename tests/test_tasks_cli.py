"""``ksi tasks validate`` and ``ksi tasks list``, in-process and as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ksi.cli import build_app

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        '{"task_id": "a", "prompt": "p", "eval": {"command": "true", "timeout_sec": "fast"}}\n'
        '{"task_id": "b", "promt": "p"}\n'
        "{oops\n"
    )
    return path


def test_validate_ok(runner: CliRunner) -> None:
    result = runner.invoke(build_app(), ["tasks", "validate", str(EXAMPLES / "tasks.jsonl")])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("OK: 4 tasks")


def test_validate_reports_every_problem_on_stderr_and_exits_2(
    runner: CliRunner, bad_file: Path
) -> None:
    result = runner.invoke(build_app(), ["tasks", "validate", str(bad_file)])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: {bad_file}: 4 problems; no task was loaded"
    assert lines[1:] == [
        f"error: {bad_file}:line 1: task 'a': $.eval.timeout_sec: must be a number > 0, "
        'got "fast" (seconds, e.g. 300)',
        f"error: {bad_file}:line 2: task 'b': $.promt: unknown key 'promt' in the record; "
        "did you mean 'prompt'? Valid keys: task_id, prompt, workspace_dir, files, eval, "
        "solution",
        f"error: {bad_file}:line 2: task 'b': $.prompt: is required: add \"prompt\": "
        '"<the instruction for the agent>"',
        f"error: {bad_file}:line 3: invalid JSON at column 2: Expecting property name "
        "enclosed in double quotes",
    ]


def test_validate_unknown_task_source_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(
        build_app(), ["tasks", "validate", str(EXAMPLES / "tasks.jsonl"), "--task-source", "custon"]
    )
    assert result.exit_code == 2
    assert "did you mean 'custom'?" in result.stderr


def test_list_shows_id_starting_files_and_eval(runner: CliRunner) -> None:
    result = runner.invoke(build_app(), ["tasks", "list", str(EXAMPLES / "tasks.jsonl")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["TASK", "STARTING", "FILES", "EVAL", "COMMAND"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {"slugify", "median-bug", "wordfreq-normalize", "roman-numerals"}
    assert "2 files (inline)" in rows["slugify"]
    assert "python3 -m unittest -q test_slugify" in rows["slugify"]
    assert str(EXAMPLES / "workspaces" / "wordfreq") in rows["wordfreq-normalize"]


def test_list_json(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"task_id": "x", "prompt": "p"}]))
    result = runner.invoke(build_app(), ["tasks", "list", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {
            "task_id": "x",
            "starting_files": "(empty)",
            "evaluator": "command",
            "eval_command": "",
            "eval_timeout_sec": 300.0,
            "has_solution": False,
            "source_location": "record 1",
        }
    ]


def test_list_of_a_bad_file_exits_2(runner: CliRunner, bad_file: Path) -> None:
    result = runner.invoke(build_app(), ["tasks", "list", str(bad_file), "--json"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "$.eval.timeout_sec" in result.stderr


def test_real_subprocess_validate_bad_file(bad_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ksi", "tasks", "validate", str(bad_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert f"error: {bad_file}:line 3: invalid JSON at column 2" in done.stderr
    assert len(done.stderr.splitlines()) == 5


def test_real_subprocess_validate_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_bytes(b'[{"task_id": "\xff", "prompt": "p"}]')
    done = subprocess.run(
        [sys.executable, "-m", "ksi", "tasks", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "line 1: is not valid UTF-8 text (byte 0xff at column 15)" in done.stderr


def test_real_subprocess_validate_examples() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ksi", "tasks", "validate", str(EXAMPLES / "tasks.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK: 4 tasks")
