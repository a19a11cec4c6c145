"""Knowledge tools for agents: what an attempt's MCP server may see, and what it answers.

With ``--knowledge-tools on`` an agent whose CLI speaks MCP gets three tools
over the knowledge store: ``knowledge_search(query, task?)``,
``knowledge_note(id)`` and ``knowledge_task(task_id)``. They are served by
:mod:`ksi.knowledge.mcp_server`, a process the agent's CLI starts itself
(stdio), so it runs wherever the agent does, inside a sandbox too.

What it may see is decided by what it is *given*, not by a filter it could be
talked out of: before the agent starts, KSI writes a copy of the store into
the attempt's workspace (``.ksi/knowledge.sqlite``, beside ``repo/``, never
captured) holding only what the attempt may see (:func:`visible_copy`): no
row about a hold-out task, and nothing of its own run's current generation
or later (the other attempts running beside it). The agent could open that
file itself; it would find nothing more. The server opens it read-only.

This module imports no MCP: the answers are plain text, so they are tested
without a server, and a run with the tools off never needs the ``mcp`` extra.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ksi.interfaces import McpServer
from ksi.knowledge.db import KnowledgeDB
from ksi.knowledge.forum_tools import FORUM_TOOL_NAMES
from ksi.knowledge.queries import note_detail, search, task_history

#: The MCP server's name in each CLI's configuration (Claude Code shows its tools as
#: ``mcp__ksi__knowledge_search``).
SERVER_NAME = "ksi"
#: The tools it serves.
TOOL_NAMES = ("knowledge_search", "knowledge_note", "knowledge_task")
#: The attempt's copy of the store, relative to its workspace.
WORKSPACE_COPY = ".ksi/knowledge.sqlite"
#: The module an agent's CLI runs (``python -m``).
SERVER_MODULE = "ksi.knowledge.mcp_server"
#: Why a run with the tools on cannot start without the extra.
MISSING_EXTRA = (
    "--knowledge-tools on needs the official MCP Python SDK in KSI's environment: "
    "pip install 'ksi[mcp]'"
)
#: The most hits one search returns.
SEARCH_LIMIT = 10


def mcp_installed() -> bool:
    """Whether the ``mcp`` extra is importable here (without importing it: start-up)."""
    return importlib.util.find_spec("mcp") is not None


def server_for(
    python: str,
    workspace_path: str,
    task_id: str,
    *,
    knowledge: bool = True,
    forum_participant: int | None = None,
    forum_live: str | None = None,
) -> McpServer:
    """The server over the attempt's copy: ``workspace_path`` as the agent sees it.

    A forum session's (``forum_participant``) serves the forum's tools too, over
    its ``repo/``, with the round's live directory when the session can reach it
    (``forum_live``); ``knowledge=False`` leaves the knowledge tools out.
    """
    workspace = workspace_path.rstrip("/")
    args: list[str] = ["-m", SERVER_MODULE]
    tools: tuple[str, ...] = ()
    if knowledge:
        args += ["--db", f"{workspace}/{WORKSPACE_COPY}", "--task", task_id]
        tools += TOOL_NAMES
    if forum_participant is not None:
        args += ["--forum-repo", f"{workspace}/repo", "--participant", str(forum_participant)]
        if forum_live is not None:
            args += ["--forum-live", forum_live]
        tools += FORUM_TOOL_NAMES
    return McpServer(SERVER_NAME, python, tuple(args), tools)


# -- what the attempt may see ------------------------------------------------------------

#: Each table's rows an attempt may not see: ``(table, condition)``; ``:run`` is the
#: attempt's run, ``:gen`` its generation, ``held`` the temporary table of hold-outs.
_INVISIBLE = (
    ("received", "task_id IN held OR (run_id = :run AND generation >= :gen)"),
    (
        "generation_notes",
        "(run_id = :run AND generation >= :gen) OR note IN "
        "(SELECT id FROM notes WHERE task_id IN held OR (run_id = :run AND generation >= :gen))",
    ),
    ("generations", "run_id = :run AND generation >= :gen"),
    ("notes", "task_id IN held OR (run_id = :run AND generation >= :gen)"),
    ("attempts", "task_id IN held OR (run_id = :run AND generation >= :gen)"),
    ("posts", "task_id IN held OR (run_id = :run AND generation >= :gen)"),
)


def visible_copy(
    store: Path,
    dest: Path,
    *,
    run_id: str,
    generation: int,
    exclude_tasks: Iterable[str] = (),
) -> Path:
    """Write to ``dest`` a copy of ``store`` holding only what an attempt of ``run_id``'s
    ``generation`` may see: nothing about ``exclude_tasks``, nothing of that run's
    ``generation`` or later. Deleted rows are gone from the file (``VACUUM``), not only
    unlinked; the copy is in rollback-journal mode, so it opens read-only on its own.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.unlink(missing_ok=True)
    with contextlib.closing(KnowledgeDB.open(store, readonly=True)) as source:
        target = sqlite3.connect(str(dest), isolation_level=None)
        try:
            source.conn.backup(target)  # one consistent snapshot, while the driver writes
            target.execute("PRAGMA journal_mode = DELETE")
            target.execute("PRAGMA foreign_keys = OFF")
            target.execute("BEGIN")
            target.execute("CREATE TEMP TABLE held (task_id TEXT PRIMARY KEY)")
            target.executemany(
                "INSERT OR IGNORE INTO held VALUES (?)", [(t,) for t in exclude_tasks]
            )
            params = {"run": run_id, "gen": int(generation)}
            for table, condition in _INVISIBLE:
                condition = condition.replace("IN held", "IN (SELECT task_id FROM held)")
                target.execute(f"DELETE FROM {table} WHERE {condition}", params)
            for fts in ("notes_fts", "attempts_fts", "posts_fts"):
                target.execute(f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')")
            target.execute("COMMIT")
            target.execute("VACUUM")
        finally:
            target.close()
    return dest


# -- the answers -----------------------------------------------------------------------


def _dumped(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False)


def answer_search(
    db: KnowledgeDB, query: str, task: str | None = None, *, exclude_tasks: Iterable[str] = ()
) -> str:
    """``knowledge_search``: the best matches in notes, evidence and posts, as JSON."""
    hits = search(db, query, task=task or None, limit=SEARCH_LIMIT, exclude_tasks=exclude_tasks)
    if not hits:
        return f"nothing in the knowledge store matches {query!r}" + (
            f" for task {task!r}" if task else ""
        )
    return _dumped(
        [
            {
                "source": h.source,
                "id": h.id,
                "task_id": h.task_id,
                "generation": h.generation,
                "kind": h.kind,
                "text": h.snippet,
                **({"status": h.status} if h.status else {}),
                **({"score": h.score} if h.score is not None else {}),
            }
            for h in hits
        ]
    )


def answer_note(db: KnowledgeDB, note_id: str, *, exclude_tasks: Iterable[str] = ()) -> str:
    """``knowledge_note``: one note whole, what it cites and how its receivers scored."""
    detail = note_detail(db, note_id, exclude_tasks=exclude_tasks)
    if detail is None:
        return f"no note {note_id!r} in the knowledge store"
    note = detail.note
    return _dumped(
        {
            "id": detail.uid,
            "kind": note.kind,
            "task_id": note.task_id,
            "generation": note.generation,
            "text": note.text,
            "applies_when": note.applies_when,
            "status": detail.status,
            "superseded_by": detail.superseded_by,
            "cites": [
                {"attempt": c.attempt_id, "score": c.score, "solved": c.solved}
                for c in detail.cites
            ],
            "received_by": len(detail.receivers),
            "solve_rate_of_receivers": detail.solve_rate,
        }
    )


def answer_task(db: KnowledgeDB, task_id: str, *, exclude_tasks: Iterable[str] = ()) -> str:
    """``knowledge_task``: a task's notes and its score history, as JSON."""
    history = task_history(db, task_id, exclude_tasks=exclude_tasks)
    if not history.attempts and not history.notes:
        return f"the knowledge store holds nothing about task {task_id!r}"
    return _dumped(
        {
            "task_id": task_id,
            "scores": [
                {
                    "attempt": f"{a.run_id}:{a.attempt_id}",
                    "generation": a.generation,
                    "score": a.score,
                    "solved": a.solved,
                }
                for a in history.attempts
            ],
            "notes": [
                {"id": n.id, "kind": n.kind, "generation": n.generation, "text": n.snippet}
                for n in history.notes
            ],
        }
    )


__all__ = [
    "MISSING_EXTRA",
    "SERVER_NAME",
    "TOOL_NAMES",
    "WORKSPACE_COPY",
    "answer_note",
    "answer_search",
    "answer_task",
    "mcp_installed",
    "server_for",
    "visible_copy",
]
