"""Contract test: KSI runs `codex exec --json` as documented and reads its JSONL events."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.harness import make, run_agent

from ksi.agents.codex import CodexAgent
from ksi.errors import OptionsError
from ksi.interfaces import Usage


def test_success_invocation_and_usage(tmp_path: Path) -> None:
    agent = make(CodexAgent, reasoning_effort="high", extra_args="--color never")
    run = run_agent(agent, tmp_path, model="gpt-5-codex", prompt="Fix repo/app.py")
    argv = run.record["argv"]
    assert argv[:3] == ["exec", "--json", "--skip-git-repo-check"]
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"  # --full-auto is gone
    assert argv[argv.index("--model") + 1] == "gpt-5-codex"
    assert argv[argv.index("-c") + 1] == "model_reasoning_effort=high"
    assert argv[-3:] == ["--color", "never", "-"]  # extra flags, then "-": prompt from stdin
    assert run.record["stdin"] == "Fix repo/app.py"
    assert run.outcome.status == "completed"
    # input_tokens counts cached ones too; KSI reports the uncached part.
    assert run.outcome.usage == Usage(315, 122, 24448, 0, None, 1)
    assert run.outcome.final_message == "Fixed the bug in repo/app.py."


def test_sandbox_auto_nests_no_sandbox_inside_an_isolating_environment(tmp_path: Path) -> None:
    # Codex's own bubblewrap cannot run inside KSI's sandbox (every command fails silently).
    inside = run_agent(make(CodexAgent), tmp_path / "in", isolated=True).record["argv"]
    assert "--dangerously-bypass-approvals-and-sandbox" in inside and "--sandbox" not in inside
    local = run_agent(make(CodexAgent, sandbox="auto"), tmp_path / "out").record["argv"]
    assert local[local.index("--sandbox") + 1] == "workspace-write"
    kept = run_agent(make(CodexAgent, sandbox="read-only"), tmp_path / "ro", isolated=True)
    assert kept.record["argv"][kept.record["argv"].index("--sandbox") + 1] == "read-only"


def test_sandbox_option_maps_to_flags(tmp_path: Path) -> None:
    run = run_agent(make(CodexAgent, sandbox="danger-full-access"), tmp_path)
    assert "--dangerously-bypass-approvals-and-sandbox" in run.record["argv"]
    assert "--sandbox" not in run.record["argv"]
    with pytest.raises(OptionsError, match="sandbox"):
        make(CodexAgent, sandbox="off")
    with pytest.raises(OptionsError, match="valid options: reasoning_effort, sandbox"):
        make(CodexAgent, effort="high")


@pytest.mark.parametrize(
    ("scenario", "status", "error_part"),
    [
        ("auth", "auth_error", "401"),
        ("rate", "rate_limited", "429"),
        ("context", "context_exceeded", "context window"),
        ("budget", "budget_exceeded", "usage limit"),
        ("crash", "crashed", "panicked"),
    ],
)
def test_error_classes(tmp_path: Path, scenario: str, status: str, error_part: str) -> None:
    run = run_agent(make(CodexAgent), tmp_path, scenario=scenario)
    assert run.outcome.status == status
    assert error_part in run.outcome.error


def test_credentials_one_of_or_login_file(tmp_path: Path) -> None:
    agent = make(CodexAgent)
    assert agent.missing_credentials({"CODEX_API_KEY": "k"}, home=tmp_path) == []
    [problem] = agent.missing_credentials({}, home=tmp_path)
    assert "set CODEX_API_KEY" in problem and "codex login" in problem
    assert "ignores OPENAI_API_KEY" in problem
    assert agent.missing_credentials({"OPENAI_API_KEY": "k"}, home=tmp_path) != []
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "auth.json").write_text("{}")
    assert agent.missing_credentials({}, home=tmp_path) == []
