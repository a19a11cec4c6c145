"""Contract test: KSI runs `mini` in yolo mode and reads its trajectory file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.harness import make, run_agent

from ksi.agents.mini_swe_agent import MiniSweAgent
from ksi.errors import OptionsError
from ksi.interfaces import Usage


def test_success_invocation_usage_and_trajectory(tmp_path: Path) -> None:
    agent = make(MiniSweAgent, cost_limit="2.5", cost_tracking="ignore_errors")
    run = run_agent(agent, tmp_path, model="anthropic/claude-sonnet-4-5", prompt="Fix it")
    argv = run.record["argv"]
    assert argv[:2] == ["-t", "Fix it"]
    assert "--yolo" in argv and "--exit-immediately" in argv
    traj = tmp_path / "ws" / ".ksi" / "mini.traj.json"
    assert argv[argv.index("-o") + 1] == str(traj)
    assert argv[argv.index("--model") + 1] == "anthropic/claude-sonnet-4-5"
    assert argv[argv.index("--cost-limit") + 1] == "2.5"
    assert run.record["env"]["MSWEA_COST_TRACKING"] == "ignore_errors"
    assert run.outcome.status == "completed"
    # prompt_tokens 1500 + 1700 with 1400 cached.
    assert run.outcome.usage == Usage(1800, 100, 1400, 0, 0.0123, 2)
    kept = run.ctx.attempt_dir / "mini.traj.json"
    assert json.loads(kept.read_text())["info"]["exit_status"] == "Submitted"


def test_overrides_follow_the_default_config(tmp_path: Path) -> None:
    # Any -c drops mini's default config, so KSI names it before its key=value overrides.
    agent = make(MiniSweAgent, step_limit="3", base_url="http://127.0.0.1:4000/v1")
    argv = run_agent(agent, tmp_path, model="openai/m").record["argv"]
    configs = [argv[i + 1] for i, a in enumerate(argv) if a == "--config"]
    assert configs == [
        "mini.yaml",
        "model.model_kwargs.api_base=http://127.0.0.1:4000/v1",
        "agent.step_limit=3",
    ]
    argv = run_agent(make(MiniSweAgent, config="my.yaml", step_limit="3"), tmp_path).record["argv"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--config"] == [
        "my.yaml",
        "agent.step_limit=3",
    ]
    assert "--config" not in run_agent(make(MiniSweAgent), tmp_path).record["argv"]


def test_long_task_points_to_the_prompt_file(tmp_path: Path) -> None:
    run = run_agent(make(MiniSweAgent), tmp_path, prompt="w" * 200_000, model="m")
    assert str(tmp_path / "ws" / ".ksi" / "prompt.md") in run.record["task"]
    assert len(run.record["task"]) < 1000


def test_cost_limit_must_not_be_negative() -> None:
    with pytest.raises(OptionsError, match="cost_limit"):
        make(MiniSweAgent, cost_limit="-1")


@pytest.mark.parametrize(
    ("scenario", "status", "error_part"),
    [
        ("limits", "budget_exceeded", "limit exceeded"),
        ("auth", "auth_error", "AuthenticationError"),
        ("rate", "rate_limited", "RateLimitError"),
        ("context", "context_exceeded", "ContextWindowExceededError"),
        ("crash", "crashed", "RuntimeError"),
    ],
)
def test_error_classes(tmp_path: Path, scenario: str, status: str, error_part: str) -> None:
    run = run_agent(make(MiniSweAgent), tmp_path, scenario=scenario, model="m")
    assert run.outcome.status == status
    assert error_part in run.outcome.error
