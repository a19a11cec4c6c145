"""Contract test: KSI scripts Aider (--message-file, --yes-always) and reads its token lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.harness import make, run_agent

from ksi.agents.aider import AiderAgent
from ksi.interfaces import Usage


def test_success_invocation_and_usage(tmp_path: Path) -> None:
    agent = make(AiderAgent, edit_format="diff", reasoning_effort="high")
    run = run_agent(agent, tmp_path, model="anthropic/claude-sonnet-4-5", prompt="Add a greeting")
    argv = run.record["argv"]
    assert argv[argv.index("--message-file") + 1] == str(tmp_path / "ws" / ".ksi" / "prompt.md")
    assert run.record["message"] == "Add a greeting"
    for flag in ("--yes-always", "--no-pretty", "--no-stream", "--no-auto-commits", "--no-git"):
        assert flag in argv
    assert argv[argv.index("--model") + 1] == "anthropic/claude-sonnet-4-5"
    assert argv[argv.index("--edit-format") + 1] == "diff"
    assert argv[argv.index("--reasoning-effort") + 1] == "high"
    assert run.outcome.status == "completed"
    # 6.7k sent = 1.3k uncached + 1.2k hit + 2.1k write, the write counted twice; + 5.1k.
    assert run.outcome.usage == Usage(6400, 400, 1200, 2100, 0.03, 2)
    assert run.outcome.final_message == (
        "The greeting is in place; run python repo/hello.py to see it."
    )


def test_git_option_drops_no_git(tmp_path: Path) -> None:
    run = run_agent(make(AiderAgent, git="true", auto_commits="yes"), tmp_path)
    assert "--no-git" not in run.record["argv"]
    assert "--auto-commits" in run.record["argv"]


def test_a_retried_error_does_not_fail_the_attempt(tmp_path: Path) -> None:
    run = run_agent(make(AiderAgent), tmp_path, scenario="retry_then_success")
    assert run.outcome.status == "completed"
    assert run.outcome.final_message == "Done."


@pytest.mark.parametrize(
    ("scenario", "status", "error_part"),
    [
        ("auth", "auth_error", "AuthenticationError"),
        ("rate", "rate_limited", "rate limited"),
        ("context", "context_exceeded", "token limit"),
        ("budget", "budget_exceeded", "exceeded your current quota"),
        ("crash", "crashed", "KeyError"),
    ],
)
def test_error_classes_even_with_exit_code_0(
    tmp_path: Path, scenario: str, status: str, error_part: str
) -> None:
    run = run_agent(make(AiderAgent), tmp_path, scenario=scenario)
    assert run.outcome.status == status
    assert error_part in run.outcome.error
