"""The knowledge store's schema: its tables, their migrations, and opening a file as a store.

What :class:`~ksi.knowledge.db.KnowledgeDB` is built on: the versioned
schema (``PRAGMA user_version``; opening an older file migrates it, a newer
one is refused), the ``scope`` words that let a full-text search filter by
run, task, generation and kind, and the checks a file passes before a run
writes to it (SQLite, FTS5, not another program's database).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

from ksi.errors import RunError, UserInputError

#: The schema this KSI writes (``PRAGMA user_version``).
SCHEMA_VERSION = 1
#: How long a write waits for another process's write to finish before failing.
BUSY_TIMEOUT_SEC = 120.0

TOKENIZE = "porter unicode61 remove_diacritics 2"

#: Each migration takes the schema from the version before it to its own.
MIGRATIONS: dict[int, tuple[str, ...]] = {
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


def checked_connection(path: Path, *, readonly: bool) -> tuple[sqlite3.Connection, int]:
    """A connection to ``path`` and its schema version, once it is known to be a store
    this KSI can use (or a new, empty file)."""
    try:
        conn = _connect(path, readonly=readonly)
        # One statement, so one snapshot: read apart, another process creating the store
        # could commit its tables between them (version 0 and tables: "something else").
        row = conn.execute(
            "SELECT (SELECT user_version FROM pragma_user_version),"
            " (SELECT count(*) FROM sqlite_master)"
        ).fetchone()
        version, tables = int(row[0]), int(row[1])
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


def use_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Put the store in WAL mode (a file's mode, set once by whichever process comes first).

    SQLite answers a mode change with "database is locked" at once, without
    waiting out the busy timeout, while another connection uses the file (two
    runs creating one ``--knowledge-db`` together): the change is tried again
    until the timeout, and a mode another process set meanwhile is as good.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_SEC
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")  # in memory: stays "memory"
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            if time.monotonic() >= deadline:
                raise StoreBusy(
                    f"{path}: could not switch it to WAL mode ({exc}) for "
                    f"{BUSY_TIMEOUT_SEC:.0f} s; another process holds it"
                ) from exc
        time.sleep(0.01)
