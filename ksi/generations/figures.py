"""Per-generation figures from a run directory (see :mod:`ksi.records`).

"Solved" is :func:`ksi.models.is_solved` on scored attempts, as everywhere
else; unscored attempts count for nothing here either, and a generation's solve
rate is over the tasks it scored, as its notes say ("1 of 3 scored tasks").

Beside them, what the notes did (:class:`~ksi.records.NoteEvidence`): per note,
the scored attempts that received it against comparable ones that did not
(the same tasks, earlier generations), and per task the notes its first
solving attempt had received. Evidence, never proof: attempts differ in more
than their notes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from ksi.generations.phases import Phases
from ksi.knowledge.forum import FileForumStore
from ksi.knowledge.models import Note
from ksi.knowledge.store import KnowledgeUnreadable, read_knowledge
from ksi.models import is_solved, known_sum
from ksi.records import (
    AttemptRecord,
    AttemptStatus,
    GenerationsSummary,
    GenerationSummary,
    NoteEvidence,
    TaskGenerations,
)
from ksi.rundir.config import RunConfig
from ksi.rundir.journal import latest_by_attempt, spending_records


def summarize_generations(
    run_dir: Path,
    records: Sequence[AttemptRecord],
    *,
    config: RunConfig,
    task_ids: Sequence[str],
    solved_threshold: float,
    control: Sequence[AttemptRecord] | None = None,
) -> GenerationsSummary:
    """The figures of a run of several generations; ``control``: the records of a control
    run (the ``--knowledge none`` arm) each note's receivers are compared with too."""
    phases = Phases.read(run_dir)
    forum = FileForumStore(run_dir)
    holdouts = tuple(t for t in config.holdout_task_ids or () if t in set(task_ids))
    learning = [t for t in task_ids if t not in set(holdouts)]
    latest = _scored(records)
    by_gen: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in latest:
        assert rec.score is not None
        by_gen[rec.generation][rec.task_id].append(rec.score)
    spend: dict[int, list[float | None]] = defaultdict(list)
    for rec in spending_records(list(records)):
        spend[rec.generation].append(rec.usage.cost_usd)

    first_solved: dict[str, int] = {}
    best: dict[str, tuple[float, int]] = {}
    ran: dict[str, set[int]] = defaultdict(set)
    for g in sorted(by_gen):
        for task_id, scores in by_gen[g].items():
            top = max(scores)
            if task_id not in best or top > best[task_id][0]:
                best[task_id] = (top, g)
            if task_id not in first_solved and is_solved(top, solved_threshold):
                first_solved[task_id] = g
    for g, event in phases.started.items():
        for task_id in event.task_ids:
            ran[task_id].add(g)

    gens = []
    unreadable: list[str] = []
    read_notes: dict[str, Note] = {}
    try:
        seeded = read_knowledge(run_dir, 0)
    except KnowledgeUnreadable as exc:
        seeded = None
        unreadable.append(str(exc))
    if seeded is not None:
        read_notes.update((n.id, n) for n in seeded.notes)
    for g in sorted(phases.started):
        event = phases.started[g]
        held = set(event.holdout_task_ids)
        planned = [t for t in event.task_ids if t not in held]
        gen_scores = by_gen.get(g, {})

        def solved_here(task_id: str, gen_scores: Mapping[str, list[float]] = gen_scores) -> bool:
            return any(is_solved(s, solved_threshold) for s in gen_scores.get(task_id, []))

        solved = sum(1 for t in planned if solved_here(t))
        scored_here = sum(1 for t in planned if gen_scores.get(t))
        cumulative = sum(1 for t in learning if first_solved.get(t, g + 1) <= g)
        done = phases.distilled.get(g)
        knowledge = None
        if done is not None and not done.skipped:
            try:
                knowledge = read_knowledge(run_dir, g)
            except KnowledgeUnreadable as exc:
                unreadable.append(str(exc))
        if knowledge is not None:
            read_notes.update((n.id, n) for n in knowledge.notes)
        distill_cost = knowledge.usage.cost_usd if knowledge is not None else None
        sessions = forum.sessions(g)
        forum_cost = known_sum([s.usage.cost_usd for s in sessions])
        gens.append(
            GenerationSummary(
                generation=g,
                tasks_attempted=len(planned),
                tasks_scored=scored_here,
                solved=solved,
                solve_rate=solved / scored_here if scored_here else 0.0,
                newly_solved=sum(1 for t in learning if first_solved.get(t) == g),
                cumulative_solved=cumulative,
                cumulative_solve_rate=cumulative / len(learning) if learning else 0.0,
                cost_usd=known_sum([*spend.get(g, []), forum_cost, distill_cost]),
                distill_cost_usd=distill_cost,
                forum_cost_usd=forum_cost,
                forum_sessions=len(sessions),
                forum_posts=sum(len(s.posts) for s in sessions),
                forum_dropped=sum(len(s.dropped) for s in sessions),
                holdout_attempted=len(held),
                holdout_solved=sum(1 for t in held if solved_here(t)),
                knowledge_from=event.knowledge_from,
                distiller=done.distiller if done is not None else "",
                fallback=done.fallback if done is not None else "",
                not_distilled=done.skipped if done is not None else "",
                distilled=done is not None and not done.skipped,
            )
        )
    before_solve = _notes_before_solve(latest, solved_threshold)
    tasks = tuple(
        TaskGenerations(
            task_id=t,
            holdout=t in set(holdouts),
            best_score=best[t][0] if t in best else None,
            best_generation=best[t][1] if t in best else None,
            solved_generation=first_solved.get(t),
            generations_run=tuple(sorted(ran.get(t, ()))),
            notes_before_solve=before_solve.get(t, ()),
        )
        for t in task_ids
    )
    return GenerationsSummary(
        planned=config.generations,
        strategy=config.strategy,
        knowledge=config.knowledge,
        distiller=config.distiller,
        generations=tuple(gens),
        tasks=tasks,
        holdout_task_ids=holdouts,
        warnings=tuple(unreadable),
        notes=note_evidence(
            latest,
            solved_threshold,
            read_notes,
            control=None if control is None else _scored(control),
        ),
    )


def _scored(records: Sequence[AttemptRecord]) -> list[AttemptRecord]:
    return [
        r for r in latest_by_attempt(list(records)).values() if r.status == AttemptStatus.SCORED
    ]


def _received(record: AttemptRecord) -> tuple[str, ...]:
    return record.knowledge.note_ids if record.knowledge is not None else ()


def _notes_before_solve(
    scored: Sequence[AttemptRecord], threshold: float
) -> dict[str, tuple[str, ...]]:
    """Task -> the notes its first solving attempt (earliest generation, then number) got."""
    first: dict[str, AttemptRecord] = {}
    for rec in sorted(scored, key=lambda r: (r.generation, r.attempt)):
        if rec.task_id not in first and is_solved(rec.score, threshold):
            first[rec.task_id] = rec
    return {t: _received(rec) for t, rec in first.items()}


def note_evidence(
    scored: Sequence[AttemptRecord],
    threshold: float,
    notes: Mapping[str, Note],
    *,
    control: Sequence[AttemptRecord] | None = None,
) -> tuple[NoteEvidence, ...]:
    """Per note some of ``scored`` received: its receivers' solves against comparable
    attempts' (same task, an earlier generation than its last receiver there, without
    it), and against the ``control`` run's attempts at the receivers' tasks and
    generations. ``notes`` gives each note's kind and task where known."""
    in_control: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for rec in control or ():
        in_control[(rec.task_id, rec.generation)].append(is_solved(rec.score, threshold))
    by_task: dict[str, list[tuple[int, frozenset[str], bool]]] = defaultdict(list)
    receivers: dict[str, list[tuple[str, int, bool]]] = defaultdict(list)
    for rec in scored:
        got = frozenset(_received(rec))
        solved = is_solved(rec.score, threshold)
        by_task[rec.task_id].append((rec.generation, got, solved))
        for note_id in got:
            receivers[note_id].append((rec.task_id, rec.generation, solved))
    out = []
    for note_id, got_it in receivers.items():
        last: dict[str, int] = {}
        for task_id, generation, _ in got_it:
            last[task_id] = max(last.get(task_id, 0), generation)
        compared = [
            solved
            for task_id, until in last.items()
            for generation, given, solved in by_task[task_id]
            if generation < until and note_id not in given
        ]
        note = notes.get(note_id)
        pairs = {(t, g) for t, g, _ in got_it}
        control_solves = [s for pair in pairs for s in in_control.get(pair, ())]
        out.append(
            NoteEvidence(
                note_id=note_id,
                kind=note.kind if note is not None else "",
                task_id=note.task_id if note is not None else None,
                received=len(got_it),
                received_solved=sum(1 for _, _, s in got_it if s),
                compared=len(compared),
                compared_solved=sum(compared),
                control=None if control is None else len(control_solves),
                control_solved=None if control is None else sum(control_solves),
            )
        )
    out.sort(key=lambda e: (-e.received, e.note_id))
    return tuple(out)
