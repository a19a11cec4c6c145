"""The per-generation figures of a run, as typed values (renderers read these).

Derived from the journal, ``generations.jsonl`` and the stored notes by
:func:`ksi.runner.generation_summary.summarize_generations`; carried on
:attr:`ksi.runner.models.RunSummary.generations` (``None`` for a run of one
generation), written into ``--output-json`` / ``ksi report --json`` and shown
by the terminal summary.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class GenerationSummary:
    """One generation. Hold-out tasks are counted apart, never in the learning figures."""

    generation: int
    #: Learning (non-hold-out) tasks the generation ran.
    tasks_attempted: int
    #: Of those, the tasks one of this generation's attempts solved.
    solved: int
    #: ``solved / tasks_attempted`` (0.0 when it ran none).
    solve_rate: float
    #: Tasks first solved in this generation.
    newly_solved: int
    #: Learning tasks solved in this generation or before.
    cumulative_solved: int
    #: ``cumulative_solved`` over every learning task of the run.
    cumulative_solve_rate: float
    #: What its attempts and its distillation cost (None: nothing reported a cost).
    cost_usd: float | None = None
    #: The part of ``cost_usd`` its distillation spent.
    distill_cost_usd: float | None = None
    holdout_attempted: int = 0
    holdout_solved: int = 0
    #: The stored generation whose notes its attempts got (0: seeded; None: no notes).
    knowledge_from: int | None = None
    #: Who wrote its notes ("" : not distilled yet, or not to be distilled).
    distiller: str = ""
    #: Why the configured distiller's notes were not used ("" when they were).
    fallback: str = ""
    #: Why it has no notes ("" when it has, or is not distilled yet).
    not_distilled: str = ""
    distilled: bool = False


@attrs.frozen
class TaskGenerations:
    """One task across generations."""

    task_id: str
    holdout: bool
    best_score: float | None
    #: The first generation that reached ``best_score`` (None: never scored).
    best_generation: int | None
    #: The first generation that solved it (None: not solved).
    solved_generation: int | None
    #: The generations it ran in.
    generations_run: tuple[int, ...] = ()


@attrs.frozen
class GenerationsSummary:
    """Every generation of a run, and every task's progress through them."""

    #: ``--generations`` (the most the run may run; a strategy may stop sooner).
    planned: int
    strategy: str
    knowledge: str
    distiller: str
    generations: tuple[GenerationSummary, ...]
    tasks: tuple[TaskGenerations, ...]
    holdout_task_ids: tuple[str, ...] = ()
