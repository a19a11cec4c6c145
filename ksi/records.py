"""What a run records: one :class:`AttemptRecord` per finished attempt, and the summary.

Records are what the journal holds, line by line; the summary is always
derived from records (never kept only in memory), so ``ksi report`` on a
killed run shows exactly what a finished one would have.
"""

from __future__ import annotations

import datetime as dt
import enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ksi.models import EvalResult, Usage
from ksi.models import is_solved as is_solved  # the one solved predicate, for the runner
from ksi.provenance import Provenance

if TYPE_CHECKING:
    from ksi.rundir.config import RunConfig


def now() -> str:
    """A UTC timestamp as KSI writes them (run.json, records)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


# The per-generation figures of a run (renderers read these), derived from the journal,
# ``generations.jsonl`` and the stored notes by
# :func:`ksi.generations.figures.summarize_generations`; carried on
# :attr:`RunSummary.generations` (``None`` for a run of one generation).


@attrs.frozen
class GenerationSummary:
    """One generation. Hold-out tasks are counted apart, never in the learning figures."""

    generation: int
    #: Learning (non-hold-out) tasks the generation ran.
    tasks_attempted: int
    #: Of those, the tasks one of this generation's attempts solved.
    solved: int
    #: ``solved / tasks_scored`` (0.0 when it scored none): a task none of whose attempts
    #: could be scored (no eval, an agent error) is neither solved nor unsolved.
    solve_rate: float
    #: Tasks first solved in this generation.
    newly_solved: int
    #: Learning tasks solved in this generation or before.
    cumulative_solved: int
    #: ``cumulative_solved`` over every learning task of the run.
    cumulative_solve_rate: float
    #: What its attempts, its forum and its distillation cost (None: nothing reported a cost).
    cost_usd: float | None = None
    #: The part of ``cost_usd`` its distillation spent.
    distill_cost_usd: float | None = None
    #: The part of ``cost_usd`` its forum's sessions spent (``--forum-rounds``).
    forum_cost_usd: float | None = None
    #: Its forum: sessions run, posts kept, post files dropped (0 without a forum).
    forum_sessions: int = 0
    forum_posts: int = 0
    forum_dropped: int = 0
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
    #: Of ``tasks_attempted``, the tasks one of this generation's attempts scored (the
    #: tasks its notes speak of: "Generation g: 1 of 3 scored tasks solved").
    tasks_scored: int = 0

    @property
    def tasks_shown(self) -> str:
        """The tasks it ran, with those it could not score: ``4 (1 unscored)``."""
        unscored = self.tasks_attempted - self.tasks_scored
        return f"{self.tasks_attempted}" + (f" ({unscored} unscored)" if unscored else "")


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
    #: The notes the attempt that first solved it had received (empty: it had none).
    notes_before_solve: tuple[str, ...] = ()


@attrs.frozen
class NoteEvidence:
    """One note against its outcomes: evidence of what it did, not proof.

    ``received``: the scored attempts that received it, and how many solved;
    ``compared``: scored attempts at the same tasks, in generations before the
    last one that received it there, that did not receive it (the attempts it
    could have helped, had it existed), and how many solved; ``control``: with
    a control run (``ksi report --control``, the ``--knowledge none`` arm), its
    scored attempts at the receivers' tasks in the receivers' generations.
    """

    note_id: str
    #: Its kind and task, when its stored generation could be read ("" and None if not).
    kind: str = ""
    task_id: str | None = None
    received: int = 0
    received_solved: int = 0
    compared: int = 0
    compared_solved: int = 0
    #: None: no control run was given.
    control: int | None = None
    control_solved: int | None = None

    @property
    def received_rate(self) -> float | None:
        return self.received_solved / self.received if self.received else None

    @property
    def compared_rate(self) -> float | None:
        return self.compared_solved / self.compared if self.compared else None

    @property
    def control_rate(self) -> float | None:
        if not self.control or self.control_solved is None:
            return None
        return self.control_solved / self.control


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
    #: What could not be read (a damaged ``notes.json``): the figures stand without it.
    warnings: tuple[str, ...] = ()
    #: Every note some scored attempt received, most received first.
    notes: tuple[NoteEvidence, ...] = ()


class AttemptStatus(enum.StrEnum):
    """What became of an attempt (``AttemptRecord.status``; docs/running.md, "Statuses")."""

    #: The evaluator gave a score.
    SCORED = "scored"
    #: The evaluator could not score it (eval timeout, missing workspace, no eval command...).
    UNSCORED = "unscored"
    #: The agent failed for a reason outside the task (auth, rate limit, could not start).
    AGENT_ERROR = "agent_error"
    #: KSI, the environment or the executor failed on it (an environment that could not
    #: start, a worker that died...).
    ERROR = "error"

    @property
    def is_error(self) -> bool:
        """Counted as an error in the figures: ``agent_error`` and ``error`` alike."""
        return self in (AttemptStatus.AGENT_ERROR, AttemptStatus.ERROR)


class ErrorKind(enum.StrEnum):
    """What stopped an ``error`` attempt, when KSI knows (``AttemptRecord.error_kind``).

    Each known kind is no fault of the attempt: a resume runs it again,
    whatever ``--retries`` says.
    """

    #: Not known, or not an error ("" in the record).
    NONE = ""
    #: The disk filled up (:mod:`ksi.attempt.diskfull`).
    DISK_FULL = "disk_full"
    #: The worker running it (a process, a cluster node) died under it.
    WORKER_LOST = "worker_lost"


#: The name executors have used for :attr:`ErrorKind.WORKER_LOST` (docs/plugins.md).
WORKER_LOST = ErrorKind.WORKER_LOST


@attrs.frozen
class KnowledgeRef:
    """Which notes an attempt was given (``KNOWLEDGE.md`` beside its ``repo/``)."""

    #: The generation whose stored notes these are (0: notes seeded with ``--seed-knowledge``).
    generation: int
    #: The ids of the notes rendered into the file (after the size budget).
    note_ids: tuple[str, ...] = ()
    #: SHA-256 of the ``KNOWLEDGE.md`` text the attempt received.
    sha256: str = ""


@attrs.frozen
class Timings:
    seed: float = 0.0
    agent: float = 0.0
    capture: float = 0.0
    eval: float = 0.0
    total: float = 0.0


@attrs.frozen
class SkippedFile:
    """A file capture did not copy, and why (nothing is dropped silently)."""

    path: str
    reason: str
    size: int | None = None
    #: Which rule skipped it (``test_created``, ``test_restored``, ``score_json``,
    #: ``too_large``...; "" in records written before kinds were listed).
    kind: str = ""


@attrs.frozen
class RoundResult:
    """An earlier round of an attempt whose evaluator gives feedback (see
    :class:`ksi.interfaces.GivesFeedback`): how the work stood when it ended."""

    round: int
    score: float | None
    eval_status: str
    agent_status: str = ""


@attrs.frozen
class AttemptRecord:
    """One finished attempt, exactly as journalled."""

    task_id: str
    attempt: int
    status: AttemptStatus = attrs.field(converter=AttemptStatus)
    score: float | None
    agent: str
    evaluator: str
    environment: str
    #: 0 for the first try of this (task, attempt); n for the n-th retry.
    try_number: int = 0
    model: str | None = None
    agent_status: str = ""
    agent_exit_code: int | None = None
    agent_timed_out: bool = False
    #: The evaluator's result (journalled as the original KSI's result dict).
    eval: EvalResult | None = None
    timings: Timings = attrs.field(factory=Timings)
    usage: Usage = attrs.field(factory=Usage)
    final_message: str = ""
    #: The first paths capture skipped (at most ``capture.MAX_LISTED_SKIPS``), sorted.
    skipped_files: tuple[SkippedFile, ...] = ()
    #: Every path capture skipped, counted by kind (``too_large``, ``symlink_outside``...).
    skipped_counts: dict[str, int] = attrs.field(factory=dict)
    log_truncated: bool = False
    #: Whether the graded repo differs from the task's starting files (``None``: the
    #: attempt ended before capture, or its evaluator grades the environment, as a
    #: Harbor task's does, not repo/). ``False`` is worth a warning: the agent's work
    #: went elsewhere (the ``command`` agent starts in the workspace, not in repo/).
    repo_changed: bool | None = None
    error: str = ""
    #: What kind of error stopped the attempt, when KSI knows (a resume runs such an
    #: attempt again, whatever ``--retries`` says).
    error_kind: ErrorKind = attrs.field(default=ErrorKind.NONE, converter=ErrorKind)
    #: Relative to the run directory.
    attempt_dir: str = ""
    started_at: str = ""
    finished_at: str = ""
    retryable: bool = False
    #: Set when ``ksi regrade`` produced this record from an earlier one.
    regraded_at: str = ""
    #: The generation the attempt belongs to (1 in a run of one generation, and in
    #: records written before generations existed).
    generation: int = 1
    #: The notes of earlier generations the attempt was given (None: none).
    knowledge: KnowledgeRef | None = None
    #: The rounds before the last, for an evaluator that gives feedback between rounds
    #: (the record's ``score`` is the last round's); empty otherwise.
    rounds: tuple[RoundResult, ...] = ()


def error_record(error: str, *, kind: ErrorKind = ErrorKind.NONE, **identity: Any) -> AttemptRecord:
    """The record of an attempt that KSI, its environment or its executor could not finish.

    Unscored and retryable, finished now; ``identity`` is which attempt it was
    (``task_id``, ``attempt``, the component names...) and what is known of how
    far it got (``agent_status``, ``timings``, ``started_at``).
    """
    return AttemptRecord(
        status=AttemptStatus.ERROR,
        score=None,
        error=error,
        error_kind=kind,
        finished_at=now(),
        retryable=True,
        **identity,
    )


@attrs.frozen
class RunInfo:
    """A run as observers see it."""

    run_id: str
    run_dir: Path
    #: Every setting of the run, as ``run.json`` records it.
    config: RunConfig
    task_ids: tuple[str, ...]
    attempts_per_task: int


@attrs.frozen
class TaskSummary:
    task_id: str
    attempts: int
    scored: int
    unscored: int
    errors: int
    best_score: float | None
    solved: bool
    #: Attempts that reached the solved threshold.
    successes: int
    pass_at_k: float | None = None
    cost_usd: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0


@attrs.frozen
class RunSummary:
    """Totals and per-task figures, derived from journal records."""

    run_id: str
    run_dir: str
    tasks: tuple[TaskSummary, ...]
    records: tuple[AttemptRecord, ...]
    n_tasks: int
    n_attempts: int
    solved_tasks: int
    solve_rate: float
    mean_best_score: float | None
    unscored_attempts: int
    error_attempts: int
    pass_at_k: dict[str, float] = attrs.field(factory=dict)
    solved_threshold: float = 1.0
    wall_time_sec: float | None = None
    run_complete: bool = False
    stopped_reason: str = ""
    #: Everything the run reported spending: its attempts, distillations and forum sessions
    #: (the spend ``--max-cost`` counts; None: nothing reported a cost).
    total_cost_usd: float | None = None
    cost_per_solved_task: float | None = None
    #: The parts of ``total_cost_usd``: the attempts (what the per-task costs add up to),
    #: the distillations and the forum sessions (None: none of them reported a cost).
    attempts_cost_usd: float | None = None
    distill_cost_usd: float | None = None
    forum_cost_usd: float | None = None
    #: The part of ``total_cost_usd`` KSI estimated from tokens (agents that report no
    #: cost; see :mod:`ksi.pricing`), and the price tables it came from.
    estimated_cost_usd: float | None = None
    price_tables: tuple[str, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: Problems found while reading the run (a corrupt journal line...), for the user.
    warnings: tuple[str, ...] = ()
    #: Paths capture skipped (see each record's ``skipped_counts``), over the attempts counted.
    skipped_files: int = 0
    #: Attempts of which capture skipped at least one path.
    attempts_with_skipped_files: int = 0
    #: Attempts given full marks by a score.json while their eval command failed
    #: (``eval.details["score_conflict"]``): the agent's code may have written it.
    score_conflicts: int = 0
    #: Per-generation figures (None for a run of one generation).
    generations: GenerationsSummary | None = None
    #: The tasks file's hash and the git commits behind the run (run.json's).
    provenance: Provenance = attrs.field(factory=Provenance)

    @property
    def cost_parts(self) -> tuple[tuple[str, float | None], ...]:
        """``total_cost_usd`` by who spent it, for display; empty when only attempts did."""
        if self.distill_cost_usd is None and self.forum_cost_usd is None:
            return ()
        return (
            ("attempts", self.attempts_cost_usd),
            ("distillation", self.distill_cost_usd),
            ("forum", self.forum_cost_usd),
        )
