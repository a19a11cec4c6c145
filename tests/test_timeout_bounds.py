"""Timeouts longer than 7 days are refused where they enter; none can overflow a wait.

``poll`` takes milliseconds in a C int: a timeout above ~24.8 days used to end
in ``OverflowError`` (a traceback from ``ksi grade``).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ksi.cli import build_app
from ksi.limits import MAX_TIMEOUT_SEC
from ksi.proc import run_process
from ksi.rundir.config import RunConfig

TOO_LONG = 30 * 24 * 3600.0  # 30 days: past what poll() could take in one call


def _tasks(tmp_path: Path, timeout: float) -> Path:
    path = tmp_path / "tasks.jsonl"
    record = {"task_id": "t", "prompt": "p", "eval": {"command": "true", "timeout_sec": timeout}}
    path.write_text(json.dumps(record) + "\n")
    return path


def _grade(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_app(), ["grade", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback is the bug this file guards against
    return result.exit_code, result.stderr


@pytest.mark.parametrize("timeout", [TOO_LONG, 1e12, MAX_TIMEOUT_SEC + 1])
@pytest.mark.parametrize("cancellable", [False, True])
def test_no_timeout_overflows_a_wait(timeout: float, cancellable: bool, tmp_path: Path) -> None:
    import threading

    started = time.monotonic()
    res = run_process(
        [sys.executable, "-c", "print('done')"],
        cwd=tmp_path,
        env={},
        timeout=timeout,
        stdout_path=tmp_path / "out",
        stderr_path=tmp_path / "err",
        cancel=threading.Event() if cancellable else None,
    )
    assert res.exit_code == 0 and not res.timed_out
    assert (tmp_path / "out").read_text() == "done\n"
    assert time.monotonic() - started < 30


def test_a_tasks_file_timeout_above_7_days_is_a_load_error(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, TOO_LONG)
    (tmp_path / "ws").mkdir()
    code, err = _grade(
        "--tasks-path", str(tasks), "--task-id", "t", "--workspace", str(tmp_path / "ws")
    )
    assert code == 2
    assert "line 1" in err and "$.eval.timeout_sec" in err
    assert "at most 604800 seconds (7 days)" in err and "give a shorter timeout" in err


def test_exactly_7_days_is_accepted(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, MAX_TIMEOUT_SEC)
    (tmp_path / "ws").mkdir()
    code, err = _grade(
        "--tasks-path", str(tasks), "--task-id", "t", "--workspace", str(tmp_path / "ws")
    )
    assert code == 0, err


def test_an_evaluator_option_timeout_above_7_days_is_refused(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, 5)
    (tmp_path / "ws").mkdir()
    code, err = _grade(
        "--tasks-path", str(tasks), "--task-id", "t", "--workspace", str(tmp_path / "ws"),
        "--evaluator-option", f"timeout_sec={TOO_LONG:g}",
    )  # fmt: skip
    assert code == 2
    assert "timeout_sec" in err and "at most 604800 seconds (7 days)" in err


def test_run_timeout_above_7_days_is_refused_by_the_cli_and_the_api(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        build_app(),
        ["run", str(_tasks(tmp_path, 5)), "--agent", "nop", "--timeout", f"{TOO_LONG:g}"],
    )
    assert result.exit_code == 2
    assert "--timeout" in result.stderr and "604800" in result.stderr
    assert not (tmp_path / "runs").exists()
    for value in (TOO_LONG, math.inf):
        problems = RunConfig(tasks_path=str(tmp_path), agent="nop", timeout_sec=value).problems()
        assert any("timeout_sec (--timeout): must be at most 604800" in p for p in problems), (
            problems
        )
    assert RunConfig(tasks_path="x", agent="nop", timeout_sec=MAX_TIMEOUT_SEC).problems() == []
