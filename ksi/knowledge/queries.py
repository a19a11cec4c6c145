"""Asking the knowledge store questions: search, one note, one task's history, totals.

Every function here only reads, so it works on a store opened read-only
(``KnowledgeDB.open(path, readonly=True)``), which is how a query tool an
agent calls (an MCP server) should open it; each answers with typed values.
``exclude_tasks`` keeps tasks out of every answer: a run's hold-outs, whose
evidence an agent must never see.

Search is FTS5 with BM25 ranking over notes, evidence (each scored attempt's
final message, eval output tail, diff and files touched) and posts. A query is
words (every one must match; ``word*`` matches a prefix), never FTS5 syntax,
so nothing a user or an agent types can make it fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ksi.knowledge.db import KnowledgeDB, store_size
from ksi.knowledge.db_schema import scope_word
from ksi.knowledge.models import DEMOTE_AFTER, Note

#: What ``search`` looks in (``--kind``: a note kind, or one of these for the others).
SOURCES = ("note", "attempt", "post")
_WORD = re.compile(r"\w+\*?")
#: Words too common to say what a task is about (left out of a task's retrieval query).
_STOPWORDS = frozenset(
    re.split(
        r"\s+",
        "a an and are as at be by do does for from has have how i if in into is it its of on "
        "or so that the their then there these this to was were what when where which while "
        "who will with you your should must can may use using",
    )
)


def _quoted(word: str) -> str:
    prefix = word.endswith("*")
    word = word.rstrip("*")
    return f'"{word}"*' if prefix else f'"{word}"'


def all_of(text: str) -> str:
    """An FTS5 query matching text that holds every word of ``text`` ("" : no words)."""
    return " ".join(_quoted(w) for w in _WORD.findall(text) if w.rstrip("*"))


def any_of(text: str, most: int = 16) -> str:
    """An FTS5 query matching text that holds any telling word of ``text`` (a task's
    prompt: notes about the same names and errors rank first)."""
    words: list[str] = []
    for word in _WORD.findall(text.replace("*", " ")):
        low = word.lower()
        if low in _STOPWORDS or len(low) < 2 or low in words:
            continue
        words.append(low)
        if len(words) == most:
            break
    return " OR ".join(f'"{w}"' for w in words)


@attrs.frozen
class SearchHit:
    """One thing search found."""

    #: ``note``, ``attempt`` or ``post``.
    source: str
    #: A note's global id, ``<run id>:<attempt id>`` for evidence, a post's uid.
    id: str
    run_id: str
    task_id: str | None
    generation: int
    #: The note's kind; ``attempt`` or ``post`` for the others.
    kind: str
    #: The matching passage, matched words between ``«`` and ``»``.
    snippet: str
    #: BM25 relevance (higher is closer; comparable within one query).
    relevance: float
    #: A note's lifecycle: ``active``, ``superseded`` or ``demoted`` ("" for the others).
    status: str = ""
    #: An attempt's score ("" for the others: None).
    score: float | None = None


@attrs.frozen
class Receiver:
    """An attempt that received a note, and how it scored."""

    run_id: str
    attempt_id: str
    task_id: str
    generation: int
    score: float
    solved: bool


@attrs.frozen
class Cited:
    """An attempt a note cites, with its score when the store holds its evidence."""

    attempt_id: str
    score: float | None = None
    solved: bool | None = None


@attrs.frozen
class NoteDetail:
    """One note, where it comes from, what it cites, and who received it."""

    uid: str
    note: Note
    run_id: str
    run_dir: str
    task_hash: str | None
    distiller: str
    model: str | None
    created_at: str
    status: str
    superseded_by: str | None
    #: Notes this one superseded (their global ids).
    supersedes: tuple[str, ...]
    cites: tuple[Cited, ...]
    receivers: tuple[Receiver, ...]
    #: ``(run id, generation)`` of every stored generation that holds it.
    stored_in: tuple[tuple[str, int], ...]

    @property
    def solve_rate(self) -> float | None:
        """Of the attempts that received it, the share that solved (None: none did)."""
        if not self.receivers:
            return None
        return sum(1 for r in self.receivers if r.solved) / len(self.receivers)


@attrs.frozen
class TaskAttempt:
    run_id: str
    attempt_id: str
    generation: int
    score: float
    solved: bool
    final_message: str


@attrs.frozen
class TaskHistory:
    """Every scored attempt at one task the store holds, and the notes about it."""

    task_id: str
    attempts: tuple[TaskAttempt, ...]
    notes: tuple[SearchHit, ...]


@attrs.frozen
class StoreStats:
    path: str
    schema_version: int
    size_bytes: int
    runs: int
    attempts: int
    tasks: int
    notes: int
    notes_by_kind: dict[str, int]
    notes_by_status: dict[str, int]
    stored_generations: int
    receipts: int
    posts: int


_DEMOTED = f"""(SELECT count(*) >= {DEMOTE_AFTER} AND max(solved) = 0 FROM received
    WHERE received.note = n.id)"""
_STATUS = f"""CASE WHEN n.superseded_by IS NOT NULL THEN 'superseded'
    WHEN {_DEMOTED} THEN 'demoted' ELSE 'active' END"""


def _in(column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
    if not values:
        return "", []
    return f" AND ({column} IS NULL OR {column} NOT IN ({','.join('?' * len(values))}))", list(
        values
    )


#: Search ranks at most this many matches of a query (the newest): a word found in
#: nearly every note tells BM25 nothing, and ranking them all would cost a query's time.
RANKED_MATCHES = 5_000


def _scope_filter(
    db: KnowledgeDB,
    *,
    task: str | None,
    generation: int | None,
    run: str | None,
    kind: str | None,
) -> str | None:
    """The FTS5 terms that keep only rows of these values (None: no row can match)."""
    terms = []
    if task is not None:
        terms.append(f'"{scope_word("t", task)}"')
    if generation is not None:
        terms.append(f'"{scope_word("g", generation)}"')
    if kind is not None:
        terms.append(f'"{scope_word("k", kind)}"')
    if run:
        runs = [
            r
            for (r,) in db.conn.execute(
                "SELECT run_id FROM runs WHERE instr(run_id, ?) = 1", (run,)
            )
        ]
        if not runs:
            return None
        terms.append("(" + " OR ".join(f'"{scope_word("r", r)}"' for r in runs) + ")")
    return " AND ".join(f"scope : {t}" for t in terms)


def search(
    db: KnowledgeDB,
    query: str,
    *,
    task: str | None = None,
    kind: str | None = None,
    generation: int | None = None,
    run: str | None = None,
    exclude_tasks: Iterable[str] = (),
    limit: int = 20,
) -> tuple[SearchHit, ...]:
    """The best ``limit`` matches of ``query`` in notes, evidence and posts, best first.

    ``kind`` is a note kind (only notes), or ``attempt`` / ``post``; ``run`` a
    run id (or its start); ``exclude_tasks`` is never answered about. At most
    :data:`RANKED_MATCHES` matches (the newest) of each source are ranked.
    """
    words = all_of(query)
    if not words:
        return ()
    skip = sorted(set(exclude_tasks))
    hits: list[SearchHit] = []
    sources = SOURCES if kind is None else (kind if kind in SOURCES else "note",)
    note_kind = kind if kind is not None and kind not in SOURCES else None
    for source in sources:
        narrow = _scope_filter(
            db,
            task=task,
            generation=generation,
            run=run,
            kind=note_kind if source == "note" else None,
        )
        if narrow is None:
            return ()
        match = f"({words}) AND {narrow}" if narrow else words
        if skip:
            held = " OR ".join(f'"{scope_word("t", t)}"' for t in skip)
            match = f"({match}) NOT scope : ({held})"
        hits.extend(_SEARCHES[source](db, match, words, skip, limit))
    hits.sort(key=lambda h: -h.relevance)
    return tuple(hits[:limit])


#: BM25 weights of each full-text table's columns (``scope`` only filters: weight 0).
_WEIGHTS = {"notes_fts": "1.0, 0.5, 0.0", "attempts_fts": "1.0, 1.0, 1.0, 1.0, 0.0",
            "posts_fts": "1.0, 0.0"}  # fmt: skip


def _ranked(fts: str, limit: int) -> str:
    """Rowid and BM25 of the best ``limit`` of the newest matches (then the query reads
    their fields, and a snippet of the words asked for)."""
    return f"""WITH top AS (
        SELECT rowid AS id, r FROM (
            SELECT rowid, bm25({fts}, {_WEIGHTS[fts]}) AS r FROM {fts} WHERE {fts} MATCH ?
            ORDER BY rowid DESC LIMIT {RANKED_MATCHES}
        ) ORDER BY r LIMIT {int(limit)}
    )"""


def _notes(
    db: KnowledgeDB, match: str, words: str, skip: Sequence[str], limit: int
) -> list[SearchHit]:
    more, extra = _in("n.task_id", skip)
    rows = db.conn.execute(
        f"""{_ranked("notes_fts", limit)}
        SELECT n.uid, n.run_id, n.task_id, n.generation, n.kind,
            snippet(notes_fts, 0, '«', '»', '…', 16), top.r, {_STATUS}
        FROM top JOIN notes_fts ON notes_fts.rowid = top.id JOIN notes n ON n.id = top.id
        WHERE notes_fts MATCH ?{more} ORDER BY top.r""",
        (match, words, *extra),
    )
    return [
        SearchHit("note", uid, run_id, t, g, k, snip, -r, status)
        for uid, run_id, t, g, k, snip, r, status in rows
    ]


def _attempts(
    db: KnowledgeDB, match: str, words: str, skip: Sequence[str], limit: int
) -> list[SearchHit]:
    more, extra = _in("a.task_id", skip)
    rows = db.conn.execute(
        f"""{_ranked("attempts_fts", limit)}
        SELECT a.run_id, a.attempt_id, a.task_id, a.generation, a.score,
            snippet(attempts_fts, -1, '«', '»', '…', 16), top.r
        FROM top JOIN attempts_fts ON attempts_fts.rowid = top.id JOIN attempts a ON a.id = top.id
        WHERE attempts_fts MATCH ?{more} ORDER BY top.r""",
        (match, words, *extra),
    )
    return [
        SearchHit("attempt", f"{run_id}:{aid}", run_id, t, g, "attempt", snip, -r, "", score)
        for run_id, aid, t, g, score, snip, r in rows
    ]


def _posts(
    db: KnowledgeDB, match: str, words: str, skip: Sequence[str], limit: int
) -> list[SearchHit]:
    more, extra = _in("p.task_id", skip)
    rows = db.conn.execute(
        f"""{_ranked("posts_fts", limit)}
        SELECT p.uid, p.run_id, p.task_id, p.generation,
            snippet(posts_fts, 0, '«', '»', '…', 16), top.r
        FROM top JOIN posts_fts ON posts_fts.rowid = top.id JOIN posts p ON p.id = top.id
        WHERE posts_fts MATCH ?{more} ORDER BY top.r""",
        (match, words, *extra),
    )
    return [
        SearchHit("post", uid, run_id, t, g, "post", snip, -r)
        for uid, run_id, t, g, snip, r in rows
    ]


_SEARCHES = {"note": _notes, "attempt": _attempts, "post": _posts}


def note_detail(
    db: KnowledgeDB,
    note_id: str,
    *,
    run_id: str | None = None,
    exclude_tasks: Iterable[str] = (),
) -> NoteDetail | None:
    """The note ``note_id`` (a global id, or, with ``run_id``, that run's own id); None
    when there is none, or it is about an ``exclude_tasks`` task (whose receivers are
    left out of any other note's too)."""
    skip = set(exclude_tasks)
    row = db.conn.execute(
        f"""SELECT n.id, n.uid, n.run_id, n.local_id, n.generation, n.task_id, n.task_hash,
            n.kind, n.text, n.applies_when, n.attempts, n.replaces, n.distiller, n.model,
            n.created_at, n.superseded_by, {_STATUS}, coalesce(r.run_dir, '')
        FROM notes n LEFT JOIN runs r ON r.run_id = n.run_id
        WHERE n.uid = ? OR (n.run_id = ? AND n.local_id = ?)
        ORDER BY n.uid = ? DESC LIMIT 1""",
        (note_id, run_id, note_id, note_id),
    ).fetchone()
    if row is None:
        return None
    (rowid, uid, owner, local, gen, task, task_hash, kind, text, when, cites, replaces,
     distiller, model, created, superseded_by, status, run_dir) = row  # fmt: skip
    if task in skip:
        return None
    note = Note(
        id=local,
        kind=kind,
        text=text,
        task_id=task,
        applies_when=when,
        attempts=tuple(json.loads(cites)),
        generation=int(gen),
        replaces=tuple(json.loads(replaces)),
    )
    scores = {
        a: (float(s), bool(v))
        for a, s, v in db.conn.execute(
            "SELECT attempt_id, score, solved FROM attempts WHERE run_id = ?", (owner,)
        )
        if a in set(note.attempts)
    }
    cited = tuple(Cited(a, *scores[a]) if a in scores else Cited(a) for a in note.attempts)
    receivers = tuple(
        Receiver(r, a, t, int(g), float(s), bool(v))
        for r, a, t, g, s, v in db.conn.execute(
            """SELECT run_id, attempt_id, task_id, generation, score, solved FROM received
            WHERE note = ? ORDER BY run_id, generation, attempt_id""",
            (rowid,),
        )
        if t not in skip
    )
    supersedes = tuple(
        u for (u,) in db.conn.execute("SELECT uid FROM notes WHERE superseded_by = ?", (uid,))
    )
    stored_in = tuple(
        (r, int(g))
        for r, g in db.conn.execute(
            "SELECT DISTINCT run_id, generation FROM generation_notes WHERE note = ? "
            "ORDER BY run_id, generation",
            (rowid,),
        )
    )
    return NoteDetail(
        uid=uid,
        note=note,
        run_id=owner,
        run_dir=run_dir,
        task_hash=task_hash,
        distiller=distiller,
        model=model,
        created_at=created,
        status=status,
        superseded_by=superseded_by,
        supersedes=supersedes,
        cites=cited,
        receivers=receivers,
        stored_in=stored_in,
    )


def task_history(
    db: KnowledgeDB,
    task_id: str,
    *,
    task_hash: str | None = None,
    limit: int = 200,
    exclude_tasks: Iterable[str] = (),
) -> TaskHistory:
    """Every scored attempt at ``task_id`` (of that content hash, if given), newest run
    last, and the notes about it that nothing superseded (nothing for an
    ``exclude_tasks`` task)."""
    if task_id in set(exclude_tasks):
        return TaskHistory(task_id, (), ())
    where, args = "task_id = ?", [task_id]
    if task_hash is not None:
        where, args = where + " AND task_hash = ?", [*args, task_hash]
    attempts = tuple(
        TaskAttempt(r, a, int(g), float(s), bool(v), m)
        for r, a, g, s, v, m in db.conn.execute(
            f"""SELECT a.run_id, a.attempt_id, a.generation, a.score, a.solved, a.final_message
            FROM attempts a LEFT JOIN runs ON runs.run_id = a.run_id WHERE a.{where}
            ORDER BY runs.first_seen, a.generation, a.attempt LIMIT ?""",
            (*args, limit),
        )
    )
    notes = tuple(
        SearchHit("note", uid, r, task_id, int(g), k, text[:400], 0.0, status)
        for uid, r, g, k, text, status in db.conn.execute(
            f"""SELECT n.uid, n.run_id, n.generation, n.kind, n.text, {_STATUS} FROM notes n
            WHERE n.{where} AND n.superseded_by IS NULL ORDER BY n.generation DESC LIMIT ?""",
            (*args, limit),
        )
    )
    return TaskHistory(task_id, attempts, notes)


def stats(db: KnowledgeDB) -> StoreStats:
    """How much the store holds, and how big it is."""

    def one(sql: str) -> int:
        return int(db.conn.execute(sql).fetchone()[0])

    by_kind = dict(db.conn.execute("SELECT kind, count(*) FROM notes GROUP BY kind ORDER BY kind"))
    by_status = dict(
        db.conn.execute(f"SELECT {_STATUS} AS s, count(*) FROM notes n GROUP BY s ORDER BY s")
    )
    return StoreStats(
        path=str(db.path),
        schema_version=one("PRAGMA user_version"),
        size_bytes=store_size(db.path),
        runs=one("SELECT count(*) FROM runs"),
        attempts=one("SELECT count(*) FROM attempts"),
        tasks=one("SELECT count(*) FROM (SELECT DISTINCT task_id, task_hash FROM attempts)"),
        notes=one("SELECT count(*) FROM notes"),
        notes_by_kind={str(k): int(v) for k, v in by_kind.items()},
        notes_by_status={str(k): int(v) for k, v in by_status.items()},
        stored_generations=one("SELECT count(*) FROM generations"),
        receipts=one("SELECT count(*) FROM received"),
        posts=one("SELECT count(*) FROM posts"),
    )


__all__ = [
    "SOURCES",
    "NoteDetail",
    "SearchHit",
    "StoreStats",
    "TaskHistory",
    "all_of",
    "any_of",
    "note_detail",
    "search",
    "stats",
    "task_history",
]
