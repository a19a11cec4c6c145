"""Gemini CLI, the real CLI, through ``ksi run`` against the mock Gemini API.

Each test runs ``ksi run`` and the mock in one loopback-only network namespace
(see ``tests/real_agents.py``), with only ``GEMINI_API_KEY`` set and
``--agent-option base_url=...``. A model is always named: without one the CLI
first asks a "router" model which model to use, a side call per turn.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from atif_validator import HarborValidator
from mockmodel import RATE_LIMITED, Answer, Hang, HttpError, MockUsage, ToolCall
from real_agents import (
    HELLO_TASK,
    WRITE_AND_SHOW_HELLO,
    WRITE_HELLO,
    check_trajectory,
    ksi_run_with_mock,
)

from tests.run_helpers import table_price

pytestmark = pytest.mark.real_cli

AGENT = "gemini-cli"
KEY = {"GEMINI_API_KEY": "gm-mock-key"}
MODEL = "gemini-2.5-pro"


def write_hello(usage: MockUsage, command: str = WRITE_HELLO) -> ToolCall:
    return ToolCall("run_shell_command", {"command": command}, usage)


@pytest.mark.parametrize(
    "environment",
    [
        "local",
        pytest.param(
            "sandbox",
            marks=[
                pytest.mark.sandbox,
                pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
            ],
        ),
    ],
)
def test_solves_a_one_file_task_with_the_usage_the_mock_served(
    tmp_path: Path, environment: str, harbor: HarborValidator
) -> None:
    call = write_hello(MockUsage(1100, 40, 2000), WRITE_AND_SHOW_HELLO)
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        environment=environment,
        script=[
            call,
            Answer("hello.txt is in place.", MockUsage(1300, 20, 0)),
        ],
    )
    assert run.proc.returncode == 0, run.describe()
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == ("scored", 1.0, "completed"), (
        run.describe()
    )
    usage = rec["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (2400, 60)
    assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (2000, 0)
    assert usage["turns"] == 2 == len(run.served)
    # Gemini CLI reports no cost: KSI prices the tokens from the table, and says so.
    assert usage["cost_usd"] == pytest.approx(
        table_price(MODEL, input_tokens=2400, output_tokens=60, cache_read_tokens=2000)
    )
    assert usage["cost_estimated"] is True and usage["price_table"].startswith("genai-prices ")
    assert rec["final_message"] == "hello.txt is in place."
    assert {r.headers.get("x-goog-api-key") for r in run.served_requests()} == {"gm-mock-key"}
    assert {s.request.path for s in run.served} == {f"/v1beta/models/{MODEL}:streamGenerateContent"}
    # The settings KSI wrote for base_url stay in the workspace's .ksi/, out of the diff.
    assert "gemini-home" not in run.attempt_file("diff.patch").read_text(errors="replace")
    # The trajectory (from the CLI's chat record, copied beside the logs).
    assert run.attempt_file("gemini.session.jsonl").is_file()
    doc = check_trajectory(run, harbor, call=(call.name, call.arguments), output="hello")
    [result] = [s["observation"]["results"][0] for s in doc["steps"] if "observation" in s]
    assert result["extra"] == {"failed": False}  # the CLI prints an exit code only when nonzero


def test_bad_key_is_an_auth_error_that_stops_the_run(tmp_path: Path) -> None:
    tasks = [HELLO_TASK, {**HELLO_TASK, "task_id": "hello-2"}]
    message = "API key not valid. Please pass a valid API key."
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        tasks=tasks,
        args=["--concurrency", "1"],
        script=[],
        then=HttpError(401, message),
    )
    assert run.proc.returncode == 3, run.describe()
    recs = run.records
    assert len(recs) == 1, run.describe()
    assert (recs[0]["status"], recs[0]["agent_status"]) == ("agent_error", "auth_error")
    assert message in recs[0]["error"]
    assert "gemini-cli" in run.proc.stderr and "GEMINI_API_KEY" in run.proc.stderr
    assert message in run.proc.stderr


def test_rate_limit_is_rate_limited_not_timeout(tmp_path: Path) -> None:
    # The CLI retries a 429 with backoff for minutes; KSI's timeout ends it first.
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        args=["--timeout", "15"],
        script=[],
        then=RATE_LIMITED,
    )
    rec = run.record
    assert (rec["status"], rec["agent_status"]) == ("agent_error", "rate_limited"), run.describe()
    assert rec["agent_timed_out"] is True
    assert "retrying HTTP 429" in rec["error"]
    assert len(run.served) >= 2  # the CLI did retry


def test_timeout_keeps_no_invented_usage(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        args=["--timeout", "15"],
        script=[write_hello(MockUsage(700, 55)), Hang()],
    )
    rec = run.record
    assert rec["agent_status"] == "timeout", run.describe()
    assert rec["agent_timed_out"] is True
    # Gemini CLI prints its stats only at the end: a killed run has none, and KSI invents none.
    assert rec["usage"]["input_tokens"] == rec["usage"]["output_tokens"] == 0
    assert rec["usage"]["turns"] is None
    assert len(run.served) == 2


def test_context_overflow_is_context_exceeded(tmp_path: Path) -> None:
    message = (
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    )
    run = ksi_run_with_mock(
        tmp_path, agent=AGENT, env=KEY, model=MODEL, script=[], then=HttpError(400, message)
    )
    rec = run.record
    assert rec["agent_status"] == "context_exceeded", run.describe()
    assert "exceeds the maximum number of tokens" in rec["error"]


def test_turn_limit_is_budget_exceeded(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        agent_options=["max_turns=1"],
        script=[write_hello(MockUsage(500, 10))],
        then=write_hello(MockUsage(500, 10)),
    )
    rec = run.record
    assert rec["agent_status"] == "budget_exceeded", run.describe()
    assert "turn limit" in rec["error"] or "53" in rec["error"]
    assert len(run.served) == 1


def test_max_cost_stops_the_run_on_the_estimated_cost(tmp_path: Path) -> None:
    # Two tasks, one at a time: the first attempt's tokens cost about $0.13 at the
    # model's price, which Gemini CLI does not report; --max-cost 0.1 sees the estimate.
    big = MockUsage(100_000, 500)
    tasks = [HELLO_TASK, {**HELLO_TASK, "task_id": "hello-2"}]
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        tasks=tasks,
        args=["--concurrency", "1", "--max-cost", "0.1"],
        script=[write_hello(big), Answer("hello.txt is in place.", MockUsage(100, 10))],
    )
    [rec] = run.records
    assert rec["score"] == 1.0, run.describe()
    assert rec["usage"]["cost_estimated"] is True and rec["usage"]["cost_usd"] > 0.1
    assert len(run.served) == 2, "the second task never started"
    assert "max_cost" in run.proc.stdout + run.proc.stderr, run.describe()


def test_an_approval_mode_that_offers_no_command_is_tools_refused(tmp_path: Path) -> None:
    """Headless, in the ``default`` approval mode, the CLI offers no tool that needs
    approval: the model's command is "not found", and the work would have scored 0."""
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        agent_options=["approval_mode=default"],
        script=[write_hello(MockUsage(100, 10)), Answer("I could not run it.", MockUsage(90, 9))],
    )
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == (
        "agent_error",
        None,
        "tools_refused",
    ), run.describe()
    assert 'Tool "run_shell_command" not found' in rec["error"]
    assert "approval_mode=yolo" in rec["error"]
    assert run.proc.returncode == 3, run.describe()
