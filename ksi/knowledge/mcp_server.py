"""The knowledge tools' MCP server (stdio), which an agent's CLI starts for an attempt.

``python -m ksi.knowledge.mcp_server --db PATH [--task ID] [--exclude ID ...]``

``PATH`` is the attempt's copy of the store (:func:`ksi.knowledge.tools.visible_copy`
already left out what the attempt may not see); it is opened read-only, so no
tool can change it. ``--exclude`` keeps tasks out of every answer as well
(for a server over a store that was not filtered first). The answers are
:mod:`ksi.knowledge.tools`'; this module only binds them to MCP, with the
official SDK (the ``mcp`` extra, imported here alone).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path

from ksi.knowledge.db import KnowledgeDB, StoreUnusable
from ksi.knowledge.tools import SERVER_NAME, answer_note, answer_search, answer_task


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ksi.knowledge.mcp_server")
    parser.add_argument("--db", required=True, type=Path, help="the store (opened read-only)")
    parser.add_argument("--task", default="", help="the attempt's task (the tools' default)")
    parser.add_argument("--exclude", action="append", default=[], help="a task never answered")
    args = parser.parse_args(argv)
    try:
        # optional: the SDK (the mcp extra), only here: a run without the tools never needs it.
        from mcp.server.mcpserver import MCPServer
        from mcp.types import ToolAnnotations
    except ImportError:
        print("the knowledge tools need the MCP SDK: pip install 'ksi[mcp]'", file=sys.stderr)
        return 2
    try:
        KnowledgeDB.open(args.db, readonly=True).close()
    except StoreUnusable as exc:
        print(f"knowledge tools: {exc}", file=sys.stderr)
        return 2

    def store() -> contextlib.closing[KnowledgeDB]:
        # Per call: the SDK may run a tool in a worker thread, and a connection stays in
        # the thread that made it. Opening a read-only file costs a millisecond.
        return contextlib.closing(KnowledgeDB.open(args.db, readonly=True))

    # Every tool only reads: a CLI that asks before a tool that may change something
    # (Codex's exec mode refuses such a call outright) lets these run.
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    excluded = tuple(args.exclude)
    own_task: str = args.task
    server = MCPServer(
        SERVER_NAME,
        instructions="Read-only access to what earlier attempts learnt: notes, the evidence "
        "of scored attempts (final message, eval output, diff) and forum posts."
        + (f" Your task is {own_task!r}." if own_task else ""),
    )

    @server.tool(annotations=read_only)
    def knowledge_search(query: str, task: str = "") -> str:
        """Search the knowledge store's notes, attempt evidence and posts (every word must
        match; word* matches a prefix). Give task to search only what is about that task."""
        with store() as db:
            return answer_search(db, query, task or None, exclude_tasks=excluded)

    @server.tool(annotations=read_only)
    def knowledge_note(id: str) -> str:
        """One note whole (by the id search or KNOWLEDGE.md gives): its text, status, the
        attempts it cites and how the attempts that received it scored."""
        with store() as db:
            return answer_note(db, id, exclude_tasks=excluded)

    @server.tool(annotations=read_only)
    def knowledge_task(task_id: str) -> str:
        """A task's score history (every scored attempt the store holds) and its notes."""
        with store() as db:
            return answer_task(db, task_id, exclude_tasks=excluded)

    server.run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
