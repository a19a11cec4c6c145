"""The generation loop's steps: plan a generation, give its attempts notes, distil it.

The loop (:mod:`ksi.generations.loop`) runs generation after generation:

1. **plan**: the strategy (``--strategy``) picks the tasks from each task's
   best score so far (:class:`~ksi.knowledge.models.PlanRequest`); hold-outs
   are added; a ``started`` event in ``generations.jsonl`` records the plan
   (:mod:`ksi.generations.phases`), so a resume runs exactly that plan;
2. **attempts**: generation ``g``'s attempts are numbered
   ``(g-1)*attempts+1 .. g*attempts`` (so ``attempts/<task>/<n>/`` stays the
   layout), each with ``KNOWLEDGE.md`` beside ``repo/`` rendered from the
   newest notes stored at or before ``g-1`` (:func:`knowledge_for`); only
   what the journal lacks runs (:func:`missing_attempts`);
3. **forum** (``--forum-rounds``, ``--cross-task-forum-rounds``): agents
   holding the scored attempts' evidence compare notes, round by round
   (:mod:`ksi.generations.forum`);
4. **distil**: the distiller turns the generation's scored attempts (and the
   forum's posts) into notes, stored in the knowledge store (one
   transaction) and then written from it to ``knowledge/<g>/``; a
   ``distilled`` event closes the generation. A distiller that fails falls
   back to ``evidence`` notes.

Every step can be interrupted (``kill -9``) and is redone exactly once: notes
the store holds are never distilled again, only their files written.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi.attempt.diskfull import reruns_on_resume
from ksi.attempt.execute import FINAL_EVAL_STATUSES, SETUP_FAILURES
from ksi.attempt.job import ContextFile
from ksi.choices import KnowledgeEvalOutput, KnowledgeMode
from ksi.errors import DistillationFailed
from ksi.generations.evidence import build_evidence, scored
from ksi.generations.evidence_distiller import evidence_notes
from ksi.generations.run_store import RunStore
from ksi.interfaces import Distiller
from ksi.knowledge.forum import Post
from ksi.knowledge.models import DistillRequest, Knowledge, Note, TaskState
from ksi.knowledge.render import KNOWLEDGE_FILE, PROMPT_POINTER, IndexedNotes
from ksi.knowledge.store import (
    clear_unfinished,
    newest_knowledge,
    read_knowledge,
    write_knowledge,
)
from ksi.models import TaskSpec, Usage, is_solved
from ksi.records import AttemptRecord, KnowledgeRef, now
from ksi.rundir.config import RunConfig
from ksi.rundir.journal import latest_by_attempt

#: Where a distiller works (``distill/<generation>/``), kept for inspection.
DISTILL_DIR = "distill"


def attempt_numbers(generation: int, attempts: int) -> range:
    """The attempt numbers of ``generation`` (1-based), ``attempts`` per task."""
    return range((generation - 1) * attempts + 1, generation * attempts + 1)


def generation_of(attempt: int, attempts: int) -> int:
    """The generation an attempt number belongs to."""
    return (attempt - 1) // attempts + 1


@attrs.frozen
class PlannedAttempt:
    """One try the journal lacks: a new attempt (``try_number`` 0) or another try of one."""

    task: TaskSpec
    attempt: int
    try_number: int = 0


def may_retry(record: AttemptRecord, retries: int) -> bool:
    """Another try may change ``record`` (unscored, an error...), and ``--retries`` allows one."""
    return record.retryable and record.try_number < retries


def setup_failed(record: AttemptRecord) -> bool:
    """The agent could not work for a reason of the run's set-up (a key, an endpoint, its
    own sandbox): no fault of the attempt, so a resume (after the fix) runs it again,
    ``--retries`` or not; within one session it is not retried (:data:`SETUP_FAILURES`)."""
    return record.agent_status in SETUP_FAILURES


def runs_again_on_resume(record: AttemptRecord) -> bool:
    """No fault of the attempt (a full disk, a lost worker, a set-up failure): a resume
    runs it again, ``--retries`` or not; attempts and forum sessions alike."""
    return reruns_on_resume(record) or setup_failed(record)


def _tries_again(record: AttemptRecord, retries: int) -> bool:
    """Whether the plan holds another try of ``record``'s attempt."""
    return may_retry(record, retries) or runs_again_on_resume(record)


def missing_attempts(
    tasks: Sequence[TaskSpec],
    records: list[AttemptRecord],
    generation: int,
    *,
    attempts: int,
    retries: int,
) -> Iterator[PlannedAttempt]:
    """What is missing of ``generation`` for ``tasks`` (its attempt numbers only), one at
    a time: the scheduler takes them as it submits, so the plan is never held whole."""
    latest = latest_by_attempt(records)
    for task in tasks:
        for n in attempt_numbers(generation, attempts):
            rec = latest.get((task.id, n))
            if rec is None:
                yield PlannedAttempt(task, n, 0)
            elif _tries_again(rec, retries):
                yield PlannedAttempt(task, n, rec.try_number + 1)


def count_missing(
    tasks: Sequence[TaskSpec],
    records: list[AttemptRecord],
    generation: int,
    *,
    attempts: int,
    retries: int,
) -> int:
    """How many tries :func:`missing_attempts` plans, counted from the journal's records
    (``--dry-run``: as fast for 10000 attempts per task as for one)."""
    numbers = attempt_numbers(generation, attempts)
    ids = {t.id for t in tasks}
    done = sum(
        1
        for (task_id, n), rec in latest_by_attempt(records).items()
        if task_id in ids and n in numbers and not _tries_again(rec, retries)
    )
    return len(ids) * len(numbers) - done


def task_states(
    records: Iterable[AttemptRecord], task_ids: Sequence[str], threshold: float
) -> tuple[TaskState, ...]:
    """Each task's best scored score, whether it is solved (unscored attempts do not count),
    and whether it can be scored at all (an attempt's final eval status said no)."""
    records = list(records)
    best: dict[str, float] = {}
    gens: dict[str, set[int]] = {}
    for rec in scored(records):
        assert rec.score is not None
        best[rec.task_id] = max(best.get(rec.task_id, rec.score), rec.score)
        gens.setdefault(rec.task_id, set()).add(rec.generation)
    unscorable = {
        r.task_id
        for r in records
        if r.eval is not None and r.eval.status in FINAL_EVAL_STATUSES and r.task_id not in best
    }
    return tuple(
        TaskState(
            t,
            best.get(t),
            is_solved(best.get(t), threshold),
            len(gens.get(t, ())),
            scorable=t not in unscorable,
        )
        for t in task_ids
    )


def knowledge_for(run_dir: Path, generation: int, config: RunConfig) -> Knowledge | None:
    """The notes generation ``generation`` gets: the newest stored at or before ``g-1``."""
    if config.knowledge == KnowledgeMode.NONE:
        return None
    return newest_knowledge(run_dir, generation - 1)


def context_for(
    notes: IndexedNotes | None, task: TaskSpec, budget_bytes: int
) -> tuple[tuple[ContextFile, ...], KnowledgeRef | None]:
    """``KNOWLEDGE.md`` for one attempt (and what the record says it got), or nothing.

    Other tasks' notes are chosen by their relevance to the task's id and prompt."""
    if notes is None:
        return (), None
    rendered = notes.render(task.id, budget_bytes, query=f"{task.id} {task.prompt}")
    if not rendered.note_ids:
        return (), None
    files = (ContextFile(KNOWLEDGE_FILE, rendered.text, prompt_pointer=PROMPT_POINTER),)
    return files, KnowledgeRef(notes.knowledge.generation, rendered.note_ids, rendered.sha256)


def needs_distillation(generation: int, config: RunConfig) -> str:
    """Why generation ``generation`` is not distilled ("" when it is)."""
    if config.knowledge == KnowledgeMode.NONE:
        return "--knowledge none"
    if config.generations == 1:
        return "a run of one generation"
    return ""


def _known_attempts(request: DistillRequest) -> set[str]:
    known = {a for t in request.evidence for _, a, _ in t.score_history}
    if request.previous is not None:
        known.update(a for n in request.previous.notes for a in n.attempts)
    return known


def checked_notes(
    notes: Iterable[Any], request: DistillRequest, withheld: Iterable[str] = ()
) -> tuple[tuple[Note, ...], int]:
    """The notes KSI keeps from a distiller, and how many it dropped.

    Every note must be a :class:`Note` citing attempts that exist and were
    scored (citations of others are removed; a note left citing nothing is
    dropped, unless it is carried unchanged from the notes before); ids are
    made unique. A note about a ``withheld`` (hold-out) task is dropped, whoever
    wrote it (a seed bundle's note carried forward included), and so is a note
    another one says it ``replaces`` (superseded).
    """
    skip = frozenset(withheld)
    known = _known_attempts(request)
    previous = set(request.previous.notes) if request.previous is not None else set()
    notes = list(notes)
    replaced = {old for n in notes if isinstance(n, Note) for old in n.replaces}
    kept: list[Note] = []
    ids: set[str] = set()
    dropped = 0
    for note in notes:
        if not isinstance(note, Note) or note.task_id in skip:
            dropped += 1
            continue
        if note.id in replaced and note in previous:
            continue  # superseded by a newer note on the same point
        if note not in previous:
            cited = tuple(a for a in note.attempts if a in known)
            if not cited:
                dropped += 1
                continue
            note = attrs.evolve(note, attempts=cited)
        if note.id in ids:
            note = attrs.evolve(note, id=f"{note.id}-{len(kept) + 1}")
        ids.add(note.id)
        kept.append(note)
    return tuple(kept), dropped


def distill(
    *,
    run_dir: Path,
    generation: int,
    records: Sequence[AttemptRecord],
    prompts: Mapping[str, str],
    config: RunConfig,
    distiller: Distiller,
    distiller_name: str,
    agent_env: Mapping[str, str],
    store: RunStore,
    forum: Sequence[Post] = (),
) -> Knowledge:
    """Distil generation ``generation`` and store its notes (exactly once).

    Notes already stored for it (a run killed between storing them and
    recording the phase) are returned as they are: from its files, or, when
    it was killed before they were written, from the store (and the files
    written). A distiller that raises, or whose notes KSI cannot use, is
    replaced by the ``evidence`` notes, and :attr:`Knowledge.fallback` says why.
    """
    stored = read_knowledge(run_dir, generation)
    if stored is not None:
        store.ensure(stored)
        return stored
    clear_unfinished(run_dir)
    stored = store.stored(generation)
    if stored is not None:
        write_knowledge(run_dir, stored)
        return stored
    store.sync(records)
    workdir = Path(run_dir) / DISTILL_DIR / str(generation)
    shutil.rmtree(workdir, ignore_errors=True)  # a killed distillation's leftovers
    workdir.mkdir(parents=True)
    request = DistillRequest(
        generation=generation,
        evidence=build_evidence(
            records,
            generation=generation,
            run_dir=Path(run_dir),
            prompts=prompts,
            holdouts=config.holdout_task_ids or (),
            solved_threshold=config.solved_threshold,
            budget_bytes=config.knowledge_budget_bytes,
            eval_output=config.knowledge_eval_output == KnowledgeEvalOutput.TAIL,
        ),
        previous=newest_knowledge(run_dir, generation - 1),
        budget_bytes=config.knowledge_budget_bytes,
        workdir=workdir,
        solved_threshold=config.solved_threshold,
        run_dir=Path(run_dir),
        agent_env=dict(agent_env),
        model=config.model,
        forum=tuple(forum),
    )
    usage = Usage()
    fallback = ""
    written_by = distiller_name
    try:
        result = distiller.distill(request)
        usage = result.usage
        fallback = result.fallback
        written_by = result.written_by or distiller_name
        notes, dropped = checked_notes(result.notes, request, config.holdout_task_ids or ())
        if dropped and not notes:
            raise ValueError(f"all {dropped} of its notes cite no scored attempt of the run")
    except Exception as exc:
        fallback = (
            f"distiller {distiller_name!r} failed ({type(exc).__name__}: {exc}); "
            "the evidence distiller's notes were stored instead"
        )
        try:
            notes, written_by = evidence_notes(request), "evidence"
        except Exception as again:
            raise DistillationFailed(
                f"distiller {distiller_name!r} failed ({type(exc).__name__}: {exc}), and so did "
                f"the evidence distiller ({type(again).__name__}: {again}); no notes were stored "
                f"for generation {generation}, so the next one gets the newest earlier notes"
            ) from again
    knowledge = Knowledge(
        generation=generation,
        distiller=written_by,
        notes=notes,
        fallback=fallback,
        usage=usage,
        created_at=now(),
    )
    # The store first (one transaction), then the files from what it stored: a kill
    # between the two leaves the notes in the store, and the resume writes the files.
    knowledge = store.store(knowledge)
    write_knowledge(run_dir, knowledge)
    return knowledge
