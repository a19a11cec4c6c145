"""The knowledge store: one SQLite database of evidence, notes and posts, with provenance.

A run writes here the evidence of each of its scored attempts (as it is
journalled), the notes each generation stored, which notes each attempt
received, and (the forum) posts; every row says which run, generation, task
(id and content hash) and attempts it comes from, and every note which
distiller and model wrote it, and when. Full-text search (FTS5, BM25
ranking) covers notes, evidence and posts.

One file serves one run (``knowledge.sqlite`` in the run directory) or many
(``ksi run --knowledge-db PATH``): runs on the same tasks then start from
what earlier ones learnt. Several processes may write it at once: it is in
WAL mode, and every write is one ``BEGIN IMMEDIATE`` transaction that waits
(a busy timeout) for another writer to finish, so nothing is lost and a
reader always sees whole transactions. A process killed in the middle of a
write leaves nothing of it: SQLite rolls the transaction back when the file
is next opened.

Only the standard library's :mod:`sqlite3` is used. The schema is versioned
with ``PRAGMA user_version``
(:data:`~ksi.knowledge.db_schema.SCHEMA_VERSION`); opening an older file
migrates it, a newer one is refused. This module holds the open store and
what runs write to it; the schema and its migrations are in
:mod:`ksi.knowledge.db_schema`, storing a generation's notes in
:mod:`ksi.knowledge.db_write`, reading them back in :mod:`ksi.knowledge.db_read`,
and search in :mod:`ksi.knowledge.queries`.

Note ids: a note keeps the id its run gave it (``g1-004``) within that run;
in the store it is also known by a global id, ``<run id>-<id>``, which is the
id other runs see it by (and give their attempts).
:func:`ksi.knowledge.queries.note_detail` takes either.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi.knowledge.db_read import has_generation, notes_for_tasks, read_generation
from ksi.knowledge.db_schema import (
    BUSY_TIMEOUT_SEC,
    MIGRATIONS,
    SCHEMA_VERSION,
    StoreBusy,
    StoreUnusable,
    checked_connection,
    scope,
    use_wal,
)
from ksi.knowledge.db_write import insert_generation
from ksi.knowledge.models import AttemptEvidence, Knowledge, Note

#: The store's file name in a run directory (its default location).
DB_FILE = "knowledge.sqlite"


@attrs.frozen
class StoredAttempt:
    """The evidence of one scored attempt, as the store keeps it."""

    run_id: str
    task_id: str
    #: The task's content hash (:func:`ksi.rundir.config.task_fingerprint`).
    task_hash: str
    evidence: AttemptEvidence
    agent: str = ""
    model: str | None = None
    finished_at: str = ""


@attrs.frozen
class Receipt:
    """Which notes one scored attempt received, and how it scored."""

    attempt_id: str
    task_id: str
    generation: int
    score: float
    solved: bool
    #: The stored generation whose notes it got, and their ids as its record lists them.
    knowledge_generation: int
    note_ids: tuple[str, ...]


@attrs.frozen
class StoredPost:
    """A forum post as the store keeps it (the forum writes them: :class:`ksi.knowledge.forum.
    Post`, whose files stay its full record; search finds them)."""

    uid: str
    run_id: str
    generation: int
    thread: str
    author: str
    text: str
    task_id: str | None = None
    task_hash: str | None = None
    #: The attempt or post ids it rests on.
    cites: tuple[str, ...] = ()
    created_at: str = ""


class KnowledgeDB:
    """One open store (see the module docstring); writes are transactions of their own.

    Not shared between threads: the driver, which alone writes a run's store,
    holds one; a query tool opens its own (``readonly=True``).
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, readonly: bool) -> None:
        self.conn = conn
        self.path = path
        self.readonly = readonly
        #: (run, generation) -> the row of each note id of that stored generation.
        self._sets: dict[tuple[str, int], dict[str, int]] = {}

    # -- opening ----------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path, *, readonly: bool = False) -> KnowledgeDB:
        """Open (and, writable, create or migrate) the store at ``path``."""
        path = Path(path)
        if readonly and not path.is_file():
            raise StoreUnusable(f"{path}: no knowledge store there")
        if not readonly:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn, version = checked_connection(path, readonly=readonly)
        db = cls(conn, path, readonly=readonly)
        try:
            if not readonly:
                db._migrate()
            elif version < SCHEMA_VERSION:
                raise StoreUnusable(
                    f"{path}: schema {version} is older than this KSI's ({SCHEMA_VERSION}); "
                    "a run on it migrates it"
                )
        except BaseException:
            conn.close()
            raise
        return db

    @staticmethod
    def check(path: Path) -> None:
        """Raise :class:`StoreUnusable` if a run could not use ``path`` as its store
        (writing nothing: a run that cannot start leaves nothing behind)."""
        if Path(path).is_file():
            conn, _ = checked_connection(Path(path), readonly=True)
            conn.close()

    def _migrate(self) -> None:
        # WAL: readers never block the writer, and a kill -9 loses no committed write.
        use_wal(self.conn, self.path)
        # NORMAL in WAL mode: a committed transaction survives a killed process; only a
        # power cut may lose the last ones, which the run's own files (journal, notes)
        # still hold and the next session writes again.
        self.conn.execute("PRAGMA synchronous = NORMAL")
        with self.write() as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            for target in sorted(v for v in MIGRATIONS if v > version):
                for statement in MIGRATIONS[target]:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {target}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> KnowledgeDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it is stored, or (an error, a kill) none of it.

        ``BEGIN IMMEDIATE`` takes the write lock up front, so two writers never
        both read and then collide: the second waits (the busy timeout).
        """
        if self.readonly:
            raise StoreUnusable(f"{self.path}: opened read-only")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreBusy(
                f"{self.path}: could not write ({exc}) for {BUSY_TIMEOUT_SEC:.0f} s; another "
                "process holds the store's write lock. The run can be resumed once it is free"
            ) from exc
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- runs and evidence ------------------------------------------------------------
    def register_run(self, run_id: str, run_dir: Path, created_at: str) -> None:
        with self.write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO runs (run_id, run_dir, first_seen) VALUES (?, ?, ?)",
                (run_id, str(run_dir), created_at),
            )

    def put_attempts(
        self, attempts: Sequence[StoredAttempt], receipts: Sequence[Receipt] = ()
    ) -> None:
        """Store (or, for a regraded or retried attempt, replace) attempts' evidence, and
        which notes they received, in one transaction."""
        receipt_rows = self._receipt_rows(attempts[0].run_id if attempts else "", receipts)
        if not attempts and not receipt_rows:
            return
        with self.write() as conn:
            conn.executemany(
                """INSERT INTO attempts (run_id, attempt_id, task_id, task_hash, generation,
                    attempt, score, solved, final_message, eval_output, files_touched, diff,
                    agent, model, finished_at, scope)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (run_id, attempt_id) DO UPDATE SET
                    score = excluded.score, solved = excluded.solved,
                    final_message = excluded.final_message, eval_output = excluded.eval_output,
                    files_touched = excluded.files_touched, diff = excluded.diff,
                    finished_at = excluded.finished_at""",
                [_attempt_row(a) for a in attempts],
            )
            conn.executemany(
                """INSERT INTO received (run_id, attempt_id, note, task_id, generation, score,
                    solved) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (run_id, attempt_id, note) DO UPDATE SET
                    score = excluded.score, solved = excluded.solved""",
                receipt_rows,
            )

    def attempt_scores(self, run_id: str) -> dict[str, float]:
        """Attempt id -> score of every attempt of ``run_id`` the store holds."""
        rows = self.conn.execute(
            "SELECT attempt_id, score FROM attempts WHERE run_id = ?", (run_id,)
        )
        return {a: float(s) for a, s in rows}

    def put_receipts(self, run_id: str, receipts: Sequence[Receipt]) -> None:
        """Record which notes attempts received (see :meth:`put_attempts`)."""
        rows = self._receipt_rows(run_id, receipts)
        if rows:
            with self.write() as conn:
                conn.executemany(
                    """INSERT INTO received (run_id, attempt_id, note, task_id, generation,
                        score, solved) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (run_id, attempt_id, note) DO UPDATE SET
                        score = excluded.score, solved = excluded.solved""",
                    rows,
                )

    def _receipt_rows(self, run_id: str, receipts: Sequence[Receipt]) -> list[tuple[Any, ...]]:
        """Rows of ``received``; a note id the stored generation does not hold is left
        out (the record and the store agree on every other)."""
        rows: list[tuple[Any, ...]] = []
        for r in receipts:
            known = self._set_rows(run_id, r.knowledge_generation)
            for note_id in r.note_ids:
                row = known.get(note_id)
                if row is not None:
                    rows.append(
                        (run_id, r.attempt_id, row, r.task_id, r.generation, r.score, r.solved)
                    )
        return rows

    def received_attempts(self, run_id: str) -> set[str]:
        rows = self.conn.execute(
            "SELECT DISTINCT attempt_id FROM received WHERE run_id = ?", (run_id,)
        )
        return {a for (a,) in rows}

    def put_posts(self, posts: Sequence[StoredPost]) -> None:
        """Store forum posts (a post already stored, by uid, is kept as it is)."""
        if not posts:
            return
        with self.write() as conn:
            conn.executemany(
                """INSERT OR IGNORE INTO posts (uid, run_id, generation, task_id, task_hash,
                    thread, author, text, cites, created_at, scope)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [
                    (
                        p.uid,
                        p.run_id,
                        p.generation,
                        p.task_id,
                        p.task_hash,
                        p.thread,
                        p.author,
                        p.text,
                        json.dumps(list(p.cites)),
                        p.created_at,
                        scope(p.run_id, p.task_id, p.generation, "post"),
                    )
                    for p in posts
                ],
            )

    # -- a run's stored generations -----------------------------------------------------
    def has_generation(self, run_id: str, generation: int) -> bool:
        return has_generation(self.conn, run_id, generation)

    def generation(self, run_id: str, generation: int) -> Knowledge | None:
        """The notes ``run_id`` stored after ``generation`` (ids as that run knows them)."""
        return read_generation(self.conn, run_id, generation)

    def stored_generations(self, run_id: str) -> list[int]:
        rows = self.conn.execute(
            "SELECT generation FROM generations WHERE run_id = ? ORDER BY generation", (run_id,)
        )
        return [int(g) for (g,) in rows]

    def put_generation(
        self,
        run_id: str,
        knowledge: Knowledge,
        *,
        task_hashes: Mapping[str, str],
        model: str | None = None,
    ) -> Knowledge:
        """Store ``knowledge`` as ``run_id``'s notes after its generation, in one transaction.

        A note the store holds already (carried from an earlier generation, or
        read from another run) is linked, not copied; a new one is added (its id
        made unique within the run if a distiller reused one for another text).
        Notes it ``replaces`` are marked superseded by it. Which of the notes are
        demoted (:data:`~ksi.knowledge.models.DEMOTE_AFTER`) is decided now and
        kept with them. Storing a generation that is stored already returns the
        stored one, unchanged: a resume never stores twice.
        """
        with self.write() as conn:
            stored = insert_generation(conn, run_id, knowledge, task_hashes, model)
        self._sets.pop((run_id, knowledge.generation), None)
        return stored

    def _set_rows(self, run_id: str, generation: int) -> dict[str, int]:
        """Note id (as ``run_id`` knows it) -> row, for one stored generation (cached:
        a stored generation never changes)."""
        key = (run_id, generation)
        if key not in self._sets:
            rows = self.conn.execute(
                """SELECT n.id, n.run_id, n.local_id, n.uid FROM generation_notes gn
                JOIN notes n ON n.id = gn.note WHERE gn.run_id = ? AND gn.generation = ?""",
                (run_id, generation),
            )
            found = {
                (local if owner == run_id else uid): int(row) for row, owner, local, uid in rows
            }
            if not found and not self.has_generation(run_id, generation):
                return {}  # not stored yet: asked again once it is
            self._sets[key] = found
        return self._sets[key]

    # -- what a new run starts from ---------------------------------------------------
    def notes_for_tasks(
        self,
        task_hashes: Mapping[str, str],
        *,
        exclude_run: str,
        exclude_tasks: Iterable[str] = (),
    ) -> tuple[Note, ...]:
        """What earlier runs learnt about these tasks (see :func:`~ksi.knowledge.db_read.
        notes_for_tasks`); ids are the notes' global ids."""
        return notes_for_tasks(
            self.conn, task_hashes, exclude_run=exclude_run, exclude_tasks=exclude_tasks
        )


def _attempt_row(a: StoredAttempt) -> tuple[Any, ...]:
    ev = a.evidence
    return (
        a.run_id,
        ev.attempt_id,
        a.task_id,
        a.task_hash,
        ev.generation,
        ev.attempt,
        ev.score,
        int(ev.solved),
        ev.final_message,
        ev.eval_output,
        "\n".join(ev.files_touched),
        ev.diff,
        a.agent,
        a.model,
        a.finished_at,
        scope(a.run_id, a.task_id, ev.generation, "attempt"),
    )


def store_size(path: Path) -> int:
    """Bytes the store takes on disk (its file and its write-ahead log)."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            total += os.stat(f"{path}{suffix}").st_size
    return total
