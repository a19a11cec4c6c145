"""Storing a generation's notes in the knowledge store: link what is there, add what is new.

A note carried from an earlier generation, or read from another run, is one
row however many generations hold it; a new one gets its own (its id made
unique within its run). What a new note ``replaces`` is marked superseded,
and which notes are demoted is decided when the generation is stored.
The caller holds the write transaction (:meth:`~ksi.knowledge.db.KnowledgeDB.write`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence

import attrs

from ksi.knowledge.db_read import (
    NOTE_COLUMNS,
    has_generation,
    read_generation,
    same_note,
)
from ksi.knowledge.db_schema import global_id, scope
from ksi.knowledge.models import DEMOTE_AFTER, Knowledge, Note, text_key
from ksi.serialization import to_data


def insert_generation(
    conn: sqlite3.Connection,
    run_id: str,
    knowledge: Knowledge,
    task_hashes: Mapping[str, str],
    model: str | None,
) -> Knowledge:
    """Store ``knowledge`` (see :meth:`~ksi.knowledge.db.KnowledgeDB.put_generation`)."""
    g = knowledge.generation
    if has_generation(conn, run_id, g):
        stored = read_generation(conn, run_id, g)
        assert stored is not None
        return stored
    rows: list[int] = []
    notes: list[Note] = []
    added: list[tuple[Note, int]] = []
    created = knowledge.created_at
    for note in knowledge.notes:
        row, note, new = _link_or_add(
            conn, run_id, note, knowledge.distiller, model, created, task_hashes, g
        )
        if row in rows:
            continue  # the same stored note twice: once is enough
        rows.append(row)
        notes.append(note)
        if new:
            added.append((note, row))
    # Only a new note supersedes: a carried one did when it was new (and a note read
    # from another run names notes of that run).
    for note, row in added:
        for old in note.replaces:
            old_row = _find_row(conn, run_id, old)
            if old_row is not None and old_row != row:
                conn.execute(
                    "UPDATE notes SET superseded_by = (SELECT uid FROM notes WHERE id = ?) "
                    "WHERE id = ? AND superseded_by IS NULL",
                    (row, old_row),
                )
    failing = _failing_rows(conn, rows)
    demoted = tuple(n.id for n, r in zip(notes, rows, strict=True) if r in failing)
    conn.execute(
        """INSERT INTO generations (run_id, generation, distiller, fallback, usage, demoted,
            created_at) VALUES (?, ?, ?, ?, ?, ?, ?)""",
        (
            run_id,
            g,
            knowledge.distiller,
            knowledge.fallback,
            json.dumps(to_data(knowledge.usage)),
            json.dumps(list(demoted)),
            created,
        ),
    )
    conn.executemany(
        "INSERT INTO generation_notes (run_id, generation, position, note) VALUES (?, ?, ?, ?)",
        [(run_id, g, i, row) for i, row in enumerate(rows)],
    )
    return attrs.evolve(knowledge, notes=tuple(notes), demoted=demoted)


def _find_row(conn: sqlite3.Connection, run_id: str, note_id: str) -> int | None:
    """The row of a note as ``run_id`` names it: a global id, or its own id."""
    found = conn.execute(
        "SELECT id FROM notes WHERE uid = ? OR (run_id = ? AND local_id = ?) "
        "ORDER BY run_id = ? DESC LIMIT 1",
        (note_id, run_id, note_id, run_id),
    ).fetchone()
    return None if found is None else int(found[0])


def _link_or_add(
    conn: sqlite3.Connection,
    run_id: str,
    note: Note,
    distiller: str,
    model: str | None,
    created: str,
    task_hashes: Mapping[str, str],
    generation: int,
) -> tuple[int, Note, bool]:
    """The row of ``note`` (linked when stored already, else added), the note with
    the id it is stored under, and whether it was added."""
    found = conn.execute(
        f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.uid = ? OR (n.run_id = ? AND "
        "n.local_id = ?) ORDER BY n.uid = ? DESC",
        (note.id, run_id, note.id, note.id),
    ).fetchall()
    for row in found:
        if same_note(row, note):
            return int(row[0]), note, False
    local = note.id
    n = 1
    while conn.execute(
        "SELECT 1 FROM notes WHERE (run_id = ? AND local_id = ?) OR uid = ?",
        (run_id, local, global_id(run_id, local)),
    ).fetchone():
        local = f"{note.id}-g{generation}" if n == 1 else f"{note.id}-g{generation}-{n}"
        n += 1
    cursor = conn.execute(
        """INSERT INTO notes (uid, run_id, local_id, generation, task_id, task_hash, kind,
            text, applies_when, attempts, replaces, text_key, distiller, model, created_at,
            scope)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            global_id(run_id, local),
            run_id,
            local,
            note.generation,
            note.task_id,
            None if note.task_id is None else task_hashes.get(note.task_id),
            note.kind,
            note.text,
            note.applies_when,
            json.dumps(list(note.attempts)),
            json.dumps(list(note.replaces)),
            text_key(note.text),
            distiller,
            model,
            created,
            scope(run_id, note.task_id, note.generation, note.kind),
        ),
    )
    assert cursor.lastrowid is not None
    return int(cursor.lastrowid), attrs.evolve(note, id=local), True


def _failing_rows(conn: sqlite3.Connection, rows: Sequence[int]) -> set[int]:
    """Of ``rows``, the notes received by :data:`DEMOTE_AFTER` scored attempts or more,
    none of which solved its task."""
    if not rows:
        return set()
    found = conn.execute(
        f"""SELECT note FROM received WHERE note IN ({",".join("?" * len(rows))})
        GROUP BY note HAVING count(*) >= ? AND max(solved) = 0""",
        (*rows, DEMOTE_AFTER),
    )
    return {int(r) for (r,) in found}
