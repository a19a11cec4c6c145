"""The forum with real agent CLIs (Claude Code, Codex), against the mock model.

``ksi run --generations 2 --forum-rounds 1 --forum-agent <cli>`` in a
loopback-only network namespace (``tests/real_agents.py``). The task agent is
a ``command`` agent: it writes the port the test wants only when
``KNOWLEDGE.md`` says it, and the eval output never does, so only the CLI's
post can make generation 2 solve. The mock scripts the CLI's forum session:
a shell tool call reading ``repo/FORUM.md``, one writing five post files
(a finding, ``done``, and three to drop: one citing an attempt that does not
exist, one with a key the schema does not have, one over the size limit), then
a final answer; generation 2's forum session only answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mockmodel import Answer, MockUsage, ToolCall
from real_agents import MockRun, ksi_run_with_mock

pytestmark = pytest.mark.real_cli

MARKER = "MOCK-POST: the gateway listens on port 8443"
PORT_TASK = {
    "task_id": "port",
    "prompt": "Write the gateway's port number to port.txt.",
    "files": {"README.md": "The gateway.\n"},
    "eval": {"command": 'test "$(cat port.txt)" = 8443', "timeout_sec": 30},
}
TASK_AGENT = (
    f"if grep -q '{MARKER}' KNOWLEDGE.md 2>/dev/null; "
    "then echo 8443 > repo/port.txt; else echo 80 > repo/port.txt; fi"
)
POSTS = (
    "cat > repo/posts/1.json <<'EOF'\n"
    + json.dumps({"kind": "finding", "text": MARKER, "cites": ["attempts/port/1"]})
    + "\nEOF\ncat > repo/posts/2.json <<'EOF'\n"
    + json.dumps({"kind": "finding", "text": "MADE-UP", "cites": ["attempts/port/99"]})
    + '\nEOF\necho \'{"kind": "done"}\' > repo/posts/3.json\n'
    + """echo '{"kind": "finding", "text": "x", "mood": "sure"}' > repo/posts/4.json\n"""
    + """printf '{"kind": "finding", "text": "%s"}' "$(head -c 9000 /dev/zero | tr '\\0' y)" """
    + "> repo/posts/5.json"
)
CLIS = {
    # cli: (its shell tool call, the key a user exports, the model)
    "claude-code": (
        lambda cmd, usage: ToolCall("Bash", {"command": cmd, "description": "forum"}, usage),
        {"ANTHROPIC_API_KEY": "sk-ant-mock-key"},
        "claude-sonnet-4-5",
    ),
    "codex": (
        lambda cmd, usage: ToolCall("exec_command", {"cmd": cmd}, usage),
        {"CODEX_API_KEY": "sk-mock-codex"},
        "mock-model",
    ),
}


def run_forum(tmp_path: Path, cli: str) -> MockRun:
    shell, key, model = CLIS[cli]
    script: list[Any] = [
        shell("cat repo/FORUM.md", MockUsage(900, 20)),
        shell(POSTS, MockUsage(1100, 120)),
        Answer("Posted my finding.", MockUsage(1200, 10)),
        Answer("Nothing to add.", MockUsage(800, 5)),  # generation 2's session
    ]
    return ksi_run_with_mock(
        tmp_path,
        agent="command",
        cli=cli,
        env=key,
        tasks=[PORT_TASK],
        agent_options=[f"cmd={TASK_AGENT}"],
        args=[
            *("--generations", "2", "--strategy", "all", "--forum-rounds", "1"),
            *("--forum-agent", cli, "--forum-agent-option", "base_url={mock_url}"),
            *("--forum-model", model),
            *("--output-json", str(tmp_path / "report.json")),
            *("--wipe-workspace-per-task", "false"),  # keep KNOWLEDGE.md to read
        ],
        script=script,
    )


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_a_real_cli_posts_through_files_and_the_next_generation_reads_the_note(
    tmp_path: Path, cli: str
) -> None:
    run = run_forum(tmp_path, cli)
    assert run.proc.returncode == 0, run.describe()
    assert len(run.served) == 4, run.describe()
    # It read FORUM.md: the file's text went back to the model as the tool's result.
    after_read = json.dumps(run.served[1].request.body)
    assert "Forum: task `port`, generation 1, round 1 of 1" in after_read, run.describe()
    assert "attempts/port/1" in after_read and "How to post" in after_read

    # Its posts were checked: the finding and done kept, the made-up citation dropped.
    phases = [json.loads(x) for x in (run.run_dir / "generations.jsonl").read_text().splitlines()]
    rounds = [e["forum_round"] for e in phases if e["kind"] == "forum_round"]
    first = next(r for r in rounds if r["round"] == 1 and r["post_ids"])
    assert first["post_ids"] == ["forum/1/tasks/port/r1p1-1", "forum/1/tasks/port/r1p1-2"]
    dropped = first["dropped"]
    assert len(dropped) == 3, dropped
    assert "posts/2.json: $.cites[0]: 'attempts/port/99' is not a scored attempt" in dropped[0]
    assert "posts/4.json: $.mood: unknown key" in dropped[1]
    assert "posts/5.json: 90" in dropped[2] and "over the limit of 8192" in dropped[2]
    assert first["ended"] == "every participant posted done"

    # The evidence distiller made a note of the post; generation 2 got it and solved.
    notes = json.loads((run.run_dir / "knowledge" / "1" / "notes.json").read_text())
    made = [n for n in notes["notes"] if n["posts"]]
    assert [(n["kind"], n["posts"], n["attempts"]) for n in made] == [
        ("forum_post", ["forum/1/tasks/port/r1p1-1"], ["attempts/port/1"])
    ]
    assert MARKER in made[0]["text"]
    records = {r["attempt"]: r for r in run.records}
    assert (records[1]["score"], records[2]["score"]) == (0.0, 1.0), run.describe()
    given = (run.run_dir / records[2]["attempt_dir"] / "workspace" / "KNOWLEDGE.md").read_text()
    assert MARKER in given and made[0]["id"] in records[2]["knowledge"]["note_ids"]

    # The sessions' tokens are the forum's, counted per generation (Claude Code prints a
    # cost, Codex none).
    report = json.loads((tmp_path / "report.json").read_text())
    g1 = report["summary"]["generations"]["generations"][0]
    assert (g1["forum_sessions"], g1["forum_posts"], g1["forum_dropped"]) == (1, 2, 3)
    sessions = (run.run_dir / "forum" / "1" / "sessions.jsonl").read_text().splitlines()
    usage = json.loads(sessions[0])["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (3200, 150)
    if cli == "claude-code":
        assert g1["forum_cost_usd"] == usage["cost_usd"] > 0
    else:
        assert g1["forum_cost_usd"] is None and usage["cost_usd"] is None
    assert {s.request.body["model"] for s in run.served} == {CLIS[cli][2]}


def test_claude_code_posts_through_the_forum_tools_and_reads_this_rounds_posts_live(
    tmp_path: Path,
) -> None:
    """Two participants, one after the other (``--concurrency 1``): the first reads the
    forum and posts through ``forum_post`` (a refused post says why, at once) and
    ``forum_done``; the second's ``forum_read`` already shows that post, which its
    ``FORUM.md`` (rendered when the round began) does not."""
    pytest.importorskip("mcp")
    _, key, model = CLIS["claude-code"]
    finding = {"kind": "finding", "text": MARKER, "cites": ["attempts/port/1"]}
    script: list[Any] = [
        # Generation 1, participant 1.
        ToolCall("mcp__ksi__forum_read", {}, MockUsage(500, 10)),
        ToolCall("mcp__ksi__forum_post", finding, MockUsage(600, 40)),
        ToolCall("mcp__ksi__forum_post", {"kind": "gossip", "text": "x"}, MockUsage(700, 10)),
        ToolCall("mcp__ksi__forum_done", {}, MockUsage(800, 5)),
        Answer("Posted.", MockUsage(900, 5)),
        # Generation 1, participant 2.
        ToolCall("mcp__ksi__forum_read", {}, MockUsage(500, 10)),
        ToolCall("mcp__ksi__forum_done", {"text": "Agreed."}, MockUsage(600, 5)),
        Answer("Done.", MockUsage(700, 5)),
        # Generation 2's two sessions.
        Answer("Nothing to add.", MockUsage(300, 5)),
        Answer("Nothing to add.", MockUsage(300, 5)),
    ]
    run = ksi_run_with_mock(
        tmp_path,
        agent="command",
        cli="claude-code",
        env=key,
        tasks=[PORT_TASK],
        agent_options=[f"cmd={TASK_AGENT}"],
        args=[
            *("--attempts", "2", "--concurrency", "1"),
            *("--generations", "2", "--strategy", "all", "--forum-rounds", "1"),
            *("--forum-agent", "claude-code", "--forum-agent-option", "base_url={mock_url}"),
            *("--forum-model", model, "--wipe-workspace-per-task", "false"),
        ],
        script=script,
    )
    assert run.proc.returncode == 0, run.describe()
    assert len(run.served) == len(script), run.describe()
    bodies = [json.dumps(s.request.body) for s in run.served]
    assert "mcp__ksi__forum_post" in bodies[0], "the CLI offered the forum's tools"
    assert "Forum: task `port`, generation 1, round 1 of 1" in bodies[1], "forum_read's answer"
    assert "posted as posts/mcp-001.json" in bodies[2]
    assert "refused, not posted: $.kind: expected one of finding" in bodies[3]
    # Participant 2 read participant 1's post live, before the round ended.
    assert MARKER in bodies[6] and "participant 1 (this round, not checked yet)" in bodies[6]
    sessions = sorted((run.run_dir / "forum" / "1" / "seeds").glob("*/repo/FORUM.md"))
    assert len(sessions) == 2 and not any(MARKER in s.read_text() for s in sessions)

    # KSI kept the tools' posts as it keeps files: checked, with ids, distilled.
    stored = [json.loads(x) for x in (run.run_dir / "forum" / "1" / "sessions.jsonl").open()]
    kept = {s["participant"]: [(p["kind"], p["file"]) for p in s["posts"]] for s in stored}
    assert kept == {
        1: [("finding", "posts/mcp-001.json"), ("done", "posts/mcp-002.json")],
        2: [("done", "posts/mcp-001.json")],
    }
    notes = json.loads((run.run_dir / "knowledge" / "1" / "notes.json").read_text())
    made = [n for n in notes["notes"] if n["posts"] == ["forum/1/tasks/port/r1p1-1"]]
    assert len(made) == 1 and MARKER in made[0]["text"]
    second = [r for r in run.records if r["generation"] == 2]
    assert second and all(r["score"] == 1.0 for r in second), run.describe()


def test_gemini_cli_posts_through_forum_post(tmp_path: Path) -> None:
    """The second CLI through the tools: Gemini CLI names them ``mcp_ksi_<tool>``."""
    pytest.importorskip("mcp")
    finding = {"kind": "finding", "text": MARKER, "cites": ["attempts/port/1"]}
    run = ksi_run_with_mock(
        tmp_path,
        agent="command",
        cli="gemini-cli",
        env={"GEMINI_API_KEY": "mock-gemini-key"},
        tasks=[PORT_TASK],
        agent_options=[f"cmd={TASK_AGENT}"],
        args=[
            *("--generations", "2", "--strategy", "all", "--forum-rounds", "1"),
            *("--forum-agent", "gemini-cli", "--forum-agent-option", "base_url={mock_url}"),
            *("--forum-model", "gemini-2.5-pro", "--wipe-workspace-per-task", "false"),
        ],
        script=[
            ToolCall("mcp_ksi_forum_post", finding, MockUsage(600, 40)),
            Answer("Posted.", MockUsage(700, 5)),
            Answer("Nothing to add.", MockUsage(300, 5)),  # generation 2's session
        ],
    )
    assert run.proc.returncode == 0, run.describe()
    bodies = [json.dumps(s.request.body) for s in run.served]
    assert "mcp_ksi_forum_post" in bodies[0] and "posted as posts/mcp-001.json" in bodies[1]
    notes = json.loads((run.run_dir / "knowledge" / "1" / "notes.json").read_text())
    made = [n for n in notes["notes"] if n["posts"] == ["forum/1/tasks/port/r1p1-1"]]
    assert len(made) == 1 and MARKER in made[0]["text"]
    records = {r["attempt"]: r for r in run.records}
    assert (records[1]["score"], records[2]["score"]) == (0.0, 1.0), run.describe()
