"""Per-generation figures of a run, from its records alone.

Every record carries a ``generation`` (1 for runs of one generation and for
records written before generations existed). For each generation: the tasks
it attempted, those it solved, those solved for the first time, the solve
rate among the tasks it attempted, and the tasks solved so far (cumulative)
over all the run's tasks. "Solved" is the run's one predicate: a scored
attempt whose score reaches the solved threshold. The field names are those
of the per-generation summary the generations work (issue 12) reports.

The notes each generation's distillation wrote are stored in the run
directory as ``knowledge/<generation>/KNOWLEDGE.md``; :func:`notes_files`
finds them so a view can link to them.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from ksi.runner.journal import latest_by_attempt, spending_records
from ksi.runner.models import AttemptRecord, is_solved


@attrs.frozen
class GenerationStats:
    generation: int
    attempts: int
    tasks_attempted: int
    solved: int
    #: Tasks first solved in this generation, in the run's task order.
    newly_solved_ids: tuple[str, ...]
    cumulative_solved: int
    #: ``solved / tasks_attempted`` (0 when nothing was attempted).
    solve_rate: float
    #: ``cumulative_solved`` over all the run's tasks.
    cumulative_solve_rate: float
    cost_usd: float | None = None


def generation_stats(
    records: Iterable[AttemptRecord],
    task_ids: Sequence[str],
    *,
    solved_threshold: float = 1.0,
) -> list[GenerationStats]:
    """One entry per generation present in ``records``, in order."""
    all_records = list(records)
    latest = latest_by_attempt(all_records).values()
    by_gen: dict[int, list[AttemptRecord]] = defaultdict(list)
    for rec in latest:
        by_gen[rec.generation].append(rec)
    costs: dict[int, list[float]] = defaultdict(list)
    for rec in spending_records(all_records):
        if rec.usage.cost_usd is not None:
            costs[rec.generation].append(rec.usage.cost_usd)
    order = {task_id: i for i, task_id in enumerate(task_ids)}
    solved_before: set[str] = set()
    stats = []
    for gen in sorted(by_gen):
        recs = by_gen[gen]
        attempted = {r.task_id for r in recs}
        solved = {
            r.task_id for r in recs if r.status == "scored" and is_solved(r.score, solved_threshold)
        }
        new = sorted(solved - solved_before, key=lambda t: (order.get(t, len(order)), t))
        solved_before |= solved
        stats.append(
            GenerationStats(
                generation=gen,
                attempts=len(recs),
                tasks_attempted=len(attempted),
                solved=len(solved),
                newly_solved_ids=tuple(new),
                cumulative_solved=len(solved_before),
                solve_rate=len(solved) / len(attempted) if attempted else 0.0,
                cumulative_solve_rate=len(solved_before) / len(task_ids) if task_ids else 0.0,
                cost_usd=sum(costs[gen]) if costs.get(gen) else None,
            )
        )
    return stats


def has_generations(stats: Sequence[GenerationStats]) -> bool:
    """Whether a run is worth a generations section: more than one generation, or a later one."""
    return len(stats) > 1 or any(s.generation > 1 for s in stats)


def notes_files(run_dir: Path) -> dict[int, str]:
    """Generation -> run-relative path of ``knowledge/<generation>/KNOWLEDGE.md``, where one is."""
    found: dict[int, str] = {}
    try:
        entries = os.listdir(run_dir / "knowledge")
    except OSError:
        return found
    for name in entries:
        if name.isdigit() and (run_dir / "knowledge" / name / "KNOWLEDGE.md").is_file():
            found[int(name)] = f"knowledge/{name}/KNOWLEDGE.md"
    return dict(sorted(found.items()))
