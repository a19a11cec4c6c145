"""Contract test: KSI runs Claude Code the way its headless docs say and reads its stream-json."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.harness import make, run_agent

from ksi.agents.claude_code import ClaudeCodeAgent
from ksi.errors import OptionsError
from ksi.interfaces import Usage


def test_success_invocation_usage_cost_and_final_message(tmp_path: Path) -> None:
    agent = make(ClaudeCodeAgent, max_turns="7", append_system_prompt="Be brief.")
    run = run_agent(agent, tmp_path, model="claude-opus-4-1", prompt="Fix the bug in repo/app.py")
    argv = run.record["argv"]
    assert argv[:2] == ["-p", "--output-format"]
    assert "stream-json" in argv and "--verbose" in argv
    assert argv[argv.index("--permission-mode") + 1] == "bypassPermissions"
    assert argv[argv.index("--model") + 1] == "claude-opus-4-1"
    assert argv[argv.index("--max-turns") + 1] == "7"
    assert argv[argv.index("--append-system-prompt") + 1] == "Be brief."
    # The prompt travels on stdin, never as an argument.
    assert run.record["stdin"] == "Fix the bug in repo/app.py"
    assert "Fix the bug" not in " ".join(argv)
    assert run.record["cwd"] == str(tmp_path / "ws")
    assert run.outcome.status == "completed"
    assert run.outcome.usage == Usage(1203, 456, 31000, 7000, 0.0421, 4)
    assert run.outcome.final_message == "Done: hello.py now prints hi."
    assert run.outcome.error == ""
    # The raw trajectory is the stdout log kept in the attempt directory.
    assert '"type": "result"' in (run.ctx.attempt_dir / "agent.stdout.log").read_text()


def test_long_prompt_goes_through_stdin(tmp_path: Path) -> None:
    prompt = "x" * 300_000
    run = run_agent(make(ClaudeCodeAgent), tmp_path, prompt=prompt)
    assert run.record["stdin"] == prompt
    assert run.outcome.status == "completed"


# The real CLI shows auth, rate limit, overload, context, credit and turn limit errors
# (tests/test_real_cli_claude_code.py); a crash of the CLI itself only a fake can.
@pytest.mark.parametrize(
    ("scenario", "status", "error_part"),
    [
        ("crash", "crashed", "TypeError"),
    ],
)
def test_error_classes(tmp_path: Path, scenario: str, status: str, error_part: str) -> None:
    run = run_agent(make(ClaudeCodeAgent), tmp_path, scenario=scenario)
    assert run.outcome.status == status
    assert error_part in run.outcome.error
    assert "exit code 1" in run.outcome.error


def test_timeout_keeps_partial_usage(tmp_path: Path) -> None:
    run = run_agent(make(ClaudeCodeAgent), tmp_path, scenario="hang", timeout=1)
    assert run.outcome.status == "timeout"
    assert run.outcome.usage.input_tokens == 500
    assert run.outcome.usage.cache_read_tokens == 100
    assert run.outcome.usage.cost_usd is None


def test_missing_binary_is_a_crash_with_install_command(tmp_path: Path) -> None:
    agent = make(ClaudeCodeAgent, extra_args="--debug")
    run = run_agent(agent, tmp_path, host_env={"PATH": str(tmp_path / "empty")})
    assert run.outcome.status == "crashed"
    assert "npm install -g @anthropic-ai/claude-code" in run.outcome.error


def test_options_are_validated() -> None:
    with pytest.raises(OptionsError, match="valid options: max_turns, permission_mode"):
        make(ClaudeCodeAgent, turns="3")
    with pytest.raises(OptionsError, match="permission_mode"):
        make(ClaudeCodeAgent, permission_mode="yes")
    with pytest.raises(OptionsError, match="max_turns"):
        make(ClaudeCodeAgent, max_turns="0")


def test_missing_credentials_names_every_way_to_authenticate(tmp_path: Path) -> None:
    agent = make(ClaudeCodeAgent)
    problems = agent.missing_credentials({"HOME": str(tmp_path)})
    assert len(problems) == 1
    assert "ANTHROPIC_API_KEY" in problems[0] and "CLAUDE_CODE_OAUTH_TOKEN" in problems[0]
    assert agent.missing_credentials({"ANTHROPIC_API_KEY": "k"}, home=tmp_path) == []
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / ".credentials.json").write_text("{}")
    assert agent.missing_credentials({}, home=tmp_path) == []
