"""The knowledge tools' MCP server (stdio), which an agent's CLI starts for an attempt.

``python -m ksi.knowledge.mcp_server --db PATH [--task ID] [--exclude ID ...]
[--forum-repo DIR --participant N [--forum-live DIR]]``

``PATH`` is the attempt's copy of the store (:func:`ksi.knowledge.tools.visible_copy`
already left out what the attempt may not see); it is opened read-only, so no
tool can change it. ``--exclude`` keeps tasks out of every answer as well
(for a server over a store that was not filtered first). A forum session's
server also (or only: ``--db`` is then optional) serves the forum's tools
over its ``repo/`` (``--forum-repo``): :mod:`ksi.knowledge.forum_tools`. The
answers are :mod:`ksi.knowledge.tools`' and :mod:`ksi.knowledge.forum_tools`';
this module only binds them to MCP, with the official SDK (the ``mcp`` extra,
imported here alone).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path

from ksi.knowledge.db import KnowledgeDB
from ksi.knowledge.db_schema import StoreUnusable
from ksi.knowledge.forum_tools import answer_forum_post, answer_forum_read
from ksi.knowledge.tools import SERVER_NAME, answer_note, answer_search, answer_task


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ksi.knowledge.mcp_server")
    parser.add_argument("--db", type=Path, help="the store (opened read-only)")
    parser.add_argument("--task", default="", help="the attempt's task (the tools' default)")
    parser.add_argument("--exclude", action="append", default=[], help="a task never answered")
    parser.add_argument("--forum-repo", type=Path, help="a forum session's repo/")
    parser.add_argument("--participant", type=int, default=0, help="the session's participant")
    parser.add_argument("--forum-live", type=Path, help="the round's live directory")
    args = parser.parse_args(argv)
    if args.db is None and args.forum_repo is None:
        parser.error("give --db, --forum-repo, or both")
    try:
        # optional: the SDK (the mcp extra), only here: a run without the tools never needs it.
        from mcp.server.mcpserver import MCPServer
        from mcp.types import ToolAnnotations
    except ImportError:
        print("the knowledge tools need the MCP SDK: pip install 'ksi[mcp]'", file=sys.stderr)
        return 2
    try:
        if args.db is not None:
            KnowledgeDB.open(args.db, readonly=True).close()
    except StoreUnusable as exc:
        print(f"knowledge tools: {exc}", file=sys.stderr)
        return 2

    def store() -> contextlib.closing[KnowledgeDB]:
        # Per call: the SDK may run a tool in a worker thread, and a connection stays in
        # the thread that made it. Opening a read-only file costs a millisecond.
        return contextlib.closing(KnowledgeDB.open(args.db, readonly=True))

    # The knowledge tools only read: a CLI that asks before a tool that may change something
    # (Codex's exec mode refuses such a call outright) lets them run.
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    excluded = tuple(args.exclude)
    own_task: str = args.task
    said = []
    if args.db is not None:
        said.append(
            "Read-only access to what earlier attempts learnt: notes, the evidence of scored "
            "attempts (final message, eval output, diff) and forum posts."
            + (f" Your task is {own_task!r}." if own_task else "")
        )
    if args.forum_repo is not None:
        said.append(
            "A forum where agents that attempted these tasks compare notes: forum_read shows "
            "the thread and this round's posts, forum_post posts, forum_done says you are done."
        )
    server = MCPServer(SERVER_NAME, instructions=" ".join(said))

    if args.db is not None:

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

    if args.forum_repo is not None:
        repo, participant, live = args.forum_repo, int(args.participant), args.forum_live
        # Posting writes a file in the session's own repo/posts/ (and the round's live
        # directory): not read-only, never destructive, nothing outside the run.
        writes = ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=False
        )

        @server.tool(annotations=read_only)
        def forum_read() -> str:
            """The forum so far: FORUM.md (your evidence, the participants, the thread, how
            to post), then what the others posted this round, and your own posts."""
            return answer_forum_read(repo, participant=participant, live=live)

        @server.tool(annotations=writes)
        def forum_post(
            kind: str, text: str, cites: list[str] | None = None, reply_to: str = ""
        ) -> str:
            """Post to the forum. kind: finding, hypothesis, rejected, question, answer or
            done; text: what you say; cites: attempt ids (attempts/<task>/<n>) it rests on;
            reply_to: the id of the post you answer. Says what is wrong with a refused post."""
            return answer_forum_post(
                repo,
                participant=participant,
                live=live,
                kind=kind,
                text=text,
                cites=cites,
                reply_to=reply_to,
            )

        @server.tool(annotations=writes)
        def forum_done(text: str = "") -> str:
            """Say you have nothing more to add: when every participant has, the forum ends."""
            return answer_forum_post(
                repo, participant=participant, live=live, kind="done", text=text
            )

    server.run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
