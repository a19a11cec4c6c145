"""The real mini-SWE-agent (``mini``) through ``ksi run``, against the mock model.

mini talks to the mock's OpenAI Chat Completions endpoint through litellm
(``--model openai/mock-model``, ``base_url`` as litellm's ``api_base``) with
only ``OPENAI_API_KEY`` set. litellm has no price for the mock model: the
tests either give it one (``LITELLM_MODEL_REGISTRY_PATH``, so mini reports a
cost) or say ``cost_tracking=ignore_errors``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from atif_validator import HarborValidator
from mockmodel import RATE_LIMITED, UNAUTHORIZED, Hang, MockUsage, ToolCall
from real_agents import WRITE_AND_SHOW_HELLO, WRITE_HELLO, check_trajectory, ksi_run_with_mock

pytestmark = pytest.mark.real_cli

KEY = {"OPENAI_API_KEY": "sk-mock-mini"}
MODEL = "openai/mock-model"
#: USD per token the registry gives the mock model: input, cached input, output.
PRICE_IN, PRICE_CACHED, PRICE_OUT = 1e-6, 0.25e-6, 4e-6
SUBMIT = "printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\nCreated hello.txt containing hello.\\n'"
SOLVE = (
    ToolCall("bash", {"command": WRITE_HELLO}, MockUsage(120, 15, 800, 0), text="Writing it."),
    ToolCall("bash", {"command": SUBMIT}, MockUsage(60, 25, 900, 0), text="Submitting."),
)
IGNORE_COST = "cost_tracking=ignore_errors"


def _registry(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "prices.json"
    entry = {
        "litellm_provider": "openai",
        "mode": "chat",
        "input_cost_per_token": PRICE_IN,
        "cache_read_input_token_cost": PRICE_CACHED,
        "output_cost_per_token": PRICE_OUT,
        "max_input_tokens": 100_000,
        "max_output_tokens": 10_000,
    }
    path.write_text(json.dumps({MODEL: entry, "mock-model": entry}))
    return {"LITELLM_MODEL_REGISTRY_PATH": str(path)}


def test_solves_with_usage_cost_and_turns_as_served(
    tmp_path: Path, harbor: HarborValidator
) -> None:
    write = ToolCall(
        "bash", {"command": WRITE_AND_SHOW_HELLO}, MockUsage(120, 15, 800, 0), text="Writing it."
    )
    run = ksi_run_with_mock(
        tmp_path,
        agent="mini-swe-agent",
        script=(write, SOLVE[1]),
        env={**KEY, **_registry(tmp_path)},
        model=MODEL,
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
    cost = 180 * PRICE_IN + 1700 * PRICE_CACHED + 40 * PRICE_OUT
    assert usage["cost_usd"] == pytest.approx(cost, rel=1e-9)
    assert rec["final_message"].strip() == "Created hello.txt containing hello."
    auth = {r.headers.get("authorization") for r in run.requests if r.method == "POST"}
    assert auth == {"Bearer sk-mock-mini"}
    assert run.attempt_file("mini.traj.json").is_file()
    # The trajectory: the scripted bash call, its output and returncode, usage and cost per call.
    doc = check_trajectory(run, harbor, call=(write.name, write.arguments), output="hello")
    costs = [s["metrics"]["cost_usd"] for s in doc["steps"] if "metrics" in s]
    assert sum(costs) == pytest.approx(usage["cost_usd"], rel=1e-9)
    assert doc["steps"][-1] == {
        "step_id": 4,
        "source": "system",
        "message": "Submitted: Created hello.txt containing hello.\n",
    }


@pytest.mark.sandbox
def test_solves_in_the_sandbox(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="mini-swe-agent",
        script=SOLVE,
        env=KEY,
        model=MODEL,
        environment="sandbox",
        agent_options=[IGNORE_COST],
    )
    rec = run.record
    assert rec["status"] == "scored" and rec["score"] == 1.0, run.describe()
    assert rec["usage"]["input_tokens"] == 180 and rec["usage"]["turns"] == 2


def test_unpriced_model_is_a_crash_with_mini_s_own_advice(tmp_path: Path) -> None:
    # litellm has no price for the mock model and cost tracking is on (mini's default).
    run = ksi_run_with_mock(tmp_path, agent="mini-swe-agent", script=SOLVE, env=KEY, model=MODEL)
    rec = run.record
    assert rec["agent_status"] == "crashed", run.describe()  # not budget_exceeded
    assert rec["error"].startswith(
        "exit code 1: RuntimeError (with KSI: --agent-option cost_tracking=ignore_errors): "
        "Error calculating cost for model openai/mock-model"
    )
    assert "MSWEA_COST_TRACKING" in rec["error"]


def test_cost_limit_stops_the_run_as_budget_exceeded(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="mini-swe-agent",
        script=SOLVE,
        env={**KEY, **_registry(tmp_path)},
        model=MODEL,
        agent_options=["cost_limit=0.0001"],
    )
    rec = run.record
    assert rec["agent_status"] == "budget_exceeded", run.describe()
    assert "LimitsExceeded" in rec["error"]
    assert len(run.served) == 1 and rec["usage"]["turns"] == 1


def test_bad_key_is_an_auth_error(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="mini-swe-agent",
        script=(),
        then=UNAUTHORIZED,
        env=KEY,
        model=MODEL,
        agent_options=[IGNORE_COST],
    )
    rec = run.record
    assert rec["agent_status"] == "auth_error", run.describe()
    assert "exit code 1: AuthenticationError: " in rec["error"]
    assert "Incorrect API key" in rec["error"]


def test_rate_limit_is_retryable(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="mini-swe-agent",
        script=(),
        then=RATE_LIMITED,
        env={**KEY, "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1"},
        model=MODEL,
        agent_options=[IGNORE_COST],
        args=["--agent-env", "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT"],
    )
    rec = run.record
    assert rec["agent_status"] == "rate_limited", run.describe()
    assert "exit code 1: RateLimitError: " in rec["error"]
    assert rec["retryable"] is True


def test_timeout_keeps_the_usage_of_calls_served_before(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="mini-swe-agent",
        script=(SOLVE[0], Hang()),
        env=KEY,
        model=MODEL,
        agent_options=[IGNORE_COST],
        args=["--timeout", "30"],
    )
    rec = run.record
    assert rec["agent_status"] == "timeout", run.describe()
    assert rec["usage"]["input_tokens"] == 120 and rec["usage"]["output_tokens"] == 15
    assert rec["usage"]["turns"] == 1
