"""``generations.jsonl``: the phases of a run's generations, one durable line each.

The attempt journal says which attempts finished; this log says where the
generation loop stands: ``started`` (with the tasks the strategy planned, so
a resume never asks the strategy again), ``forum_started`` (who sits in
which room of the forum), ``forum_round`` (one room's round is over: its
posts, the post files dropped and why, and whether the room ended) and
``distilled`` (the notes are stored, or the generation was not to be
distilled). The forum's sessions have their own durable log
(:class:`~ksi.knowledge.forum.FileForumStore`), so a round killed halfway
resumes without running a finished participant again. Lines are written as the
journal writes its lines (one ``write``, then ``fsync``), so a ``kill -9``
leaves at most a torn last line, which reading ignores and the next append
trims.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from ksi.fileops import append_line_durably
from ksi.knowledge.forum import Room
from ksi.records import now
from ksi.serialization import dumps_line, from_data

PHASES_FILE = "generations.jsonl"


@attrs.frozen
class PhaseEvent:
    kind: str
    generation: int
    #: ``started``: the tasks the generation runs (hold-outs included, last).
    task_ids: tuple[str, ...] = ()
    holdout_task_ids: tuple[str, ...] = ()
    #: ``started``: the stored generation whose notes its attempts get (None: no notes).
    knowledge_from: int | None = None
    #: ``distilled``: who wrote the notes, why the configured distiller was not used,
    #: and "" when notes were stored (else why there are none).
    distiller: str = ""
    fallback: str = ""
    skipped: str = ""
    #: ``forum_started``: the rooms and who sits in them.
    rooms: tuple[Room, ...] = ()
    #: ``forum_round``: which room's round ended, and how.
    forum_round: ForumRound | None = None
    at: str = attrs.field(factory=now)


@attrs.frozen
class ForumRound:
    """One round of one room, over: what it kept and dropped, and whether the room ended."""

    #: The room (None: the cross-task room) and the round (1-based).
    task_id: str | None
    round: int
    #: The ids of the posts kept this round.
    post_ids: tuple[str, ...] = ()
    #: ``participant N: posts/<file>: reason`` for each post file dropped.
    dropped: tuple[str, ...] = ()
    #: Why the room ended after this round ("" : it goes on).
    ended: str = ""


def phases_path(run_dir: Path) -> Path:
    return Path(run_dir) / PHASES_FILE


def read_phases(run_dir: Path) -> list[PhaseEvent]:
    """Every complete event (a torn or damaged line is skipped)."""
    try:
        data = phases_path(run_dir).read_bytes()
    except FileNotFoundError:
        return []
    events = []
    for raw in data.split(b"\n")[:-1]:
        try:
            events.append(from_data(json.loads(raw), PhaseEvent))
        except Exception:
            continue
    return events


def append_phase(run_dir: Path, event: PhaseEvent) -> None:
    """Append ``event`` durably (after trimming a torn last line a crash left)."""
    append_line_durably(phases_path(run_dir), (dumps_line(event) + "\n").encode("utf-8"))


@attrs.frozen
class Phases:
    """The events of a run, by generation."""

    started: dict[int, PhaseEvent]
    distilled: dict[int, PhaseEvent]
    forum_started: dict[int, PhaseEvent] = attrs.field(factory=dict)
    #: Each generation's ended rounds, in the order they were recorded (one per room and round).
    forum_rounds: dict[int, list[ForumRound]] = attrs.field(factory=dict)

    @classmethod
    def read(cls, run_dir: Path) -> Phases:
        started: dict[int, PhaseEvent] = {}
        distilled: dict[int, PhaseEvent] = {}
        forum_started: dict[int, PhaseEvent] = {}
        rounds: dict[int, list[ForumRound]] = {}
        seen: set[tuple[int, str | None, int]] = set()
        for event in read_phases(run_dir):
            if event.kind == "started":
                started.setdefault(event.generation, event)
            elif event.kind == "distilled":
                distilled.setdefault(event.generation, event)
            elif event.kind == "forum_started":
                forum_started.setdefault(event.generation, event)
            elif event.kind == "forum_round" and event.forum_round is not None:
                done = event.forum_round
                key = (event.generation, done.task_id, done.round)
                if key not in seen:
                    seen.add(key)
                    rounds.setdefault(event.generation, []).append(done)
        return cls(started, distilled, forum_started, rounds)
