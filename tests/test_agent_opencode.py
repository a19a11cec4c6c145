"""Contract test: KSI runs `opencode run --format json` and reads its step events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.harness import make, run_agent

from ksi.agents.opencode import OpenCodeAgent
from ksi.errors import OptionsError
from ksi.interfaces import Usage


def test_success_invocation_and_usage(tmp_path: Path) -> None:
    agent = make(OpenCodeAgent, agent="build", variant="high", extra_args="--print-logs")
    run = run_agent(agent, tmp_path, model="anthropic/claude-sonnet-4-5", prompt="Fix it")
    argv = run.record["argv"]
    assert argv[:3] == ["run", "--format", "json"]
    assert argv[argv.index("--model") + 1] == "anthropic/claude-sonnet-4-5"
    assert argv[argv.index("--agent") + 1] == "build"
    assert argv[argv.index("--variant") + 1] == "high"
    assert argv[-2:] == ["--print-logs", "Fix it"]  # the message stays the last argument
    assert json.loads(run.record["env"]["OPENCODE_PERMISSION"])["edit"] == "allow"
    assert run.outcome.status == "completed"
    assert run.outcome.usage == Usage(1300, 290, 7200, 400, pytest.approx(0.0155), 2)
    assert run.outcome.final_message == "Fixed repo/app.py."


def test_long_or_dash_prompts(tmp_path: Path) -> None:
    long_prompt = "z" * 150_000
    run = run_agent(make(OpenCodeAgent), tmp_path, prompt=long_prompt)
    assert run.record["stdin"] == long_prompt and run.record["message"] == long_prompt
    run = run_agent(make(OpenCodeAgent), tmp_path, prompt="- fix the list")
    assert run.record["message"] == "- fix the list"


def test_permission_must_be_json() -> None:
    with pytest.raises(OptionsError, match="permission must be JSON"):
        make(OpenCodeAgent, permission="allow")


@pytest.mark.parametrize(
    ("scenario", "status", "error_part"),
    [
        ("auth", "auth_error", "ProviderAuthError"),
        ("rate", "rate_limited", "status 429"),
        ("context", "context_exceeded", "prompt is too long"),
        ("budget", "budget_exceeded", "credit balance"),
        ("crash", "crashed", "exit code 139"),
    ],
)
def test_error_classes(tmp_path: Path, scenario: str, status: str, error_part: str) -> None:
    run = run_agent(make(OpenCodeAgent), tmp_path, scenario=scenario)
    assert run.outcome.status == status
    assert error_part in run.outcome.error
