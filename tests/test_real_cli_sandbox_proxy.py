"""Which real agent CLIs reach a *named* host from the sandbox, through its HTTP proxy.

In the sandbox (``network=endpoints``, the default) an endpoint on a loopback
address (``http://127.0.0.1:PORT``) is served on the same address inside; a
named host (a provider's ``api.anthropic.com:443``, and ``localhost`` too: a
name) is reachable only through the sandbox's proxy (``HTTPS_PROXY`` /
``HTTP_PROXY``), since there is no DNS inside. Here each CLI is given
``base_url=http://localhost:PORT``: it solves the task only if it sends its
model calls through the proxy. Everything stays on 127.0.0.1 (the run is in
a loopback-only network namespace). The outcome per CLI is in docs/agents.md.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest
from mockmodel import Answer, MockUsage, Step, ToolCall
from real_agents import WRITE_HELLO, free_port, ksi_run_with_mock

pytestmark = [
    pytest.mark.real_cli,
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]


@attrs.frozen
class Case:
    agent: str
    key: dict[str, str]
    model: str
    script: Sequence[Step]
    options: Sequence[str] = ()


def _answer(text: str) -> Answer:
    return Answer(text, MockUsage(60, 25, 0, 0))


CASES = [
    Case(
        "claude-code",
        {"ANTHROPIC_API_KEY": "sk-ant-mock"},
        "claude-sonnet-4-5",
        (
            ToolCall("Bash", {"command": WRITE_HELLO, "description": "hello"}, MockUsage(9, 1)),
            _answer("Done."),
        ),
    ),
    Case(
        "codex",
        {"CODEX_API_KEY": "sk-mock-codex"},
        "mock-model",
        (ToolCall("exec_command", {"cmd": WRITE_HELLO}, MockUsage(9, 1)), _answer("Done.")),
    ),
    Case(
        "gemini-cli",
        {"GEMINI_API_KEY": "gm-mock"},
        "gemini-2.5-pro",
        (
            ToolCall("run_shell_command", {"command": WRITE_HELLO}, MockUsage(9, 1)),
            _answer("Done."),
        ),
    ),
    Case(
        "opencode",
        {"OPENAI_API_KEY": "sk-mock-opencode"},
        "openai/gpt-4.1",
        (
            ToolCall(
                "write", {"filePath": "repo/hello.txt", "content": "hello\n"}, MockUsage(9, 1)
            ),
            _answer("Done."),
        ),
    ),
    Case(
        "mini-swe-agent",
        {"OPENAI_API_KEY": "sk-mock-mini"},
        "openai/mock-model",
        (
            ToolCall("bash", {"command": WRITE_HELLO}, MockUsage(9, 1), text="Writing."),
            ToolCall(
                "bash",
                {"command": "printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\nDone.\\n'"},
                MockUsage(9, 1),
                text="Submitting.",
            ),
        ),
        ("cost_tracking=ignore_errors",),
    ),
    Case(
        "aider",
        {"OPENAI_API_KEY": "sk-mock-aider"},
        "openai/mock-model",
        (_answer("I will create the file.\n\nrepo/hello.txt\n```\nhello\n```\n"),),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.agent)
def test_a_named_endpoint_is_reached_through_the_sandbox_proxy(tmp_path: Path, case: Case) -> None:
    port = free_port()
    run = ksi_run_with_mock(
        tmp_path,
        agent=case.agent,
        script=case.script,
        env=case.key,
        model=case.model,
        environment="sandbox",
        port=port,
        agent_options=[f"base_url=http://localhost:{port}", *case.options],
    )
    rec = run.record
    assert (rec["status"], rec["score"]) == ("scored", 1.0), run.describe()
    assert len(run.served) == len(case.script)
