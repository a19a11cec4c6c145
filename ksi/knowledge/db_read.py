"""Reading notes back from the knowledge store: a run's stored generation, and what a new
run on the same tasks starts from.

A stored note is one row, whoever wrote it; which id it is shown under depends
on who asks (its own id within its run, its global id to any other run:
:func:`~ksi.knowledge.db_schema.global_id`). Search is in
:mod:`ksi.knowledge.queries`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ksi.knowledge.models import Knowledge, Note
from ksi.models import Usage
from ksi.serialization import from_data

NOTE_FIELDS = (
    "id",
    "uid",
    "run_id",
    "local_id",
    "generation",
    "task_id",
    "task_hash",
    "kind",
    "text",
    "applies_when",
    "attempts",
    "replaces",
)
#: The columns a note is read from, in :data:`NOTE_FIELDS`' order (``n`` is ``notes``).
NOTE_COLUMNS = ", ".join(f"n.{f}" for f in NOTE_FIELDS)
_COL = {f: i for i, f in enumerate(NOTE_FIELDS)}


def note_from_row(row: Sequence[Any], owner: str | None) -> Note:
    """A stored note, with the id ``owner`` knows it by (its own id in its run, else global)."""
    c = _COL
    return Note(
        id=row[c["local_id"]] if row[c["run_id"]] == owner else row[c["uid"]],
        kind=row[c["kind"]],
        text=row[c["text"]],
        task_id=row[c["task_id"]],
        applies_when=row[c["applies_when"]],
        attempts=tuple(json.loads(row[c["attempts"]])),
        generation=int(row[c["generation"]]),
        replaces=tuple(json.loads(row[c["replaces"]])),
    )


def same_note(row: Sequence[Any], note: Note) -> bool:
    """Whether the stored ``row`` says what ``note`` says (so it is linked, not copied)."""
    c = _COL
    return bool(
        row[c["kind"]] == note.kind
        and row[c["task_id"]] == note.task_id
        and row[c["text"]] == note.text
        and row[c["applies_when"]] == note.applies_when
    )


def has_generation(conn: sqlite3.Connection, run_id: str, generation: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM generations WHERE run_id = ? AND generation = ?", (run_id, generation)
    ).fetchone()
    return row is not None


def read_generation(conn: sqlite3.Connection, run_id: str, generation: int) -> Knowledge | None:
    """The notes ``run_id`` stored after ``generation`` (ids as that run knows them)."""
    head = conn.execute(
        """SELECT distiller, fallback, usage, demoted, created_at FROM generations
        WHERE run_id = ? AND generation = ?""",
        (run_id, generation),
    ).fetchone()
    if head is None:
        return None
    rows = conn.execute(
        f"""SELECT {NOTE_COLUMNS} FROM generation_notes gn JOIN notes n ON n.id = gn.note
        WHERE gn.run_id = ? AND gn.generation = ? ORDER BY gn.position""",
        (run_id, generation),
    ).fetchall()
    distiller, fallback, usage, demoted, created_at = head
    return Knowledge(
        generation=generation,
        distiller=distiller,
        notes=tuple(note_from_row(row, run_id) for row in rows),
        fallback=fallback,
        usage=from_data(json.loads(usage), Usage),
        created_at=created_at,
        demoted=tuple(json.loads(demoted)),
    )


def notes_for_tasks(
    conn: sqlite3.Connection,
    task_hashes: Mapping[str, str],
    *,
    exclude_run: str,
    exclude_tasks: Iterable[str] = (),
) -> tuple[Note, ...]:
    """What earlier runs learnt about these tasks: the notes of each run's newest
    stored generation about a task here with the same content hash, and the shared
    notes of runs that had such a task; never a superseded note, nor one about an
    ``exclude_tasks`` task (hold-outs). Ids are the notes' global ids."""
    skip = set(exclude_tasks)
    newest = conn.execute(
        """SELECT g.run_id, max(g.generation) FROM generations g JOIN runs r
        ON r.run_id = g.run_id WHERE g.run_id != ? GROUP BY g.run_id
        ORDER BY r.first_seen, g.run_id""",
        (exclude_run,),
    ).fetchall()
    out: dict[int, Note] = {}
    for run_id, generation in newest:
        ran = conn.execute(
            "SELECT DISTINCT task_id, task_hash FROM attempts WHERE run_id = ?", (run_id,)
        )
        shared_ok = any(task_hashes.get(t) == h for t, h in ran)
        rows = conn.execute(
            f"""SELECT {NOTE_COLUMNS}, n.superseded_by FROM generation_notes gn
            JOIN notes n ON n.id = gn.note
            WHERE gn.run_id = ? AND gn.generation = ? ORDER BY gn.position""",
            (run_id, generation),
        ).fetchall()
        for row in rows:
            task, superseded = row[_COL["task_id"]], row[-1]
            if superseded is not None or task in skip:
                continue
            if shared_ok if task is None else task_hashes.get(task) == row[_COL["task_hash"]]:
                out.setdefault(int(row[0]), note_from_row(row[:-1], owner=None))
    return tuple(out.values())
