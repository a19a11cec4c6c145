"""A SCRIPTED STAND-IN FOR AN LLM AGENT, for the offline generations demo.

It is not an AI: it writes a fixed first guess for each demo task, and, when
``KNOWLEDGE.md`` (the notes KSI puts beside ``repo/`` from the second
generation on) quotes a failing test's ``AssertionError: GOT != WANT``, it
replaces what it got with what the test wanted; when a note states a house
convention for every task ("For every task, a house convention: write `WANT`
where a first guess writes `GOT`"), it applies that too (a finding about
another task alone it does not trust to hold for its own). That is exactly
the loop a real agent goes through with the notes, reduced to a few lines, so
the demo runs with no model and no network.

In a forum session (``repo/FORUM.md`` exists: ``--forum-rounds``) it plays a
participant: in its task's room it posts what its attempt's eval output
reveals the tests want (or asks what they check, when they do not say), then
``done``; in the cross-task room it posts what its task's room found as a
convention for every task, then ``done``.

Use it as an agent by file reference:

    ksi run examples/generations/tasks.jsonl \\
        --agent ./examples/generations/scripted_agent.py:ScriptedAgent --generations 3

The class copies this file into the attempt's workspace (``.ksi/``, outside
``repo/``) and runs it there with ``python3``, so it works in every
environment that has a Python 3 (local, sandbox, docker images with python3).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

#: task id -> (file in repo/, the first guess written there).
GUESSES = {
    "greet": (
        "greet.py",
        '"""The house greeting."""\n\n\ndef greet(name: str) -> str:\n'
        '    return f"Hello, {name}!"\n',
    ),
    "gateway-port": ("config.py", '"""Service settings."""\n\nPORT = 8080\n'),
    "log-level": ("logging_conf.py", '"""Logging settings."""\n\nLEVEL = "info"\n'),
    "version": ("version.py", '"""The release."""\n\nVERSION = "1.0.0"\n'),
    # The forum demo (forum-tasks.jsonl).
    "release-date": ("release.py", '"""The release."""\n\nRELEASED = "2024-01-02"\n'),
    "changelog": ("changelog.py", '"""The changelog."""\n\nHEADING = "1.0.0 (2024-01-02)"\n'),
    "license": ("meta.py", '"""Project metadata."""\n\nLICENSE = "MIT"\n'),
}
_ASSERTION = re.compile(r"AssertionError: (.+?) != (.+)")
#: What a task's room finds, and what the cross-task room makes of it for every task.
_FINDING = re.compile(r"want `([^`]+)` where a first guess writes `([^`]+)`")
_CONVENTION = re.compile(r"house convention: write `([^`]+)` where a first guess writes `([^`]+)`")


def _core(got: str, want: str) -> tuple[str, str]:
    """``got`` and ``want`` without their common prefix and suffix (quotes dropped)."""
    got, want = got.strip().strip("'\""), want.strip().strip("'\"")
    start = 0
    while start < min(len(got), len(want)) and got[start] == want[start]:
        start += 1
    end = 0
    while end < min(len(got), len(want)) - start and got[-1 - end] == want[-1 - end]:
        end += 1
    return got[start : len(got) - end], want[start : len(want) - end]


def section(markdown: str, heading: str) -> str:
    """The part of a Markdown file under the ``## <heading>...`` heading."""
    pattern = rf"^## {re.escape(heading)}.*?(?=^## |\Z)"
    match = re.search(pattern, markdown, re.MULTILINE | re.DOTALL)
    return match.group(0) if match else ""


def this_tasks_notes(knowledge: str) -> str:
    """The part of KNOWLEDGE.md about this task (KSI puts it under "## This task")."""
    return section(knowledge, "This task")


def _post(name: str, kind: str, text: str = "", cites: tuple[str, ...] = ()) -> None:
    post: dict[str, object] = {"kind": kind, "text": text}
    if cites:
        post["cites"] = list(cites)
    Path("repo", "posts", f"{name}.json").write_text(json.dumps(post), encoding="utf-8")


def forum() -> int:
    """One forum session: read FORUM.md and the evidence, write posts (see the docstring)."""
    board = Path("repo", "FORUM.md").read_text(encoding="utf-8")
    evidence = json.loads(Path("repo", "evidence", "attempt.json").read_text(encoding="utf-8"))
    mine = (evidence["attempt_id"],)
    if board.startswith("# Forum: every task"):
        own = section(board, "Each task's thread").split(f"### task {evidence['task_id']}\n")
        found = _FINDING.findall(own[1].split("\n### ")[0]) if len(own) > 1 else []
        for n, (want, got) in enumerate(dict.fromkeys(found), 1):
            text = (
                f"For every task, a house convention: write `{want}` where a first guess "
                f"writes `{got}`."
            )
            _post(f"1-convention-{n}", "finding", text, mine)
        _post("9-done", "done")
        print(f"Cross-task room: posted {len(found)} convention(s).")
        return 0
    if "_No posts yet._" not in section(board, "The thread so far"):
        _post("9-done", "done", "Nothing to add.")  # a later round: the thread has our posts
        print("Said done.")
        return 0
    output = Path("repo", "evidence", "eval_output.txt").read_text(encoding="utf-8")
    pairs = _ASSERTION.findall(output)
    for n, (got, want) in enumerate(pairs, 1):
        got, want = got.strip().strip("'\""), want.strip().strip("'\"")
        text = f"The tests of this task want `{want}` where a first guess writes `{got}`."
        _post(f"1-finding-{n}", "finding", text, mine)
    if pairs or evidence["solved"]:
        _post("9-done", "done")
    else:
        said = [line for line in output.splitlines() if line.startswith("AssertionError")]
        text = f"The tests only say: {(said or ['nothing'])[0]}. Which convention do they check?"
        _post("1-question", "question", text)
    print(f"Posted {len(pairs)} finding(s).")
    return 0


def main() -> int:
    if Path("repo", "FORUM.md").exists():
        return forum()
    task_id = os.environ["KSI_TASK_ID"]
    path, text = GUESSES[task_id]
    notes_file = Path("KNOWLEDGE.md")
    fixes = []
    if notes_file.exists():
        notes = notes_file.read_text()
        pairs = [
            *_ASSERTION.findall(this_tasks_notes(notes)),
            *((got, want) for want, got in _CONVENTION.findall(section(notes, "All tasks"))),
        ]
        for got, want in pairs:
            old, new = _core(got, want)
            if old and old in text:
                text = text.replace(old, new)
                fixes.append(f"{old!r} -> {new!r}")
    Path("repo", path).write_text(text, encoding="utf-8")
    if fixes:
        print(f"Wrote repo/{path}; the notes showed the tests want {', '.join(fixes)}.")
    else:
        print(f"Wrote repo/{path} with my first guess (no notes about this task).")
    return 0


class ScriptedAgent:
    """The KSI agent that runs this file (see the module docstring: not an LLM)."""

    name: ClassVar[str] = "scripted-demo"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "A scripted stand-in for an LLM agent (generations demo)."
    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()

    def check_tasks(self, tasks: Any) -> list[str]:
        unknown = [t.id for t in tasks if t.id not in GUESSES]
        return [f"task {t!r}: the demo agent knows no guess for it" for t in unknown]

    def setup(self, ctx: Any) -> None:
        script = Path(ctx.host_workspace) / ".ksi" / "scripted_agent.py"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(Path(__file__).read_text(encoding="utf-8"), encoding="utf-8")

    def invocation(self, ctx: Any) -> Any:
        from ksi.agents.builtin import attempt_env
        from ksi.interfaces import Invocation

        return Invocation(argv=("python3", ".ksi/scripted_agent.py"), env=attempt_env(ctx))

    def outcome(self, ctx: Any, result: Any) -> Any:
        from ksi.agents.builtin import outcome_from_exit

        return outcome_from_exit(result)


if __name__ == "__main__":
    sys.exit(main())
