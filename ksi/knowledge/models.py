"""The values generations pass around: notes, evidence, and the questions plugins answer.

Strategies (``ksi_register_strategies``) get a :class:`PlanRequest` and answer
with the task ids the next generation runs; distillers
(``ksi_register_distillers``) get a :class:`DistillRequest` and answer with a
:class:`DistillResult`. Both only ever see **scored** attempts: KSI builds the
evidence, and an unscored attempt never enters it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ksi.knowledge.forum import Post
from ksi.models import Usage
from ksi.trajectories.digest import TrajectoryDigest

#: What a note says. The first seven come from the ``evidence`` distiller (facts read
#: off attempts, their trajectories, and the forum's posts); the rest are what an
#: ``agent`` distiller is asked to write.
EVIDENCE_KINDS = (
    "best_diff",
    "eval_output",
    "final_message",
    "score_history",
    "files_touched",
    "trajectory",
    "forum_post",
)
INSIGHT_KINDS = (
    "insight",
    "constraint",
    "rejected_hypothesis",
    "pitfall",
    "check",
    "next_step",
)
NOTE_KINDS = EVIDENCE_KINDS + INSIGHT_KINDS


def _kind(_: Any, attribute: Any, value: str) -> None:
    if value not in NOTE_KINDS:
        raise ValueError(f"note kind {value!r}: expected one of {', '.join(NOTE_KINDS)}")


@attrs.frozen
class Note:
    """One thing learnt, and the attempts it was learnt from."""

    #: Unique within the run (``g<generation>-<task or shared>-<n>``).
    id: str
    kind: str = attrs.field(validator=_kind)
    text: str
    #: The task it is about; ``None`` for a shared (cross-task) note.
    task_id: str | None = None
    #: When the note applies ("" : always, for its task).
    applies_when: str = ""
    #: The attempts (their ``attempt_dir`` in the run, e.g. ``attempts/t1/2``) it came from.
    attempts: tuple[str, ...] = ()
    #: The generation whose attempts it came from (0: seeded from a bundle).
    generation: int = 0
    #: Ids of earlier notes this one supersedes (on the same point, newer): KSI drops
    #: them from the notes that follow and marks them superseded in the store.
    replaces: tuple[str, ...] = ()
    #: The forum posts it came from (their ids); ``attempts`` holds what they rest on.
    posts: tuple[str, ...] = ()


@attrs.frozen
class Knowledge:
    """The notes stored after one generation (``knowledge/<generation>/notes.json``)."""

    generation: int
    #: The distiller whose notes these are (``evidence`` after a fallback).
    distiller: str
    notes: tuple[Note, ...] = ()
    #: Why the configured distiller's notes were not used ("" when they were).
    fallback: str = ""
    #: What the distiller spent (an ``agent`` distiller's model calls).
    usage: Usage = attrs.field(factory=Usage)
    created_at: str = ""
    #: Ids of notes here whose receivers kept failing when these notes were stored
    #: (see :data:`DEMOTE_AFTER`): given last, so the budget leaves them out first.
    demoted: tuple[str, ...] = ()


#: A note received by this many scored attempts, none of which solved its task, is demoted.
DEMOTE_AFTER = 3

_SPACE = re.compile(r"\s+")


def text_key(text: str) -> str:
    """What two notes that say the same thing share: the hash of their text with case
    and runs of white space normalised (rendering never gives both)."""
    normal = _SPACE.sub(" ", text.strip().casefold())
    return hashlib.sha256(normal.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@attrs.frozen
class AttemptEvidence:
    """What one scored attempt showed."""

    attempt_id: str
    generation: int
    attempt: int
    score: float
    solved: bool
    final_message: str = ""
    #: The tail of the eval output ("" with ``--knowledge-eval-output none``, or solved).
    eval_output: str = ""
    #: Paths the attempt added, changed or deleted in ``repo/``.
    files_touched: tuple[str, ...] = ()
    #: Its diff against the starting files (only the task's best attempt carries one).
    diff: str = ""
    #: What its trajectory shows (failed commands, first test run...); ``None`` when the
    #: agent left none KSI could read.
    trajectory: TrajectoryDigest | None = None


@attrs.frozen
class TaskEvidence:
    """One task's scored attempts of a generation, and its score history until then."""

    task_id: str
    prompt: str
    #: This generation's scored attempts, best first.
    attempts: tuple[AttemptEvidence, ...]
    #: ``(generation, attempt id, score)`` of every scored attempt so far, oldest first.
    score_history: tuple[tuple[int, str, float], ...] = ()


@attrs.frozen
class DistillRequest:
    """What a distiller gets after generation ``generation``."""

    generation: int
    #: Evidence per task, from **scored** attempts of non-hold-out tasks only.
    evidence: tuple[TaskEvidence, ...]
    #: The newest notes before this generation (None: none yet).
    previous: Knowledge | None
    #: The most bytes of notes one attempt receives (notes beyond it are left out).
    budget_bytes: int
    #: A directory of its own the distiller may work in (kept in the run for inspection).
    workdir: Path
    solved_threshold: float = 1.0
    #: The run directory (a distiller running an agent needs it for its logs).
    run_dir: Path = Path(".")
    #: The run's scrubbed agent environment and model, for a distiller that runs an agent.
    agent_env: Mapping[str, str] = attrs.field(factory=dict)
    model: str | None = None
    #: The posts of this generation's forum (``--forum-rounds``), per task and shared
    #: (``task_id`` None), in the order they were written; ``done`` posts left out.
    #: Each rests on scored attempts of the evidence (:attr:`Post.attempts`).
    forum: tuple[Post, ...] = ()


@attrs.frozen
class DistillResult:
    """A distiller's answer: the notes (every one citing attempts), and what it spent."""

    notes: tuple[Note, ...]
    usage: Usage = attrs.field(factory=Usage)
    #: Set when the distiller fell back to evidence notes: why ("" otherwise).
    fallback: str = ""
    #: The distiller that actually wrote the notes ("" : the one asked).
    written_by: str = ""


@attrs.frozen
class TaskState:
    """A task as a strategy sees it before a generation."""

    task_id: str
    #: Best score over every scored attempt so far (None: none scored yet).
    best_score: float | None
    solved: bool
    #: Generations in which the task ran.
    generations_run: int = 0
    #: False once an attempt showed the task cannot be scored (its evaluator has nothing
    #: to grade it with, e.g. no eval command: ``EvalStatus.NO_EVAL``). Such a task is not
    #: "unsolved": no attempt can ever solve it.
    scorable: bool = True


@attrs.frozen
class PlanRequest:
    """What a strategy gets before generation ``generation``."""

    generation: int
    #: The tasks that learn (hold-outs are not here: they run every generation anyway).
    tasks: tuple[TaskState, ...]
    attempts: int
    solved_threshold: float
