"""Deriving a run's figures from its journal records.

Unscored and errored attempts are counted apart: they never count as a
failure in a best score, and a task none of whose attempts was scored has no
best score (it is still a task, so it is not solved). ``pass@k`` uses the
unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)`` with
``n`` scored attempts of which ``c`` reached the threshold, averaged over the
tasks with at least ``k`` scored attempts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from math import comb
from pathlib import Path

import attrs

from ksi.generations.figures import summarize_generations
from ksi.layout import RunLayout
from ksi.models import known_sum
from ksi.records import (
    AttemptRecord,
    AttemptStatus,
    GenerationsSummary,
    RunSummary,
    TaskSummary,
    is_solved,
)
from ksi.rundir.journal import (
    JournalContents,
    journal_warnings,
    latest_by_attempt,
    read_journal,
    spending_records,
)
from ksi.rundir.run_state import load_run_state


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples (of ``n``, ``c`` correct) is correct."""
    if k > n:
        raise ValueError(f"k={k} exceeds n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_k_values(attempts: int) -> list[int]:
    if attempts <= 10:
        return list(range(1, attempts + 1))
    return sorted({1, 5, 10, attempts})


def summarize(
    records: Iterable[AttemptRecord],
    *,
    run_id: str,
    run_dir: str,
    task_ids: Sequence[str],
    attempts_per_task: int,
    solved_threshold: float = 1.0,
    wall_time_sec: float | None = None,
    run_complete: bool = False,
    stopped_reason: str = "",
    warnings: Sequence[str] = (),
) -> RunSummary:
    all_records = list(records)
    latest = latest_by_attempt(all_records)
    by_task: dict[str, list[AttemptRecord]] = defaultdict(list)
    for (task_id, _), rec in sorted(latest.items(), key=lambda kv: kv[0][1]):
        by_task[task_id].append(rec)
    spent = spending_records(all_records)
    spend: dict[str, list[AttemptRecord]] = defaultdict(list)
    for rec in spent:  # every try spent money, retried or not
        spend[rec.task_id].append(rec)

    ks = pass_k_values(attempts_per_task) if attempts_per_task > 1 else []
    pass_sums: dict[int, list[float]] = defaultdict(list)
    tasks: list[TaskSummary] = []
    for task_id in task_ids:
        recs = by_task.get(task_id, [])
        scores = [r.score for r in recs if r.status == AttemptStatus.SCORED and r.score is not None]
        successes = sum(1 for s in scores if is_solved(s, solved_threshold))
        best = max(scores) if scores else None
        task_pass: float | None = None
        for k in ks:
            if len(scores) >= k:
                value = pass_at_k(len(scores), successes, k)
                pass_sums[k].append(value)
                if k == attempts_per_task:
                    task_pass = value
        tasks.append(
            TaskSummary(
                task_id=task_id,
                attempts=len(recs),
                scored=len(scores),
                unscored=sum(1 for r in recs if r.status == AttemptStatus.UNSCORED),
                errors=sum(1 for r in recs if r.status.is_error),
                best_score=best,
                solved=is_solved(best, solved_threshold),
                successes=successes,
                pass_at_k=task_pass,
                cost_usd=known_sum(r.usage.cost_usd for r in spend.get(task_id, [])),
                input_tokens=sum(r.usage.input_tokens for r in spend.get(task_id, [])),
                output_tokens=sum(r.usage.output_tokens for r in spend.get(task_id, [])),
            )
        )

    solved = sum(1 for t in tasks if t.solved)
    bests = [t.best_score for t in tasks if t.best_score is not None]
    total_cost = known_sum(t.cost_usd for t in tasks)
    counted = set(task_ids)
    estimated = [
        r.usage
        for r in spent
        if r.task_id in counted and r.usage.cost_estimated and r.usage.cost_usd is not None
    ]

    return RunSummary(
        run_id=run_id,
        run_dir=run_dir,
        tasks=tuple(tasks),
        records=tuple(all_records),
        n_tasks=len(task_ids),
        n_attempts=len(latest),
        solved_tasks=solved,
        solve_rate=solved / len(task_ids) if task_ids else 0.0,
        mean_best_score=sum(bests) / len(bests) if bests else None,
        unscored_attempts=sum(1 for r in latest.values() if r.status == AttemptStatus.UNSCORED),
        error_attempts=sum(1 for r in latest.values() if r.status.is_error),
        pass_at_k={f"pass@{k}": sum(v) / len(v) for k, v in sorted(pass_sums.items()) if v},
        solved_threshold=solved_threshold,
        wall_time_sec=wall_time_sec,
        run_complete=run_complete,
        stopped_reason=stopped_reason,
        total_cost_usd=total_cost,
        attempts_cost_usd=total_cost,
        cost_per_solved_task=(total_cost / solved) if (total_cost is not None and solved) else None,
        estimated_cost_usd=sum(u.cost_usd or 0.0 for u in estimated) if estimated else None,
        price_tables=tuple(sorted({u.price_table for u in estimated if u.price_table})),
        input_tokens=sum(r.usage.input_tokens for r in spent),
        output_tokens=sum(r.usage.output_tokens for r in spent),
        cache_read_tokens=sum(r.usage.cache_read_tokens for r in spent),
        cache_write_tokens=sum(r.usage.cache_write_tokens for r in spent),
        warnings=tuple(warnings),
        skipped_files=sum(_skipped(r) for r in latest.values()),
        attempts_with_skipped_files=sum(1 for r in latest.values() if _skipped(r)),
        score_conflicts=sum(1 for r in latest.values() if has_score_conflict(r)),
    )


def has_score_conflict(record: AttemptRecord) -> bool:
    """Whether the attempt's score came from a score.json contradicting its eval's exit code."""
    return record.eval is not None and record.eval.details.get("score_conflict") is True


def _skipped(record: AttemptRecord) -> int:
    """Paths capture skipped in one attempt (records older than the counts: their list)."""
    return sum(record.skipped_counts.values()) or len(record.skipped_files)


def _control_records(run_dir: Path) -> list[AttemptRecord]:
    layout = RunLayout(Path(run_dir).resolve())
    load_run_state(layout)  # a clear error when it is no run directory
    return list(read_journal(layout.journal).records)


def summarize_run(
    run_dir: Path,
    *,
    solved_threshold: float | None = None,
    journal: JournalContents | None = None,
    control: Path | None = None,
) -> RunSummary:
    """The summary of a run directory, from its journal and run.json alone.

    ``journal``: the journal's contents when the caller holds them already
    (the driver that wrote it: :meth:`ksi.rundir.journal.Journal.current`).
    ``control``: a run on the same tasks with ``--knowledge none``, whose attempts
    each note's receivers are compared with (:class:`~ksi.records.NoteEvidence`).
    """
    layout = RunLayout(Path(run_dir).resolve())
    state = load_run_state(layout)
    config = state.config
    threshold = solved_threshold if solved_threshold is not None else config.solved_threshold
    if journal is None:
        journal = read_journal(layout.journal)
    summary = summarize(
        journal.records,
        run_id=state.run_id or layout.root.name,
        run_dir=str(layout.root),
        task_ids=state.task_ids,
        attempts_per_task=config.attempts,
        solved_threshold=float(threshold),
        wall_time_sec=state.wall_time_sec(),
        run_complete=state.run_complete,
        stopped_reason=state.stopped_reason,
        warnings=journal_warnings(layout.journal, journal),
    )
    summary = attrs.evolve(summary, provenance=state.provenance)
    if config.generations <= 1:
        return summary

    generations = summarize_generations(
        layout.root,
        journal.records,
        config=config,
        task_ids=state.task_ids,
        solved_threshold=float(threshold),
        control=None if control is None else _control_records(control),
    )
    return attrs.evolve(
        _with_generation_costs(summary, generations),
        generations=generations,
        warnings=(*summary.warnings, *generations.warnings),
    )


def _with_generation_costs(summary: RunSummary, generations: GenerationsSummary) -> RunSummary:
    """``summary`` whose total also holds what distillations and forum sessions spent: they
    count toward ``--max-cost``, so a total without them would read less than the run cost."""
    distill = known_sum(g.distill_cost_usd for g in generations.generations)
    forum = known_sum(g.forum_cost_usd for g in generations.generations)
    total = known_sum((summary.attempts_cost_usd, distill, forum))
    solved = summary.solved_tasks
    return attrs.evolve(
        summary,
        total_cost_usd=total,
        cost_per_solved_task=total / solved if total is not None and solved else None,
        distill_cost_usd=distill,
        forum_cost_usd=forum,
    )
