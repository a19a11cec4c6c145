"""The ``agent`` distiller with the real Claude Code CLI, against the mock Anthropic API.

``ksi run --generations 2 --distiller agent --distiller-option agent=claude-code``
in a loopback-only network namespace (see ``tests/real_agents.py``). The task
agent is a ``command`` agent (cheap, deterministic): it writes the port the
test wants only when ``KNOWLEDGE.md`` says it, and the eval output never does,
so only a note Claude Code wrote can make generation 2 solve. The mock scripts
Claude Code: a Bash tool call writing ``repo/notes.json``, then a final answer.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from mockmodel import Answer, MockUsage, ToolCall
from real_agents import MockRun, ksi_run_with_mock

pytestmark = pytest.mark.real_cli

KEY = {"ANTHROPIC_API_KEY": "sk-ant-mock-key"}
MODEL = "claude-sonnet-4-5"
MARKER = "MOCK-NOTE: the gateway listens on port 8443"
#: The test wants 8443; the eval says nothing, so the evidence notes cannot tell.
PORT_TASK = {
    "task_id": "port",
    "prompt": "Write the gateway's port number to port.txt.",
    "files": {"README.md": "The gateway.\n"},
    "eval": {"command": 'test "$(cat port.txt)" = 8443', "timeout_sec": 30},
}
TASK_AGENT = (
    f"if grep -q {shlex.quote(MARKER)} KNOWLEDGE.md 2>/dev/null; "
    "then echo 8443 > repo/port.txt; else echo 80 > repo/port.txt; fi"
)
REAL = "attempts/port/1"
BOGUS = "attempts/port/99"


def write_notes(content: str, usage: MockUsage) -> ToolCall:
    """Claude Code's Bash tool writing ``content`` to repo/notes.json (cwd: the workspace)."""
    command = f"cat > repo/notes.json <<'EOF'\n{content}\nEOF"
    return ToolCall("Bash", {"command": command, "description": "Write the notes"}, usage)


def run_distilled(tmp_path: Path, script: list[Any]) -> MockRun:
    agent_options = json.dumps({"base_url": "{mock_url}"})
    return ksi_run_with_mock(
        tmp_path,
        agent="command",
        cli="claude-code",
        env=KEY,
        tasks=[PORT_TASK],
        agent_options=[f"cmd={TASK_AGENT}"],
        args=[
            *("--generations", "2", "--distiller", "agent"),
            *("--distiller-option", "agent=claude-code"),
            *("--distiller-option", f"agent_options={agent_options}"),
            *("--distiller-option", f"model={MODEL}"),
            *("--output-json", str(tmp_path / "report.json")),
            *("--wipe-workspace-per-task", "false"),  # keep KNOWLEDGE.md to read
        ],
        script=script,
    )


def stored_notes(run: MockRun, generation: int) -> dict[str, Any]:
    path = run.run_dir / "knowledge" / str(generation) / "notes.json"
    assert path.is_file(), run.describe()
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def distill_result_event(run: MockRun, generation: int) -> dict[str, Any]:
    """Claude Code's own final ``result`` line of generation ``generation``'s distillation."""
    logs = list((run.run_dir / "distill" / str(generation)).rglob("agent.stdout.log"))
    assert len(logs) == 1, run.describe()
    lines = logs[0].read_text().splitlines()
    results = [json.loads(x) for x in lines if x.startswith('{"') and '"type":"result"' in x]
    assert results, run.describe()
    return results[-1]


def generations_report(tmp_path: Path) -> list[dict[str, Any]]:
    report = json.loads((tmp_path / "report.json").read_text())
    gens: list[dict[str, Any]] = report["summary"]["generations"]["generations"]
    return gens


def test_claude_code_writes_the_notes_generation_2_solves_with_them(tmp_path: Path) -> None:
    notes = {
        "notes": [
            {
                "kind": "constraint",
                "text": MARKER,
                "task_id": "port",
                "applies_when": "writing port.txt",
                "evidence": [REAL, BOGUS],
            },
            {"kind": "pitfall", "text": "MADE-UP", "task_id": "port", "evidence": [BOGUS]},
        ]
    }
    first, second = MockUsage(1200, 300, 2000, 100), MockUsage(1400, 20)
    third, fourth = MockUsage(1300, 300), MockUsage(1500, 25)
    run = run_distilled(
        tmp_path,
        [
            write_notes(json.dumps(notes), first),
            Answer("Wrote repo/notes.json.", second),
            write_notes(json.dumps(notes), third),
            Answer("Wrote repo/notes.json again.", fourth),
        ],
    )
    assert run.proc.returncode == 0, run.describe()
    assert len(run.served) == 4, run.describe()

    # Generation 1's notes come from the agent distiller, the bogus citation dropped.
    stored = stored_notes(run, 1)
    assert (stored["distiller"], stored["fallback"]) == ("agent", ""), stored
    agent_notes = [n for n in stored["notes"] if n["kind"] == "constraint"]
    assert [(n["text"], n["attempts"]) for n in agent_notes] == [(MARKER, [REAL])]
    assert agent_notes[0]["applies_when"] == "writing port.txt"
    assert "MADE-UP" not in json.dumps(stored), "a note citing only a bogus attempt is dropped"
    assert (run.run_dir / REAL).is_dir() and not (run.run_dir / BOGUS).exists()

    # Generation 2's attempt got KNOWLEDGE.md holding the note, and solved.
    records = {r["attempt"]: r for r in run.records}
    assert (records[1]["generation"], records[1]["score"]) == (1, 0.0), run.describe()
    assert (records[2]["generation"], records[2]["score"]) == (2, 1.0), run.describe()
    given = (run.run_dir / records[2]["attempt_dir"] / "workspace" / "KNOWLEDGE.md").read_text()
    assert MARKER in given
    assert agent_notes[0]["id"] in records[2]["knowledge"]["note_ids"]

    # Claude Code's tokens, as the mock served them, and the cost it printed are the run's.
    usage = stored["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (2600, 320)
    assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (2000, 100)
    cost_1 = distill_result_event(run, 1)["total_cost_usd"]
    cost_2 = distill_result_event(run, 2)["total_cost_usd"]
    assert usage["cost_usd"] == cost_1 > 0
    assert stored_notes(run, 2)["usage"]["input_tokens"] == 2800
    gens = generations_report(tmp_path)
    assert [(g["solved"], g["distill_cost_usd"]) for g in gens] == [(0, cost_1), (1, cost_2)]
    assert [g["cost_usd"] for g in gens] == [cost_1, cost_2], "the command agent costs nothing"
    # The CLI used the key it was given, against the mock, for the model asked for.
    assert {r.headers.get("x-api-key") for r in run.requests} == {"sk-ant-mock-key"}
    assert {s.request.body["model"] for s in run.served} == {MODEL}


def test_invalid_or_missing_notes_fall_back_to_evidence_notes_and_the_run_says_so(
    tmp_path: Path,
) -> None:
    wrong_kind = {"notes": [{"kind": "gossip", "text": MARKER, "evidence": [REAL]}]}
    run = run_distilled(
        tmp_path,
        [
            # Generation 1: notes of a kind the schema does not allow.
            write_notes(json.dumps(wrong_kind), MockUsage(900, 200)),
            Answer("Done.", MockUsage(1000, 10)),
            # Generation 2: the model only chats, and no notes file is written.
            Answer("I would rather not write notes.", MockUsage(700, 15)),
        ],
    )
    assert run.proc.returncode == 0, run.describe()
    first, second = stored_notes(run, 1), stored_notes(run, 2)
    assert first["distiller"] == "evidence" and second["distiller"] == "evidence"
    assert "does not follow schema.json" in first["fallback"], first["fallback"]
    assert "kind: expected one of insight" in first["fallback"]
    assert "got 'gossip'" in first["fallback"]
    assert "wrote no notes.json" in second["fallback"], second["fallback"]
    assert MARKER not in json.dumps(first["notes"])
    # The evidence notes do not give the port: generation 2 fails again.
    assert [(r["generation"], r["score"]) for r in run.records] == [(1, 0.0), (2, 0.0)]
    # The run says so, and what the failed distillations spent still counts.
    said = run.proc.stdout + run.proc.stderr
    assert "generation 1: agent distiller:" in said and "does not follow schema.json" in said
    assert "wrote no notes.json" in said
    assert first["usage"]["input_tokens"] == 1900 and second["usage"]["input_tokens"] == 700
    gens = generations_report(tmp_path)
    assert [g["distill_cost_usd"] for g in gens] == [
        distill_result_event(run, 1)["total_cost_usd"],
        distill_result_event(run, 2)["total_cost_usd"],
    ]
    assert all(g["distill_cost_usd"] > 0 for g in gens)
