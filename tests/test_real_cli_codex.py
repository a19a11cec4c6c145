"""The real Codex CLI through ``ksi run``, against the mock model (Responses API over SSE).

Only ``CODEX_API_KEY`` and ``--agent-option base_url=...`` are given, as a user
would; the mock serves a tool call that writes the file, then the final
answer, with known usage per call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from atif_validator import HarborValidator
from mockmodel import RATE_LIMITED, UNAUTHORIZED, Answer, Hang, MockUsage, ToolCall
from real_agents import WRITE_AND_SHOW_HELLO, check_trajectory, ksi_run_with_mock

pytestmark = pytest.mark.real_cli

KEY = {"CODEX_API_KEY": "sk-mock-codex"}
SOLVE = (
    ToolCall("exec_command", {"cmd": WRITE_AND_SHOW_HELLO}, MockUsage(120, 15, 800, 40)),
    Answer("Created hello.txt containing hello.", MockUsage(60, 25, 900, 0)),
)


@pytest.mark.parametrize("environment", ["local", "sandbox"])
def test_solves_with_usage_and_turns_as_served(
    tmp_path: Path, environment: str, harbor: HarborValidator
) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="codex",
        script=SOLVE,
        env=KEY,
        model="mock-model",
        environment=environment,
    )
    rec = run.record
    assert rec["status"] == "scored" and rec["score"] == 1.0, run.describe()
    assert rec["agent_status"] == "completed"
    served = run.served_usage()
    usage = rec["usage"]
    assert usage["input_tokens"] == served.input_tokens == 180
    assert usage["output_tokens"] == served.output_tokens
    assert usage["cache_read_tokens"] == served.cache_read_tokens
    assert usage["cache_write_tokens"] == served.cache_write_tokens == 40
    assert usage["turns"] == len(run.served) == 2  # one per model call, not one per exec turn
    assert usage["cost_usd"] is None  # codex reports no cost
    assert rec["final_message"] == "Created hello.txt containing hello."
    model_calls = [r for r in run.requests if r.path.endswith("/responses")]
    assert {r.headers.get("authorization") for r in model_calls} == {"Bearer sk-mock-codex"}
    assert all(r.method == "POST" for r in run.requests), "no WebSocket attempts at a base_url"
    assert (run.attempt_file("codex.rollout.jsonl")).is_file()
    # The trajectory (from the session log): the scripted call, its output and exit code.
    doc = check_trajectory(run, harbor, call=(SOLVE[0].name, SOLVE[0].arguments), output="hello")
    [result] = [s["observation"]["results"][0] for s in doc["steps"] if "observation" in s]
    assert result["extra"]["exit_code"] == 0


def test_openai_api_key_alone_is_refused_before_any_attempt(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="codex", script=SOLVE, env={"OPENAI_API_KEY": "sk-x"}, model="mock-model"
    )
    assert run.proc.returncode == 2, run.describe()
    assert "CODEX_API_KEY" in run.proc.stderr and "ignores OPENAI_API_KEY" in run.proc.stderr
    assert run.served == ()


def test_bad_key_is_an_auth_error(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="codex", script=(), then=UNAUTHORIZED, env=KEY, model="mock-model"
    )
    rec = run.record
    assert rec["agent_status"] == "auth_error", run.describe()
    assert "401" in rec["error"] and "Incorrect API key" in rec["error"]


def test_rate_limit_is_retryable(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="codex", script=(), then=RATE_LIMITED, env=KEY, model="mock-model"
    )
    rec = run.record
    assert rec["agent_status"] == "rate_limited", run.describe()
    assert "429" in rec["error"]
    assert rec["retryable"] is True


def test_timeout_keeps_the_usage_of_calls_served_before(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="codex",
        script=(SOLVE[0], Hang()),
        env=KEY,
        model="mock-model",
        args=["--timeout", "8"],
    )
    rec = run.record
    assert rec["agent_status"] == "timeout", run.describe()
    assert rec["usage"]["input_tokens"] == 120 and rec["usage"]["output_tokens"] == 15
    assert rec["usage"]["turns"] == 1
