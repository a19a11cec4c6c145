"""Retrieval: which of a generation's notes are closest to a task (FTS5, BM25).

An attempt gets its task's own notes first; then the shared notes and other
tasks' notes, most relevant to its task first. Relevance is BM25 between the
task's id and prompt (its telling words, :func:`~ksi.knowledge.queries.any_of`)
and each note, computed by SQLite's FTS5 over an index of that generation's
notes alone, built once per generation in memory: the question is which of
*these* notes fit this task, and the answer must not slow down as a shared
store grows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from ksi.knowledge.db_schema import TOKENIZE
from ksi.knowledge.models import Note
from ksi.knowledge.queries import any_of

#: The most notes one task's retrieval returns (more never fit a budget).
MOST = 200


class NoteIndex:
    """A full-text index of one generation's notes; :meth:`rank` is a ``Ranker``."""

    def __init__(self, notes: Sequence[Note]) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE notes USING fts5 (text, applies_when, tokenize='{TOKENIZE}')"
        )
        with self._conn:
            self._conn.executemany(
                "INSERT INTO notes (rowid, text, applies_when) VALUES (?, ?, ?)",
                [(i, n.text, n.applies_when) for i, n in enumerate(notes)],
            )

    def rank(self, query: str) -> Mapping[int, float]:
        """Position (in the notes indexed) -> relevance (higher: closer) of each note that
        holds a telling word of ``query`` (a task's id and prompt)."""
        match = any_of(query)
        if not match:
            return {}
        rows = self._conn.execute(
            "SELECT rowid, bm25(notes) AS r FROM notes WHERE notes MATCH ? ORDER BY r LIMIT ?",
            (match, MOST),
        )
        return {int(p): -float(r) for p, r in rows}
