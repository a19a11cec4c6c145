"""The forum: between a generation's attempts and its distillation, agents compare notes.

With ``--forum-rounds N`` each task with scored attempts in the generation
gets a room: up to ``--forum-participants`` participants (default one per
scored attempt, best first, at most :data:`DEFAULT_PARTICIPANTS`), each a
fresh session of an agent (``--forum-agent``, default the run's) holding the
evidence of *its* attempt. Round after round every participant that has not
said ``done`` runs once, reading ``FORUM.md`` (the thread so far) and
writing posts as files (:mod:`ksi.knowledge.forum`); a room ends after its
last round, or earlier when every participant has posted ``done``. Then the
cross-task room (``--cross-task-forum-rounds``) runs the same way with one
participant per task (``--cross-task-forum-participants``), each holding its
task's best attempt and reading every task's thread. The distiller reads the
posts (:attr:`~ksi.knowledge.models.DistillRequest.forum`).

A session is an attempt job like any other (:class:`ForumSessionPlan`
becomes one through the host): the same executor, environment, timeout, log
rules and budget; its task's ``repo/`` holds ``FORUM.md``, ``evidence/`` and
``posts/``, and its captured copy is where the posts are read from. Only
scored attempts of learning tasks take part: a hold-out task has no room, no
seat in the cross-task room, and no post may cite its attempts.

Kept posts also go into the run's knowledge store (:meth:`~ksi.generations.
run_store.RunStore.put_posts`), where ``ksi knowledge search`` finds them.

Resume: ``forum_started`` in ``generations.jsonl`` records the seating (so
a resume seats the same participants), each finished session is a durable
line of the forum store (so a finished participant never runs twice), and
``forum_round`` closes a room's round (so a resume starts at the round that
was running).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs

from ksi.generations.evidence import attempt_evidence, best_first, scored
from ksi.generations.phases import ForumRound, PhaseEvent, Phases, append_phase
from ksi.generations.steps import runs_again_on_resume
from ksi.knowledge.db_schema import StoreBusy
from ksi.knowledge.forum import (
    EVIDENCE_DIR,
    FORUM_DIR,
    FORUM_FILE,
    POSTS_DIR,
    Author,
    DroppedPost,
    ForumSession,
    ForumStore,
    Post,
    Room,
    Seat,
    collect_posts,
    posts_of,
    room_path,
)
from ksi.knowledge.forum_render import forum_record, session_forum
from ksi.layout import task_dirname
from ksi.models import TaskSpec
from ksi.records import AttemptRecord, now
from ksi.rundir.config import RunConfig
from ksi.task_parts import StartingFiles

#: Where a round's live posts are, under ``forum/<g>/`` (``live/<room>/r<round>/``).
LIVE_DIR = "live"
#: Participants of a task's forum when ``--forum-participants`` is not given (at most).
DEFAULT_PARTICIPANTS = 4
#: Why a room ended.
ALL_DONE = "every participant posted done"
LAST_ROUND = "its last round"

PROMPT = """\
You are taking part in a forum where agents compare notes on coding tasks they attempted.
Read `repo/{forum}`: it says which attempt's evidence you hold (in `repo/{evidence}/`),
shows the thread so far, and explains how to post. Write each post as one JSON file in
`repo/{posts}/`, as `{forum}` describes. Change nothing else: only your posts are kept.
"""


@attrs.frozen
class ForumSessionPlan:
    """One session to run: a participant of a room in one round, as the agent's task."""

    generation: int
    room: Room
    seat: Seat
    round: int
    #: The session's task: its ``repo/`` holds FORUM.md, evidence/ and posts/.
    task: TaskSpec
    #: Where the session runs, relative to the run directory (its job's ``run_dir``).
    run_dir: str
    #: The round's live directory, relative to the run directory: each session's posts
    #: made through the forum's tools are copied there for the others to read at once.
    live_dir: str = ""


class ForumHost(Protocol):
    """What the forum asks of the run (the driver's session)."""

    def run_forum_sessions(
        self,
        plan: Sequence[ForumSessionPlan],
        finished: Callable[[ForumSessionPlan, AttemptRecord], None],
    ) -> None:
        """Run ``plan`` through the run's executor; ``finished`` gets each session's record."""

    def stopped(self) -> bool:
        """The run launches no more jobs (``--max-cost``, a full disk, an auth error)."""

    def over_budget(self) -> bool:
        """The reported spend reached ``--max-cost``."""

    def warn(self, message: str) -> None:
        """Something the user must hear at the end of the run."""


class PostIndex(Protocol):
    """Where kept posts are also put to be searched (the run's knowledge store)."""

    @property
    def path(self) -> Path:
        """Where it is (for a message)."""

    def put_posts(self, posts: Iterable[Post]) -> None:
        """Keep ``posts``; one kept already stays as it is (so putting them again is safe)."""


def seat_rooms(
    config: RunConfig, records: Sequence[AttemptRecord], generation: int, task_order: Sequence[str]
) -> tuple[Room, ...]:
    """Who sits where in ``generation``'s forum: a room per task with scored attempts (best
    first, capped), then the cross-task room (each task's best attempt). Hold-outs never."""
    held = set(config.holdout_task_ids or ())
    by_task: dict[str, list[AttemptRecord]] = defaultdict(list)
    for rec in scored(records):
        if rec.generation == generation and rec.task_id not in held:
            by_task[rec.task_id].append(rec)
    ordered = [t for t in task_order if t in by_task]
    rooms: list[Room] = []
    if config.forum_rounds > 0:
        cap = config.forum_participants or DEFAULT_PARTICIPANTS
        for task_id in ordered:
            picked = best_first(by_task[task_id])[:cap]
            rooms.append(Room(task_id, tuple(_seat(n, r) for n, r in enumerate(picked, 1))))
    if config.cross_task_forum_rounds > 0 and ordered:
        cap = config.cross_task_forum_participants or len(ordered)
        best = [best_first(by_task[t])[0] for t in ordered[:cap]]
        rooms.append(Room(None, tuple(_seat(n, r) for n, r in enumerate(best, 1))))
    return tuple(rooms)


def _seat(participant: int, rec: AttemptRecord) -> Seat:
    return Seat(participant, rec.attempt_dir, rec.task_id, float(rec.score or 0.0))


class ForumPhase:
    """The forum of one generation after another (see the module docstring)."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        tasks: Mapping[str, TaskSpec],
        host: ForumHost,
        store: ForumStore,
        index: PostIndex,
    ) -> None:
        self._config = config
        self._root = Path(run_dir)
        self._tasks = tasks
        self._host = host
        self._store = store
        self._index = index
        #: The store refused posts once already (the user hears of it once).
        self._warned = False
        self._held = set(config.holdout_task_ids or ())

    def posts(self, generation: int) -> tuple[Post, ...]:
        """What the distiller reads: the generation's kept posts, ``done`` ones left out."""
        return tuple(p for p in posts_of(self._store.sessions(generation)) if p.kind != "done")

    def run(self, generation: int, records: Sequence[AttemptRecord]) -> bool:
        """Run what ``generation``'s forum still lacks; True once every room has ended."""
        # What the store lacks of the posts kept so far (a write that failed, a kill
        # between a session's line and its store write) is put there again.
        self._put_in_index(posts_of(self._store.sessions(generation)))
        phases = Phases.read(self._root)
        started = phases.forum_started.get(generation)
        if started is None:
            rooms = seat_rooms(self._config, records, generation, list(self._tasks))
            append_phase(self._root, PhaseEvent("forum_started", generation, rooms=rooms))
        else:
            rooms = started.rooms
        by_id = {r.attempt_dir: r for r in scored(records)}
        cfg = self._config
        stages = (
            ([r for r in rooms if r.task_id is not None], cfg.forum_rounds),
            ([r for r in rooms if r.task_id is None], cfg.cross_task_forum_rounds),
        )
        for stage_rooms, rounds in stages:
            if not self._stage(generation, rooms, stage_rooms, rounds, records, by_id):
                return False
        return True

    # -- one stage: the tasks' rooms together, then the cross-task room ---------------------
    def _stage(
        self,
        generation: int,
        all_rooms: Sequence[Room],
        rooms: Sequence[Room],
        rounds: int,
        records: Sequence[AttemptRecord],
        by_id: Mapping[str, AttemptRecord],
    ) -> bool:
        while True:
            closed = Phases.read(self._root).forum_rounds.get(generation, [])
            progress = {r.task_id: _progress(r.task_id, closed) for r in rooms}
            open_rooms = [
                r for r in rooms if not progress[r.task_id][1] and progress[r.task_id][0] < rounds
            ]
            if not open_rooms:
                return True
            sessions = self._store.sessions(generation)
            have = {s.key for s in sessions}
            plan: list[ForumSessionPlan] = []
            for room in open_rooms:
                round_ = progress[room.task_id][0] + 1
                for seat in _active(room, round_, sessions):
                    if (room.task_id, round_, seat.participant) not in have:
                        plan.append(
                            self._plan(generation, room, seat, round_, rounds, sessions, by_id)
                        )
            if plan:
                if self._host.stopped() or self._host.over_budget():
                    return False
                known = frozenset(
                    r.attempt_dir
                    for r in scored(records)
                    if r.task_id not in self._held and r.generation <= generation
                )
                for item in plan:  # a killed session's live posts are not this round's
                    for stale in (self._root / item.live_dir).glob(f"p{item.seat.participant}-*"):
                        stale.unlink(missing_ok=True)
                self._host.run_forum_sessions(plan, functools.partial(self._finished, known=known))
            sessions = self._store.sessions(generation)
            have = {s.key for s in sessions}
            for room in open_rooms:
                round_ = progress[room.task_id][0] + 1
                if any(
                    (room.task_id, round_, seat.participant) not in have
                    for seat in _active(room, round_, sessions)
                ):
                    return False  # stopped (--max-cost, a full disk) before the round ended
            for room in open_rooms:
                self._close_round(generation, room, progress[room.task_id][0] + 1, rounds, sessions)
            self._store.write_record(
                generation, forum_record(generation, all_rooms, sessions, self._ended(generation))
            )

    def _close_round(
        self,
        generation: int,
        room: Room,
        round_: int,
        rounds: int,
        sessions: Sequence[ForumSession],
    ) -> None:
        mine = [s for s in sessions if s.task_id == room.task_id and s.round == round_]
        still = _active(room, round_ + 1, sessions)
        ended = ALL_DONE if not still else (LAST_ROUND if round_ >= rounds else "")
        event = ForumRound(
            task_id=room.task_id,
            round=round_,
            post_ids=tuple(p.id for s in mine for p in s.posts),
            dropped=tuple(
                f"participant {s.participant}: {d.file}: {d.reason}"
                for s in sorted(mine, key=lambda s: s.participant)
                for d in s.dropped
            ),
            ended=ended,
        )
        append_phase(self._root, PhaseEvent("forum_round", generation, forum_round=event))

    def _ended(self, generation: int) -> dict[str | None, str]:
        return {
            r.task_id: r.ended
            for r in Phases.read(self._root).forum_rounds.get(generation, [])
            if r.ended
        }

    # -- one session ---------------------------------------------------------------------
    def _plan(
        self,
        generation: int,
        room: Room,
        seat: Seat,
        round_: int,
        rounds: int,
        sessions: Sequence[ForumSession],
        by_id: Mapping[str, AttemptRecord],
    ) -> ForumSessionPlan:
        earlier = [s for s in sessions if s.round < round_]
        thread = posts_of(s for s in earlier if s.task_id == room.task_id)
        threads: dict[str, list[Post]] | None = None
        if room.task_id is None:  # every task's own thread, in the run's task order
            threads = {}
            for post in posts_of(s for s in sessions if s.task_id is not None):
                assert post.task_id is not None
                threads.setdefault(post.task_id, []).append(post)
            threads = {t: threads[t] for t in self._tasks if t in threads}
        original = self._tasks[seat.task_id]
        text = session_forum(
            generation=generation,
            room=room,
            seat=seat,
            round_=round_,
            rounds=rounds,
            prompt=original.prompt,
            thread=thread,
            threads=threads,
        )
        files = {FORUM_FILE: text, f"{POSTS_DIR}/.keep": "", **self._evidence(seat, by_id)}
        task = TaskSpec(
            id=session_task_id(generation, room.task_id, round_, seat.participant, self._tasks),
            prompt=PROMPT.format(forum=FORUM_FILE, evidence=EVIDENCE_DIR, posts=POSTS_DIR),
            starting_files=StartingFiles(files=files),
            # The task's image and limits, but the session works in its own workspace.
            runtime=attrs.evolve(original.runtime, workdir=None),
        )
        return ForumSessionPlan(
            generation=generation,
            room=room,
            seat=seat,
            round=round_,
            task=task,
            run_dir=f"{FORUM_DIR}/{generation}",
            live_dir=f"{FORUM_DIR}/{generation}/{LIVE_DIR}/{room_path(room.task_id)}/r{round_}",
        )

    def _evidence(self, seat: Seat, by_id: Mapping[str, AttemptRecord]) -> dict[str, str]:
        """``evidence/`` for one seat: what its attempt showed, cut to the knowledge budget."""
        cfg = self._config
        ev = attempt_evidence(
            by_id[seat.attempt],
            self._root,
            solved_threshold=cfg.solved_threshold,
            budget_bytes=cfg.knowledge_budget_bytes,
            eval_output=cfg.knowledge_eval_output == "tail",
            with_diff=True,
        )
        summary = {
            "task_id": seat.task_id,
            "attempt_id": ev.attempt_id,
            "generation": ev.generation,
            "score": ev.score,
            "solved": ev.solved,
            "files_touched": list(ev.files_touched),
        }
        return {
            f"{EVIDENCE_DIR}/attempt.json": json.dumps(summary, indent=2, ensure_ascii=False),
            f"{EVIDENCE_DIR}/diff.patch": ev.diff,
            f"{EVIDENCE_DIR}/eval_output.txt": ev.eval_output,
            f"{EVIDENCE_DIR}/final_message.txt": ev.final_message,
        }

    def _finished(
        self, item: ForumSessionPlan, record: AttemptRecord, *, known: frozenset[str]
    ) -> None:
        """Keep one finished session and its checked posts (one durable line).

        A session a full disk, a lost worker or a set-up failure (a key, an endpoint, refused
        tools) ended is not kept: its round stays open, and a resume runs it again (as the
        journal does attempts).
        """
        if runs_again_on_resume(record):
            return
        g = item.generation
        session_dir = f"{item.run_dir}/{record.attempt_dir}" if record.attempt_dir else ""
        repo = self._root / session_dir / "captured" / "repo" if session_dir else None
        visible = {
            p.id
            for p in posts_of(self._store.sessions(g))
            if item.room.task_id is None or p.task_id == item.room.task_id
        }
        posts: tuple[Post, ...] = ()
        dropped: tuple[DroppedPost, ...] = ()
        if repo is not None and repo.is_dir():
            posts, dropped = collect_posts(
                repo,
                Author(g, item.room.task_id, item.round, item.seat.participant, item.seat.attempt),
                known_attempts=known,
                known_posts=visible,
                skipped=record.skipped_files,
            )
        self._store.add_session(
            ForumSession(
                generation=g,
                task_id=item.room.task_id,
                round=item.round,
                participant=item.seat.participant,
                attempt=item.seat.attempt,
                status=record.status,
                agent_status=record.agent_status,
                usage=record.usage,
                session_dir=session_dir,
                posts=posts,
                dropped=dropped,
                error=record.error,
                finished_at=record.finished_at or now(),
            )
        )
        self._put_in_index(posts)

    def _put_in_index(self, posts: Sequence[Post]) -> None:
        if not posts:
            return
        try:
            self._index.put_posts(posts)
        except (sqlite3.Error, StoreBusy) as exc:
            # The forum's files hold the posts: the store gets them when the forum runs next.
            note = f"knowledge store {self._index.path}: could not store forum posts ({exc})"
            if not self._warned:
                self._host.warn(note)
                self._warned = True


def session_task_id(
    generation: int, task_id: str | None, round_: int, participant: int, taken: Iterable[str]
) -> str:
    """The id of a session's task: ``forum.<g>.task.<task dir>.r<r>.p<k>`` (``forum.<g>.cross.
    r<r>.p<k>`` in the cross-task room).

    An executor or environment may take a job's ``(task id, attempt, try)`` as unique in
    a run (the Ray executor's exactly-once key, Docker's container names, a seed cache), so
    each session's task has an id of its own, never one of the run's tasks' (a task named
    so gets a ``~`` added).
    """
    room = "cross" if task_id is None else f"task.{task_dirname(task_id)}"
    found = f"{FORUM_DIR}.{generation}.{room}.r{round_}.p{participant}"
    names = set(taken)
    while found in names:
        found += "~"
    return found


def _progress(task_id: str | None, closed: Sequence[ForumRound]) -> tuple[int, bool]:
    """``(rounds closed, ended)`` of one room."""
    mine = [r for r in closed if r.task_id == task_id]
    return len(mine), any(r.ended for r in mine)


def _active(room: Room, round_: int, sessions: Sequence[ForumSession]) -> list[Seat]:
    """The seats of ``room`` that run in ``round_``: those that posted no ``done`` before it."""
    done = {
        s.participant
        for s in sessions
        if s.task_id == room.task_id and s.round < round_ and s.said_done
    }
    return [seat for seat in room.seats if seat.participant not in done]
