"""What a view shows of a run's forum: each room's thread, round by round, and its notes.

Read from the run directory alone: ``generations.jsonl`` (who sat in which
room, which rounds ended and how), the forum store (each session: how it
ended, what it spent, the posts it kept and the post files dropped, with
why) and the stored notes (which of them were made from which posts), so
``ksi view`` and ``ksi show --forum`` say who posted what, in which round,
citing which attempts, and what the distiller made of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from ksi.generations.phases import Phases
from ksi.knowledge.forum import (
    FORUM_DIR,
    RECORD_FILE,
    FileForumStore,
    ForumSession,
    Post,
    Room,
    room_label,
)
from ksi.knowledge.store import KnowledgeUnreadable, read_knowledge
from ksi.relpaths import clean_relative_path


@attrs.frozen
class PostView:
    post: Post
    #: The ids of the notes the generation's distiller made of it.
    notes: tuple[str, ...] = ()


@attrs.frozen
class SessionView:
    session: ForumSession
    posts: tuple[PostView, ...]


@attrs.frozen
class RoundView:
    round: int
    sessions: tuple[SessionView, ...]


@attrs.frozen
class ThreadView:
    """One room of one generation's forum."""

    generation: int
    room: Room
    rounds: tuple[RoundView, ...]
    #: Why the room ended ("" : it has not, yet).
    ended: str
    #: Run-relative path of the generation's forum record (``forum/<g>/FORUM.md``).
    record: str | None

    @property
    def label(self) -> str:
        return room_label(self.room.task_id)

    @property
    def post_count(self) -> int:
        return sum(len(s.posts) for r in self.rounds for s in r.sessions)


def _notes_by_post(run_dir: Path, generation: int) -> dict[str, list[str]]:
    try:
        knowledge = read_knowledge(run_dir, generation)
    except KnowledgeUnreadable:
        return {}
    found: dict[str, list[str]] = {}
    for note in knowledge.notes if knowledge is not None else ():
        if note.generation == generation:
            for post in note.posts:
                found.setdefault(post, []).append(note.id)
    return found


def _in_run(session: ForumSession) -> ForumSession:
    """``session`` with no ``session_dir`` when the store names one outside the run (the
    store is data whoever wrote the run directory chose: nothing outside it is linked)."""
    if session.session_dir and clean_relative_path(session.session_dir)[1]:
        return attrs.evolve(session, session_dir="")
    return session


def load_forum(run_dir: Path, task_ids: Sequence[str] | None = None) -> tuple[ThreadView, ...]:
    """Every room of every generation's forum (the cross-task room last in each), or only the
    rooms of ``task_ids`` and the cross-task room, in which each holds a seat."""
    root = Path(run_dir)
    phases = Phases.read(root)
    store = FileForumStore(root)
    wanted = set(task_ids) if task_ids is not None else None
    threads: list[ThreadView] = []
    for generation in sorted(phases.forum_started):
        sessions = store.sessions(generation)
        notes = _notes_by_post(root, generation)
        ended = {r.task_id: r.ended for r in phases.forum_rounds.get(generation, []) if r.ended}
        record = f"{FORUM_DIR}/{generation}/{RECORD_FILE}"
        has_record = (root / record).is_file()
        for room in phases.forum_started[generation].rooms:
            if wanted is not None and not any(s.task_id in wanted for s in room.seats):
                continue
            mine = sorted(
                (_in_run(s) for s in sessions if s.task_id == room.task_id),
                key=lambda s: (s.round, s.participant),
            )
            rounds = tuple(
                RoundView(
                    r,
                    tuple(
                        SessionView(
                            s, tuple(PostView(p, tuple(notes.get(p.id, ()))) for p in s.posts)
                        )
                        for s in mine
                        if s.round == r
                    ),
                )
                for r in sorted({s.round for s in mine})
            )
            threads.append(
                ThreadView(
                    generation,
                    room,
                    rounds,
                    ended.get(room.task_id, ""),
                    record if has_record else None,
                )
            )
    return tuple(threads)
