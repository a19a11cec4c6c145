"""Claude Code, the real CLI, through ``ksi run`` against the mock Anthropic API.

Each test runs ``ksi run`` and the mock in one loopback-only network namespace
(see ``tests/real_agents.py``), with only ``ANTHROPIC_API_KEY`` set and
``--agent-option base_url=...``, as the user running the tests (root in CI,
where Claude Code needs the ``IS_SANDBOX=1`` KSI sets).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from atif_validator import HarborValidator
from mockmodel import RATE_LIMITED, UNAUTHORIZED, Answer, Hang, HttpError, MockUsage, ToolCall
from real_agents import (
    HELLO_TASK,
    WRITE_AND_SHOW_HELLO,
    WRITE_HELLO,
    MockRun,
    check_trajectory,
    cli_bin_dir,
    free_port,
    ksi_run_with_mock,
)

from ksi.agents import tested_versions
from tests.run_helpers import table_price

pytestmark = pytest.mark.real_cli

AGENT = "claude-code"
KEY = {"ANTHROPIC_API_KEY": "sk-ant-mock-key"}
MODEL = "claude-sonnet-4-5"


def write_hello(usage: MockUsage, command: str = WRITE_HELLO) -> ToolCall:
    return ToolCall("Bash", {"command": command, "description": "Create hello.txt"}, usage)


def result_event(run: MockRun) -> dict[str, object]:
    """The CLI's own final ``result`` line, from the attempt's stdout log."""
    lines = run.attempt_file("agent.stdout.log").read_text().splitlines()
    results = [json.loads(x) for x in lines if x.startswith('{"') and '"type":"result"' in x]
    assert results, run.describe()
    return results[-1]


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
    first, second = MockUsage(1200, 45, 3000, 400), MockUsage(1500, 30, 4200, 0)
    call = write_hello(first, WRITE_AND_SHOW_HELLO)
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        environment=environment,
        script=[call, Answer("Created hello.txt with hello.", second)],
    )
    assert run.proc.returncode == 0, run.describe()
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == ("scored", 1.0, "completed"), (
        run.describe()
    )
    usage = rec["usage"]
    assert usage["input_tokens"] == 2700
    assert usage["output_tokens"] == 75
    assert usage["cache_read_tokens"] == 7200
    assert usage["cache_write_tokens"] == 400
    assert usage["turns"] == 2 == len(run.served)
    # Claude Code prices the tokens itself; KSI reports the cost the CLI printed.
    assert usage["cost_usd"] == result_event(run)["total_cost_usd"]
    assert usage["cost_usd"] > 0
    assert usage["cost_estimated"] is False and usage["price_table"] == ""
    assert rec["final_message"] == "Created hello.txt with hello."
    # The CLI used the key it was given, against the mock, for the model asked for.
    assert {r.headers.get("x-api-key") for r in run.requests} == {"sk-ant-mock-key"}
    assert {s.request.body["model"] for s in run.served} == {MODEL}
    # The trajectory: the scripted Bash call with its arguments and output, the usage as served.
    doc = check_trajectory(run, harbor, call=(call.name, call.arguments), output="hello")
    tested = tested_versions.tested_cli(AGENT)
    assert tested is not None and doc["agent"]["version"] == tested.version
    assert [s["source"] for s in doc["steps"]] == ["user", "agent", "agent"]
    assert doc["steps"][-1]["message"] == "Created hello.txt with hello."


def test_bad_key_is_an_auth_error_that_stops_the_run(tmp_path: Path) -> None:
    # Two tasks, one at a time: the first attempt's 401 must keep the second from starting.
    tasks = [HELLO_TASK, {**HELLO_TASK, "task_id": "hello-2"}]
    port = free_port()
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        tasks=tasks,
        agent_options=["max_retries=1"],
        args=["--concurrency", "1"],
        script=[],
        then=UNAUTHORIZED,
        port=port,
    )
    assert run.proc.returncode == 3, run.describe()
    recs = run.records
    assert len(recs) == 1, run.describe()
    assert (recs[0]["status"], recs[0]["agent_status"]) == ("agent_error", "auth_error")
    assert "Invalid API key" in recs[0]["error"]
    # The message names the agent, the variable to check and the CLI's own words.
    assert "claude-code" in run.proc.stderr and "ANTHROPIC_API_KEY" in run.proc.stderr
    assert "Invalid API key" in run.proc.stderr
    assert "hello-2" in run.proc.stderr  # the task that was not started
    assert len(run.served) == 2  # the first call and the one retry asked for

    # The key fixed, the same command resumes: the auth_error attempt runs again, and the rest.
    done = Answer("Done.", MockUsage(10, 5))
    again = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        tasks=tasks,
        agent_options=["max_retries=1"],
        args=["--concurrency", "1"],
        script=[write_hello(MockUsage(10, 5)), done, write_hello(MockUsage(10, 5)), done],
        port=port,
    )
    assert again.proc.returncode == 0, again.describe()
    latest = {r["task_id"]: r for r in again.records}
    assert {t: (r["status"], r["score"]) for t, r in latest.items()} == {
        "hello": ("scored", 1.0),
        "hello-2": ("scored", 1.0),
    }


def test_bad_key_without_fail_fast_runs_every_attempt(tmp_path: Path) -> None:
    tasks = [HELLO_TASK, {**HELLO_TASK, "task_id": "hello-2"}]
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        tasks=tasks,
        agent_options=["max_retries=0"],
        args=["--concurrency", "1", "--no-fail-fast"],
        script=[],
        then=UNAUTHORIZED,
    )
    assert run.proc.returncode == 3, run.describe()
    assert sorted(r["agent_status"] for r in run.records) == ["auth_error", "auth_error"]


def test_a_permission_mode_that_refuses_every_command_is_tools_refused(tmp_path: Path) -> None:
    """In the ``default`` mode Claude Code asks before a command writes a file, and nobody
    answers in a run: the model gives up and the work scored 0. It is an agent error naming
    the fix, and the run stops there (exit 3)."""
    gave_up = Answer("I could not create the file without permission.", MockUsage(10, 5))
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        agent_options=["permission_mode=default"],
        script=[write_hello(MockUsage(10, 5)), gave_up],
    )
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == (
        "agent_error",
        None,
        "tools_refused",
    ), run.describe()
    assert "refused every tool call it made (1): " in rec["error"]
    assert "needs approval" in rec["error"]  # Claude Code's own words
    assert "permission_mode=bypassPermissions" in rec["error"]
    assert run.proc.returncode == 3, run.describe()


def test_rate_limit_is_rate_limited(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        agent_options=["max_retries=1"],
        script=[],
        then=RATE_LIMITED,
    )
    rec = run.record
    assert (rec["status"], rec["agent_status"]) == ("agent_error", "rate_limited"), run.describe()
    assert "429" in rec["error"]


def test_turn_limit_is_budget_exceeded_with_the_usage_so_far(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        agent_options=["max_turns=1"],
        script=[write_hello(MockUsage(800, 25)), write_hello(MockUsage(900, 25))],
    )
    rec = run.record
    assert rec["agent_status"] == "budget_exceeded", run.describe()
    assert "turn limit" in rec["error"]
    assert rec["usage"]["input_tokens"] == 800 and rec["usage"]["output_tokens"] == 25
    assert rec["usage"]["cost_usd"] == result_event(run)["total_cost_usd"]
    assert rec["status"] == "agent_error"


def test_timeout_keeps_the_exact_usage_of_finished_calls(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        args=["--timeout", "20"],
        script=[write_hello(MockUsage(700, 55, 100, 10)), Hang()],
    )
    rec = run.record
    assert rec["agent_status"] == "timeout", run.describe()
    assert rec["agent_timed_out"] is True
    usage = rec["usage"]
    # The output count is the message's final one (55), not its start-of-message 1.
    assert (usage["input_tokens"], usage["output_tokens"]) == (700, 55)
    assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (100, 10)
    assert usage["turns"] == 1
    # Killed before it printed its cost: KSI prices the tokens of the finished call.
    assert usage["cost_usd"] == pytest.approx(
        table_price(
            MODEL, input_tokens=700, output_tokens=55, cache_read_tokens=100, cache_write_tokens=10
        )
    )
    assert usage["cost_estimated"] is True


def test_doctor_names_the_real_cli_version_and_that_it_was_tested(tmp_path: Path) -> None:
    bin_dir = cli_bin_dir(AGENT)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-x"}
    proc = subprocess.run(
        [sys.executable, "-m", "ksi", "doctor", "--agent", AGENT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tested = tested_versions.tested_cli(AGENT)
    assert tested is not None
    line = next(x for x in proc.stdout.splitlines() if "claude-code binary" in x)
    assert line.startswith("[ok]")
    assert f"({tested.version} (Claude Code)); the version KSI was tested with" in line


def test_cost_limit_is_budget_exceeded_with_the_cost_so_far(tmp_path: Path) -> None:
    big = MockUsage(400_000, 100)  # about a dollar at any Claude price: over the limit
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        agent_options=["max_budget_usd=0.05"],
        script=[write_hello(big), write_hello(big)],
        then=Answer("never reached"),
    )
    rec = run.record
    assert rec["agent_status"] == "budget_exceeded", run.describe()
    assert "budget limit" in rec["error"]
    assert len(run.served) == 1  # the CLI stopped after the first, costly call
    assert rec["usage"]["cost_usd"] == result_event(run)["total_cost_usd"] > 0.05


@pytest.mark.parametrize(
    ("error", "status", "words"),
    [
        (HttpError(529, "Overloaded"), "rate_limited", "Overloaded"),
        (
            HttpError(400, "prompt is too long: 215000 tokens > 200000 maximum"),
            "context_exceeded",
            "prompt is too long",
        ),
        (
            HttpError(400, "Your credit balance is too low to access the Anthropic API."),
            "budget_exceeded",
            "credit balance is too low",
        ),
    ],
    ids=["overloaded", "context", "credit"],
)
def test_provider_errors_are_classified(
    tmp_path: Path, error: HttpError, status: str, words: str
) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent=AGENT,
        env=KEY,
        model=MODEL,
        agent_options=["max_retries=0"],
        script=[],
        then=error,
    )
    rec = run.record
    assert rec["agent_status"] == status, run.describe()
    assert words.lower() in rec["error"].lower()  # the CLI's own rewording of the API's
