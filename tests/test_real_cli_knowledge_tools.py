"""The knowledge tools through real agent CLIs: ``ksi run --knowledge-tools on`` with
the real Claude Code and Gemini CLI against the mock model, whose scripted turn calls
``knowledge_search`` as the CLI names it; the tool result the CLI sends back to the
model holds the note an earlier run left in the shared store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mockmodel import Answer, MockUsage, ToolCall
from real_agents import WRITE_HELLO, MockRun, ksi_run_with_mock

from ksi.knowledge.db import KnowledgeDB
from ksi.knowledge.models import Knowledge, Note

pytestmark = [pytest.mark.real_cli, pytest.mark.filterwarnings("ignore")]
pytest.importorskip("mcp")

#: The note an earlier run left; about another task, so no KNOWLEDGE.md carries it.
NOTE_TEXT = "Quokkaflux: write files with printf, never echo -e"


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "shared.sqlite"
    with KnowledgeDB.open(path) as db:
        db.register_run("earlier", tmp_path / "earlier", "2025-01-01T00:00:00")
        db.put_generation(
            "earlier",
            Knowledge(1, "evidence", (Note("g1-001", "insight", NOTE_TEXT, "other-task"),)),
            task_hashes={"other-task": "h-other"},
        )
    return path


def _bodies(run: MockRun) -> list[str]:
    return [json.dumps(r.body) for r in run.served_requests()]


def _check(run: MockRun, tool: str, calls_at: int = 0) -> None:
    """``tool`` was offered in the request whose answer calls it (``calls_at``), the note
    was not in any request before the call, and a later request carries the result."""
    assert run.proc.returncode == 0, run.describe()
    bodies = _bodies(run)
    offered = bodies[calls_at]
    assert tool in offered, f"the CLI did not offer {tool} to the model: {offered[:3000]}"
    assert not any("Quokkaflux" in b for b in bodies[: calls_at + 1]), "the note came early"
    answered = [b for b in bodies[calls_at + 1 :] if "Quokkaflux" in b]
    assert answered, f"no tool result held the note: {run.describe()}"
    assert "never echo -e" in answered[0]
    assert run.record["score"] == 1.0, run.describe()


CLAUDE_SCRIPT = [
    ToolCall("mcp__ksi__knowledge_search", {"query": "quokkaflux printf"}, MockUsage(300, 20)),
    ToolCall("Bash", {"command": WRITE_HELLO, "description": "Create hello.txt"}),
    Answer("Done: hello.txt written, as the note said."),
]


@pytest.mark.parametrize(
    "environment",
    [
        "local",
        pytest.param(
            "sandbox",
            marks=[
                pytest.mark.sandbox,
                pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
            ],
        ),
    ],
)
def test_claude_code_calls_knowledge_search_and_gets_the_note(
    tmp_path: Path, environment: str
) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="claude-code",
        env={"ANTHROPIC_API_KEY": "sk-ant-mock-key"},
        model="claude-sonnet-4-5",
        environment=environment,
        script=CLAUDE_SCRIPT,
        args=["--knowledge-tools", "on", "--knowledge-db", str(_store(tmp_path))],
    )
    _check(run, "mcp__ksi__knowledge_search")


def test_gemini_cli_calls_knowledge_search_and_gets_the_note(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="gemini-cli",
        env={"GEMINI_API_KEY": "mock-gemini-key"},
        model="gemini-2.5-pro",
        script=[
            # Gemini CLI names an MCP server's tools mcp_<server>_<tool>, and discovers them
            # before its first model call.
            ToolCall(
                "mcp_ksi_knowledge_search", {"query": "quokkaflux printf"}, MockUsage(300, 20)
            ),
            ToolCall("run_shell_command", {"command": WRITE_HELLO}),
            Answer("Done: hello.txt written, as the note said."),
        ],
        args=["--knowledge-tools", "on", "--knowledge-db", str(_store(tmp_path))],
    )
    _check(run, '"name": "mcp_ksi_knowledge_search"')
