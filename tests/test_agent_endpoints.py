"""Each CLI agent declares where its model calls go: what the sandbox lets it reach."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.harness import make

from ksi.agents.aider import AiderAgent
from ksi.agents.builtin import CommandAgent
from ksi.agents.claude_code import ClaudeCodeAgent
from ksi.agents.codex import CodexAgent
from ksi.agents.gemini_cli import GeminiCliAgent
from ksi.agents.mini_swe_agent import MiniSweAgent
from ksi.agents.opencode import OpenCodeAgent
from ksi.errors import OptionsError
from ksi.interfaces import AgentContext, Endpoint
from ksi.models import TaskSpec


def _ctx(tmp_path: Path, model: str | None) -> AgentContext:
    return AgentContext(
        task=TaskSpec(id="t"),
        prompt="p",
        attempt=1,
        attempt_dir=tmp_path,
        workspace_path=str(tmp_path),
        repo_path=str(tmp_path / "repo"),
        host_workspace=tmp_path,
        model=model,
    )


@pytest.mark.parametrize(
    ("cls", "model", "expected"),
    [
        (ClaudeCodeAgent, None, Endpoint("api.anthropic.com", 443)),
        (CodexAgent, "gpt-5-codex", Endpoint("api.openai.com", 443)),
        (GeminiCliAgent, None, Endpoint("generativelanguage.googleapis.com", 443)),
        (OpenCodeAgent, "anthropic/claude-sonnet-4-5", Endpoint("api.anthropic.com", 443)),
        (MiniSweAgent, "gemini/gemini-2.5-pro", Endpoint("generativelanguage.googleapis.com", 443)),
        (AiderAgent, "gpt-4.1", Endpoint("api.openai.com", 443)),
    ],
)
def test_without_base_url_the_provider_api(
    tmp_path: Path, cls: type, model: str | None, expected: Endpoint
) -> None:
    invocation = make(cls).invocation(_ctx(tmp_path, model))
    assert invocation.endpoints == (expected,)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:4000", Endpoint("127.0.0.1", 4000)),
        ("https://gateway.example.com/v1", Endpoint("gateway.example.com", 443)),
        ("http://[::1]:8080/api", Endpoint("::1", 8080)),
    ],
)
def test_base_url_is_the_only_endpoint(tmp_path: Path, url: str, expected: Endpoint) -> None:
    for cls in (ClaudeCodeAgent, CodexAgent, GeminiCliAgent, OpenCodeAgent, MiniSweAgent):
        invocation = make(cls, base_url=url).invocation(_ctx(tmp_path, "openai/gpt-4.1"))
        assert invocation.endpoints == (expected,), cls


def test_an_unknown_provider_declares_nothing(tmp_path: Path) -> None:
    assert make(AiderAgent).invocation(_ctx(tmp_path, "local/my-model")).endpoints == ()


def test_the_command_agent_declares_what_it_is_told(tmp_path: Path) -> None:
    agent = make(CommandAgent, cmd="true", endpoints="127.0.0.1:4000, https://api.example.com")
    assert agent.invocation(_ctx(tmp_path, None)).endpoints == (
        Endpoint("127.0.0.1", 4000),
        Endpoint("api.example.com", 443),
    )
    assert make(CommandAgent, cmd="true").invocation(_ctx(tmp_path, None)).endpoints == ()
    with pytest.raises(OptionsError, match=r"endpoints: 'nope' is not HOST:PORT"):
        make(CommandAgent, cmd="true", endpoints="nope")
