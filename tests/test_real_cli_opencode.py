"""The real OpenCode CLI through ``ksi run``, against the mock model (Responses API over SSE).

Only ``OPENAI_API_KEY`` and ``--agent-option base_url=...`` are given. The
model is one OpenCode's catalog knows (``openai/gpt-4.1``), so OpenCode
prices the calls itself: KSI reports its cost.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from atif_validator import HarborValidator
from mockmodel import RATE_LIMITED, UNAUTHORIZED, Answer, Hang, MockUsage, ToolCall
from real_agents import check_trajectory, ksi_run_with_mock

pytestmark = pytest.mark.real_cli

KEY = {"OPENAI_API_KEY": "sk-mock-opencode"}
MODEL = "openai/gpt-4.1"
#: OpenCode's catalog price of gpt-4.1, USD per token: input, cached input, output.
PRICE_IN, PRICE_CACHED, PRICE_OUT = 2e-6, 0.5e-6, 8e-6
SOLVE = (
    ToolCall(
        "write",
        {"filePath": "repo/hello.txt", "content": "hello\n"},
        MockUsage(120, 15, 800, 0),
        text="Writing the file.",
    ),
    Answer("Created hello.txt containing hello.", MockUsage(60, 25, 900, 0)),
)


@pytest.mark.parametrize(
    "environment", ["local", pytest.param("sandbox", marks=pytest.mark.sandbox)]
)
def test_solves_with_usage_cost_and_turns_as_served(
    tmp_path: Path, environment: str, harbor: HarborValidator
) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="opencode",
        script=SOLVE,
        env=KEY,
        model=MODEL,
        environment=environment,
    )
    rec = run.record
    assert rec["status"] == "scored" and rec["score"] == 1.0, run.describe()
    assert rec["agent_status"] == "completed"
    served = run.served_usage()
    usage = rec["usage"]
    assert usage["input_tokens"] == served.input_tokens == 180
    assert usage["output_tokens"] == served.output_tokens == 40
    assert usage["cache_read_tokens"] == served.cache_read_tokens == 1700
    assert usage["turns"] == len(run.served) == 2
    cost = (
        served.input_tokens * PRICE_IN
        + served.cache_read_tokens * PRICE_CACHED
        + served.output_tokens * PRICE_OUT
    )
    assert usage["cost_usd"] == pytest.approx(cost, rel=1e-9)
    assert rec["final_message"] == "Created hello.txt containing hello."
    auth = {r.headers.get("authorization") for r in run.requests if r.method == "POST"}
    assert auth == {"Bearer sk-mock-opencode"}
    # The trajectory: the scripted write with its arguments and output; tokens and cost per call.
    doc = check_trajectory(
        run, harbor, call=(SOLVE[0].name, SOLVE[0].arguments), output="Wrote file successfully."
    )
    costs = [s["metrics"]["cost_usd"] for s in doc["steps"] if "metrics" in s]
    assert sum(costs) == pytest.approx(usage["cost_usd"], rel=1e-9)
    assert doc["steps"][1]["message"] == "Writing the file."


def test_bad_key_is_an_auth_error(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="opencode", script=(), then=UNAUTHORIZED, env=KEY, model=MODEL
    )
    rec = run.record
    assert rec["agent_status"] == "auth_error", run.describe()
    assert "Incorrect API key" in rec["error"]


def test_rate_limit_is_retryable(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="opencode",
        script=(),
        then=RATE_LIMITED,
        env=KEY,
        model=MODEL,
        args=["--timeout", "60"],
    )
    rec = run.record
    assert rec["agent_status"] == "rate_limited", run.describe()
    assert rec["retryable"] is True


def test_timeout_keeps_the_usage_of_calls_served_before(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="opencode",
        script=(SOLVE[0], Hang()),
        env=KEY,
        model=MODEL,
        args=["--timeout", "30"],  # OpenCode takes 5-20 s to start under load
    )
    rec = run.record
    assert rec["agent_status"] == "timeout", run.describe()
    assert rec["usage"]["input_tokens"] == 120, run.describe()
    assert rec["usage"]["output_tokens"] == 15
    assert rec["usage"]["turns"] == 1


@pytest.mark.parametrize("rule", ["ask", "deny"])
def test_a_permission_that_refuses_every_tool_is_tools_refused(tmp_path: Path, rule: str) -> None:
    """ "ask" has nobody to answer in a run, "deny" offers no tool: either way no call ran,
    and the work would have scored 0."""
    run = ksi_run_with_mock(
        tmp_path,
        agent="opencode",
        env=KEY,
        model=MODEL,
        agent_options=[f'permission={{"*": "{rule}"}}'],
        script=[SOLVE[0], Answer("I could not write it.", MockUsage(60, 5))],
    )
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == (
        "agent_error",
        None,
        "tools_refused",
    ), run.describe()
    said = "rejected permission" if rule == "ask" else "unavailable tool"
    assert said in rec["error"] and "leave --agent-option permission unset" in rec["error"]
    assert run.proc.returncode == 3, run.describe()
