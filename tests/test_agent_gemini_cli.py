"""Contract test: KSI runs Gemini CLI headless with JSON output and reads its stats."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.harness import make, run_agent

from ksi.agents.gemini_cli import GeminiCliAgent
from ksi.errors import OptionsError
from ksi.interfaces import Usage


def test_success_invocation_and_usage(tmp_path: Path) -> None:
    run = run_agent(make(GeminiCliAgent), tmp_path, model="gemini-2.5-pro", prompt="Fix it")
    argv = run.record["argv"]
    assert argv[:4] == ["--output-format", "json", "--skip-trust", "--yolo"]
    assert argv[argv.index("--model") + 1] == "gemini-2.5-pro"
    assert run.record["prompt_arg"] == "Fix it"
    assert run.outcome.status == "completed"
    # Two models: prompt 24939+100 of which 21263 cached; output = candidates + thoughts.
    assert run.outcome.usage == Usage(3776, 184, 21263, 0, None, 4)
    assert run.outcome.final_message == "I updated repo/app.py; the tests pass now."


def test_long_prompt_is_piped(tmp_path: Path) -> None:
    prompt = "y" * 200_000
    run = run_agent(make(GeminiCliAgent), tmp_path, prompt=prompt)
    assert run.record["stdin"] == prompt
    assert len(run.record["prompt_arg"]) < 100
    assert run.outcome.status == "completed"


def test_approval_mode_option(tmp_path: Path) -> None:
    run = run_agent(make(GeminiCliAgent, approval_mode="auto_edit"), tmp_path)
    argv = run.record["argv"]
    assert argv[argv.index("--approval-mode") + 1] == "auto_edit"
    with pytest.raises(OptionsError, match="approval_mode"):
        make(GeminiCliAgent, approval_mode="always")


# A context overflow and the turn limit (exit 53) are shown by the real CLI
# (tests/test_real_cli_gemini_cli.py); these are what it cannot show quickly: exit 41 (no
# usable auth method, stopped by KSI's preflight first), the CLI giving up on a 429 after
# minutes of retries, a crash.
@pytest.mark.parametrize(
    ("scenario", "status", "error_part"),
    [
        ("auth", "auth_error", "exit code 41"),
        ("rate", "rate_limited", "429"),
        ("crash", "crashed", "fetch failed"),
    ],
)
def test_error_classes(tmp_path: Path, scenario: str, status: str, error_part: str) -> None:
    run = run_agent(make(GeminiCliAgent), tmp_path, scenario=scenario)
    assert run.outcome.status == status
    assert error_part in run.outcome.error
