"""Getting a run's generation loop set up before anything is written.

The strategy and distiller are looked up, hold-out ids checked against the
tasks, and a ``--seed-knowledge`` bundle read and hashed, all before the run
directory exists: a run that cannot start leaves nothing behind, and its
error says which option to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi.attempt.components import resolve
from ksi.errors import RunError, UserInputError
from ksi.interfaces import Distiller, Strategy
from ksi.kinds import DISTILLER, STRATEGY
from ksi.knowledge.db import KnowledgeDB
from ksi.knowledge.models import Knowledge, PlanRequest
from ksi.knowledge.store import (
    generation_dir,
    load_bundle,
    read_knowledge,
    seeded_knowledge,
    stored_generations,
)
from ksi.models import TaskSpec
from ksi.records import now
from ksi.rundir.config import RunConfig


@attrs.frozen
class GenerationSetup:
    """What the generation loop runs with: the resolved strategy and distiller, and the seed."""

    strategy: Strategy
    strategy_name: str
    distiller: Distiller
    distiller_name: str
    #: The seeded notes (``--seed-knowledge``) to store as generation 0, if any.
    seed: Knowledge | None = None


def resolve_generation_setup(
    config: RunConfig, tasks: Sequence[TaskSpec], run_dir: Path
) -> GenerationSetup:
    """Strategy, distiller and seed notes for ``config``; a :class:`UserInputError` if wrong."""
    ids = {t.id for t in tasks}
    unknown = [t for t in config.holdout_task_ids or () if t not in ids]
    if unknown:
        raise UserInputError(
            f"--holdout-task-ids: unknown task id(s) {', '.join(map(repr, unknown))}; "
            "`ksi tasks list` shows the ids"
        )
    if config.holdout_task_ids and set(config.holdout_task_ids) >= ids:
        raise UserInputError(
            "--holdout-task-ids: every task is a hold-out, so no task is left to learn from; "
            "hold out some of the tasks only"
        )
    if config.knowledge_db:
        check_store(Path(config.knowledge_db))
    strategy, _ = resolve(STRATEGY, config.strategy)
    distiller, _ = resolve(DISTILLER, config.distiller, config.distiller_options)
    seed = None
    if config.seed_knowledge:
        seed = _seed(config, run_dir)
    return GenerationSetup(strategy, config.strategy, distiller, config.distiller, seed)


def check_store(path: Path) -> None:
    """Refuse a ``--knowledge-db`` KSI cannot use before anything is written: a
    directory, a file that is no store, a store of a newer KSI. (A store that does
    not exist yet is made, with its directory, when the run starts.)"""
    if path.is_dir():
        raise UserInputError(f"--knowledge-db {path}: a directory; name the store's file")
    if path.exists():
        KnowledgeDB.check(path)


def _seed(config: RunConfig, run_dir: Path) -> Knowledge | None:
    """The bundle's notes, its hash recorded in ``config`` (a resume must find the same)."""
    path = Path(str(config.seed_knowledge))
    stored = generation_dir(run_dir, 0).exists()
    if stored and not path.exists():
        return None  # seeded already; the bundle file is not needed any more
    bundle, digest = load_bundle(path)
    config.seed_knowledge_sha256 = digest
    return seeded_knowledge(bundle, now())


def plan_tasks(
    strategy: Strategy, name: str, request: PlanRequest, learning: Sequence[str]
) -> tuple[str, ...]:
    """The strategy's plan, checked: only known, non-hold-out task ids, each once."""
    answer = strategy.plan(request)
    known = set(learning)
    planned: list[str] = []
    for task_id in answer:
        if task_id not in known:
            raise RunError(
                f"strategy {name!r} planned task {task_id!r} for generation "
                f"{request.generation}, which is not a (non-hold-out) task of this run"
            )
        if task_id not in planned:
            planned.append(task_id)
    return tuple(planned)


def distillation_spend(run_dir: Path) -> float:
    """What the stored distillations of a run cost (they count toward ``--max-cost``)."""
    total = 0.0
    for generation in stored_generations(run_dir):
        knowledge = read_knowledge(run_dir, generation)
        if knowledge is not None and knowledge.usage.cost_usd is not None:
            total += float(knowledge.usage.cost_usd)
    return total


def grow_progress(progress: Any, total: int, already_done: int) -> None:
    """A new generation's attempts join the progress display (if it can grow)."""
    grow = getattr(progress, "grow", None)
    if callable(grow):
        grow(total, already_done)
