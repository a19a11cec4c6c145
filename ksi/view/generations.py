"""What a view adds to a run's generations summary: links to notes, and who got which.

The per-generation figures themselves are computed once, by
:func:`ksi.generations.figures.summarize_generations`, and reach every
view as :attr:`ksi.records.RunSummary.generations` (hold-outs counted
apart there). This module only finds the notes each generation stored
(``knowledge/<generation>/KNOWLEDGE.md``) so a view can link to them, and
says in words which notes an attempt was given (its record's
:class:`~ksi.records.KnowledgeRef`).
"""

from __future__ import annotations

from pathlib import Path

from ksi.knowledge.store import KNOWLEDGE_DIR, generation_dir, stored_generations
from ksi.records import GenerationsSummary, KnowledgeRef

#: Hex digits of a notes file's SHA-256 a view prints (the record keeps all 64).
SHORT_HASH = 12


def notes_files(run_dir: Path) -> dict[int, str]:
    """Generation -> run-relative path of its ``KNOWLEDGE.md``, for every stored generation."""
    return {
        g: f"{KNOWLEDGE_DIR}/{g}/KNOWLEDGE.md"
        for g in stored_generations(run_dir)
        if (generation_dir(run_dir, g) / "KNOWLEDGE.md").is_file()
    }


def notes_given(ref: KnowledgeRef) -> str:
    """``generation 1's notes: n1, n2 (sha256 0123456789ab)``: what an attempt was given."""
    source = "seeded notes" if ref.generation == 0 else f"generation {ref.generation}'s notes"
    ids = ", ".join(ref.note_ids) if ref.note_ids else "none fitted the budget"
    digest = f" (sha256 {ref.sha256[:SHORT_HASH]})" if ref.sha256 else ""
    return f"{source}: {ids}{digest}"


def newly_solved_ids(generations: GenerationsSummary, generation: int) -> tuple[str, ...]:
    """The learning tasks first solved in ``generation``, in the run's task order."""
    return tuple(
        t.task_id for t in generations.tasks if t.solved_generation == generation and not t.holdout
    )


def learning_tasks(generations: GenerationsSummary) -> int:
    """How many of the run's tasks are learned from (the cumulative figures' denominator)."""
    return len(generations.tasks) - len(generations.holdout_task_ids)
