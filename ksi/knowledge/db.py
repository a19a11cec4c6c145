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
with ``PRAGMA user_version`` (:data:`SCHEMA_VERSION`); opening an older file
migrates it, a newer one is refused. Queries are in :mod:`ksi.knowledge.queries`.

Note ids: a note keeps the id its run gave it (``g1-004``) within that run;
in the store it is also known by a global id, ``<run id>-<id>``, which is the
id other runs see it by (and give their attempts). :meth:`KnowledgeDB.find_note`
takes either.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi.errors import RunError, UserInputError
from ksi.knowledge.models import (
    DEMOTE_AFTER,
    AttemptEvidence,
    Knowledge,
    Note,
    text_key,
)
from ksi.models import Usage
from ksi.serialization import from_data, to_data

#: The store's file name in a run directory (its default location).
DB_FILE = "knowledge.sqlite"
#: The schema this KSI writes (``PRAGMA user_version``).
SCHEMA_VERSION = 1
#: How long a write waits for another process's write to finish before failing.
BUSY_TIMEOUT_SEC = 120.0

TOKENIZE = "porter unicode61 remove_diacritics 2"

#: Each migration takes the schema from the version before it to its own.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            run_dir TEXT NOT NULL,
            first_seen TEXT NOT NULL
        )""",
        """CREATE TABLE attempts (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL,
            attempt_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            task_hash TEXT NOT NULL,
            generation INTEGER NOT NULL,
            attempt INTEGER NOT NULL,
            score REAL NOT NULL,
            solved INTEGER NOT NULL,
            final_message TEXT NOT NULL,
            eval_output TEXT NOT NULL,
            files_touched TEXT NOT NULL,
            diff TEXT NOT NULL,
            agent TEXT NOT NULL,
            model TEXT,
            finished_at TEXT NOT NULL,
            scope TEXT NOT NULL,
            UNIQUE (run_id, attempt_id)
        )""",
        "CREATE INDEX attempts_task ON attempts (task_id, task_hash)",
        """CREATE TABLE notes (
            id INTEGER PRIMARY KEY,
            uid TEXT NOT NULL UNIQUE,
            run_id TEXT NOT NULL,
            local_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            task_id TEXT,
            task_hash TEXT,
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            applies_when TEXT NOT NULL,
            attempts TEXT NOT NULL,
            replaces TEXT NOT NULL,
            text_key TEXT NOT NULL,
            distiller TEXT NOT NULL,
            model TEXT,
            created_at TEXT NOT NULL,
            superseded_by TEXT,
            scope TEXT NOT NULL,
            UNIQUE (run_id, local_id)
        )""",
        "CREATE INDEX notes_task ON notes (task_id, task_hash)",
        "CREATE INDEX notes_key ON notes (text_key)",
        """CREATE TABLE generations (
            run_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            distiller TEXT NOT NULL,
            fallback TEXT NOT NULL,
            usage TEXT NOT NULL,
            demoted TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (run_id, generation)
        )""",
        """CREATE TABLE generation_notes (
            run_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            position INTEGER NOT NULL,
            note INTEGER NOT NULL REFERENCES notes (id),
            PRIMARY KEY (run_id, generation, position)
        )""",
        "CREATE INDEX generation_notes_note ON generation_notes (note)",
        """CREATE TABLE received (
            run_id TEXT NOT NULL,
            attempt_id TEXT NOT NULL,
            note INTEGER NOT NULL REFERENCES notes (id),
            task_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            score REAL NOT NULL,
            solved INTEGER NOT NULL,
            PRIMARY KEY (run_id, attempt_id, note)
        )""",
        "CREATE INDEX received_note ON received (note)",
        """CREATE TABLE posts (
            id INTEGER PRIMARY KEY,
            uid TEXT NOT NULL UNIQUE,
            run_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            task_id TEXT,
            task_hash TEXT,
            thread TEXT NOT NULL,
            author TEXT NOT NULL,
            text TEXT NOT NULL,
            cites TEXT NOT NULL,
            created_at TEXT NOT NULL,
            scope TEXT NOT NULL
        )""",
        # ``scope`` holds one word per filter value (run, task, generation, kind: see
        # :func:`scope`), so a filter narrows the full-text match itself.
        f"""CREATE VIRTUAL TABLE notes_fts USING fts5 (
            text, applies_when, scope,
            content='notes', content_rowid='id', tokenize='{TOKENIZE}', prefix='2 3'
        )""",
        f"""CREATE VIRTUAL TABLE attempts_fts USING fts5 (
            final_message, eval_output, diff, files_touched, scope,
            content='attempts', content_rowid='id', tokenize='{TOKENIZE}', prefix='2 3'
        )""",
        f"""CREATE VIRTUAL TABLE posts_fts USING fts5 (
            text, scope, content='posts', content_rowid='id', tokenize='{TOKENIZE}',
            prefix='2 3'
        )""",
        # The full-text indexes follow their tables (external content: the text is kept once).
        """CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN
            INSERT INTO notes_fts (rowid, text, applies_when, scope)
            VALUES (new.id, new.text, new.applies_when, new.scope);
        END""",
        """CREATE TRIGGER attempts_ai AFTER INSERT ON attempts BEGIN
            INSERT INTO attempts_fts (rowid, final_message, eval_output, diff, files_touched,
                                      scope)
            VALUES (new.id, new.final_message, new.eval_output, new.diff, new.files_touched,
                    new.scope);
        END""",
        """CREATE TRIGGER attempts_au AFTER UPDATE ON attempts BEGIN
            INSERT INTO attempts_fts (attempts_fts, rowid, final_message, eval_output, diff,
                                      files_touched, scope)
            VALUES ('delete', old.id, old.final_message, old.eval_output, old.diff,
                    old.files_touched, old.scope);
            INSERT INTO attempts_fts (rowid, final_message, eval_output, diff, files_touched,
                                      scope)
            VALUES (new.id, new.final_message, new.eval_output, new.diff, new.files_touched,
                    new.scope);
        END""",
        """CREATE TRIGGER posts_ai AFTER INSERT ON posts BEGIN
            INSERT INTO posts_fts (rowid, text, scope) VALUES (new.id, new.text, new.scope);
        END""",
    ),
}


class StoreUnusable(UserInputError):
    """A knowledge store that cannot be opened: not SQLite, made by a newer KSI, no FTS5."""


class StoreBusy(RunError):
    """Another process held the store's write lock past the busy timeout."""


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


def scope_word(field: str, value: object) -> str:
    """The one word that stands for ``field = value`` in a row's ``scope`` (a hash, so
    any task id or run id is one token the tokenizer keeps whole)."""
    digest = hashlib.sha256(f"{field}\0{value}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"{field}{digest[:16]}"


def scope(run_id: str, task_id: str | None, generation: int, kind: str) -> str:
    """A row's ``scope``: the words :func:`scope_word` makes of what search filters by."""
    return " ".join(
        (
            scope_word("r", run_id),
            scope_word("t", task_id),
            scope_word("g", generation),
            scope_word("k", kind),
        )
    )


def global_id(run_id: str, note_id: str) -> str:
    """The id other runs know a run's note by."""
    return f"{run_id}-{note_id}"


def _fts5_available(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.ksi_probe USING fts5 (x)")
        conn.execute("DROP TABLE temp.ksi_probe")
    except sqlite3.OperationalError:
        return False
    return True


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    if readonly:
        uri = f"{Path(path).resolve().as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_SEC, isolation_level=None)
    else:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SEC, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SEC * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _checked(path: Path, *, readonly: bool) -> tuple[sqlite3.Connection, int]:
    """A connection to ``path`` and its schema version, once it is known to be a store
    this KSI can use (or a new, empty file)."""
    try:
        conn = _connect(path, readonly=readonly)
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise StoreUnusable(f"{path}: not a knowledge store ({exc})") from exc
    problem = ""
    if not _fts5_available(conn):
        problem = (
            f"this Python's SQLite ({sqlite3.sqlite_version}) has no FTS5, which the "
            "knowledge store needs; use a Python built with it"
        )
    elif version > SCHEMA_VERSION:
        problem = (
            f"written by a newer KSI (schema {version}; this one reads up to "
            f"{SCHEMA_VERSION}); upgrade KSI to use it"
        )
    elif version == 0 and tables:
        problem = "an SQLite database of something else, not a knowledge store"
    if problem:
        conn.close()
        raise StoreUnusable(f"{path}: {problem}")
    return conn, version


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
        conn, version = _checked(path, readonly=readonly)
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
            conn, _ = _checked(Path(path), readonly=True)
            conn.close()

    def _migrate(self) -> None:
        # WAL: readers never block the writer, and a kill -9 loses no committed write.
        # Changing the mode needs no other connection in the middle of a write: it waits.
        mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            self.conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode: a committed transaction survives a killed process; only a
        # power cut may lose the last ones, which the run's own files (journal, notes)
        # still hold and the next session writes again.
        self.conn.execute("PRAGMA synchronous = NORMAL")
        with self.write() as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            for target in sorted(v for v in _MIGRATIONS if v > version):
                for statement in _MIGRATIONS[target]:
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
        row = self.conn.execute(
            "SELECT 1 FROM generations WHERE run_id = ? AND generation = ?", (run_id, generation)
        ).fetchone()
        return row is not None

    def generation(self, run_id: str, generation: int) -> Knowledge | None:
        """The notes ``run_id`` stored after ``generation`` (ids as that run knows them)."""
        head = self.conn.execute(
            """SELECT distiller, fallback, usage, demoted, created_at FROM generations
            WHERE run_id = ? AND generation = ?""",
            (run_id, generation),
        ).fetchone()
        if head is None:
            return None
        rows = self.conn.execute(
            f"""SELECT {_NOTE_COLUMNS} FROM generation_notes gn JOIN notes n ON n.id = gn.note
            WHERE gn.run_id = ? AND gn.generation = ? ORDER BY gn.position""",
            (run_id, generation),
        ).fetchall()
        distiller, fallback, usage, demoted, created_at = head
        return Knowledge(
            generation=generation,
            distiller=distiller,
            notes=tuple(_note(row, run_id) for row in rows),
            fallback=fallback,
            usage=from_data(json.loads(usage), Usage),
            created_at=created_at,
            demoted=tuple(json.loads(demoted)),
        )

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
            stored = self._insert_generation(conn, run_id, knowledge, task_hashes, model)
        self._sets.pop((run_id, knowledge.generation), None)
        return stored

    def _insert_generation(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        knowledge: Knowledge,
        task_hashes: Mapping[str, str],
        model: str | None,
    ) -> Knowledge:
        g = knowledge.generation
        if self.has_generation(run_id, g):
            stored = self.generation(run_id, g)
            assert stored is not None
            return stored
        rows: list[int] = []
        notes: list[Note] = []
        added: list[tuple[Note, int]] = []
        created = knowledge.created_at
        for note in knowledge.notes:
            row, note, new = self._link_or_add(
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
                old_row = self._find_row(conn, run_id, old)
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

    def _find_row(self, conn: sqlite3.Connection, run_id: str, note_id: str) -> int | None:
        """The row of a note as ``run_id`` names it: a global id, or its own id."""
        found = conn.execute(
            "SELECT id FROM notes WHERE uid = ? OR (run_id = ? AND local_id = ?) "
            "ORDER BY run_id = ? DESC LIMIT 1",
            (note_id, run_id, note_id, run_id),
        ).fetchone()
        return None if found is None else int(found[0])

    def _link_or_add(
        self,
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
            f"SELECT {_NOTE_COLUMNS} FROM notes n WHERE n.uid = ? OR (n.run_id = ? AND "
            "n.local_id = ?) ORDER BY n.uid = ? DESC",
            (note.id, run_id, note.id, note.id),
        ).fetchall()
        for row in found:
            if _same(row, note):
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
        """What earlier runs learnt about these tasks: the notes of each run's newest
        stored generation about a task here with the same content hash, and the shared
        notes of runs that had such a task; never a superseded note, nor one about an
        ``exclude_tasks`` task (hold-outs). Ids are the notes' global ids."""
        skip = set(exclude_tasks)
        newest = self.conn.execute(
            """SELECT g.run_id, max(g.generation) FROM generations g JOIN runs r
            ON r.run_id = g.run_id WHERE g.run_id != ? GROUP BY g.run_id
            ORDER BY r.first_seen, g.run_id""",
            (exclude_run,),
        ).fetchall()
        out: dict[int, Note] = {}
        for run_id, generation in newest:
            ran = self.conn.execute(
                "SELECT DISTINCT task_id, task_hash FROM attempts WHERE run_id = ?", (run_id,)
            )
            shared_ok = any(task_hashes.get(t) == h for t, h in ran)
            rows = self.conn.execute(
                f"""SELECT {_NOTE_COLUMNS}, n.superseded_by FROM generation_notes gn
                JOIN notes n ON n.id = gn.note
                WHERE gn.run_id = ? AND gn.generation = ? ORDER BY gn.position""",
                (run_id, generation),
            ).fetchall()
            for row in rows:
                task, superseded = row[_COL["task_id"]], row[-1]
                if superseded is not None or task in skip:
                    continue
                if shared_ok if task is None else task_hashes.get(task) == row[_COL["task_hash"]]:
                    out.setdefault(int(row[0]), _note(row[:-1], owner=None))
        return tuple(out.values())


_NOTE_FIELDS = (
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
_NOTE_COLUMNS = ", ".join(f"n.{f}" for f in _NOTE_FIELDS)
_COL = {f: i for i, f in enumerate(_NOTE_FIELDS)}


def _note(row: Sequence[Any], owner: str | None) -> Note:
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


def _same(row: Sequence[Any], note: Note) -> bool:
    c = _COL
    return bool(
        row[c["kind"]] == note.kind
        and row[c["task_id"]] == note.task_id
        and row[c["text"]] == note.text
        and row[c["applies_when"]] == note.applies_when
    )


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
