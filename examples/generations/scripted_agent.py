"""A SCRIPTED STAND-IN FOR AN LLM AGENT, for the offline generations demo.

It is not an AI: it writes a fixed first guess for each demo task, and, when
``KNOWLEDGE.md`` (the notes KSI puts beside ``repo/`` from the second
generation on) quotes a failing test's ``AssertionError: GOT != WANT``, it
replaces what it got with what the test wanted. That is exactly the loop a
real agent goes through with the notes, reduced to a few lines, so the demo
runs with no model and no network.

Use it as an agent by file reference:

    ksi run examples/generations/tasks.jsonl \\
        --agent ./examples/generations/scripted_agent.py:ScriptedAgent --generations 3

The class copies this file into the attempt's workspace (``.ksi/``, outside
``repo/``) and runs it there with ``python3``, so it works in every
environment that has a Python 3 (local, sandbox, docker images with python3).
"""

from __future__ import annotations

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
}
_ASSERTION = re.compile(r"AssertionError: (.+?) != (.+)")


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


def this_tasks_notes(knowledge: str) -> str:
    """The part of KNOWLEDGE.md about this task (KSI puts it under "## This task")."""
    match = re.search(r"^## This task.*?(?=^## |\Z)", knowledge, re.MULTILINE | re.DOTALL)
    return match.group(0) if match else ""


def main() -> int:
    task_id = os.environ["KSI_TASK_ID"]
    path, text = GUESSES[task_id]
    notes_file = Path("KNOWLEDGE.md")
    fixes = []
    if notes_file.exists():
        for got, want in _ASSERTION.findall(this_tasks_notes(notes_file.read_text())):
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
