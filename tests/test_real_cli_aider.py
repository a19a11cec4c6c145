"""The real Aider through ``ksi run``, against the mock model (Chat Completions, JSON).

Aider edits files from the model's text (the "whole" edit format for an
unknown model), so the mock's answer holds the file; only ``OPENAI_API_KEY``
and ``--agent-option base_url=...`` (``--openai-api-base``) are given. With a
price for the mock model (``--model-metadata-file``) Aider reports a cost.
A rate limit is left to the fake CLI (``test_agent_aider.py``): Aider retries
a 429 for about a minute before it gives up.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from atif_validator import HarborValidator
from mockmodel import UNAUTHORIZED, Answer, Hang, MockUsage
from real_agents import check_trajectory, ksi_run_with_mock

pytestmark = pytest.mark.real_cli

KEY = {"OPENAI_API_KEY": "sk-mock-aider"}
MODEL = "openai/mock-model"
REPLY = "I will create the file.\n\nrepo/hello.txt\n```\nhello\n```\n"
#: Hits and writes the cache in one call: Aider then prints Cost on its own line.
SOLVE = (Answer(REPLY, MockUsage(120, 15, 800, 40)),)
#: USD per token in the metadata file: input, cache read, cache write, output.
PRICES = {
    "input_cost_per_token": 1e-6,
    "cache_read_input_token_cost": 0.25e-6,
    "cache_creation_input_token_cost": 1.25e-6,
    "output_cost_per_token": 4e-6,
}


def _metadata(tmp_path: Path) -> str:
    path = tmp_path / "models.json"
    entry = {"litellm_provider": "openai", "mode": "chat", "max_input_tokens": 100_000}
    path.write_text(json.dumps({MODEL: {**entry, **PRICES}}))
    return f"extra_args=--model-metadata-file {path}"


def test_solves_with_usage_cost_and_turns_as_served(
    tmp_path: Path, harbor: HarborValidator
) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="aider",
        script=SOLVE,
        env=KEY,
        model=MODEL,
        agent_options=[_metadata(tmp_path)],
    )
    rec = run.record
    assert rec["status"] == "scored" and rec["score"] == 1.0, run.describe()
    assert rec["agent_status"] == "completed"
    usage = rec["usage"]
    assert usage["input_tokens"] == run.served_usage().input_tokens == 120  # the write once
    assert usage["output_tokens"] == 15
    assert usage["cache_read_tokens"] == 800 and usage["cache_write_tokens"] == 40
    assert usage["turns"] == len(run.served) == 1
    # The cost is Aider's (litellm's pricing of the call), printed on its own line.
    printed = run.attempt_file("agent.stdout.log").read_text()
    [cost_line] = re.findall(r"^Cost: \$[\d.]+ message, \$([\d.]+) session\.$", printed, re.M)
    assert usage["cost_usd"] == float(cost_line) > 0
    assert rec["final_message"] == "I will create the file.\nrepo/hello.txt\n```\nhello\n```"
    auth = {r.headers.get("authorization") for r in run.requests if r.method == "POST"}
    assert auth == {"Bearer sk-mock-aider"}
    # The trajectory (Aider's chat history): the reply, the edit it applied, the usage; no
    # tool calls, which the notes say rather than inventing them.
    doc = check_trajectory(run, harbor, call=None, output="Applied edit to repo/hello.txt")
    [reply] = [s for s in doc["steps"] if s["source"] == "agent"]
    assert reply["message"] == REPLY.strip() and "tool_calls" not in reply
    assert reply["metrics"]["cost_usd"] == usage["cost_usd"]
    assert "Aider has no tool calls" in doc["notes"]
    assert run.attempt_file("aider.chat.history.md").is_file()


@pytest.mark.sandbox
def test_solves_in_the_sandbox(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="aider",
        script=SOLVE,
        env=KEY,
        model=MODEL,
        environment="sandbox",
    )
    rec = run.record
    assert rec["status"] == "scored" and rec["score"] == 1.0, run.describe()
    assert rec["usage"]["input_tokens"] == 120 and rec["usage"]["turns"] == 1


def test_bad_key_is_an_auth_error(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="aider", script=(), then=UNAUTHORIZED, env=KEY, model=MODEL
    )
    rec = run.record
    assert rec["agent_status"] == "auth_error", run.describe()
    assert "AuthenticationError" in rec["error"]


def test_timeout(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="aider", script=(Hang(),), env=KEY, model=MODEL, args=["--timeout", "20"]
    )
    rec = run.record
    assert rec["agent_status"] == "timeout", run.describe()
    assert len(run.served) == 1
