"""The generation loop: plan, attempts, forum, distil, generation after generation.

A run of one generation is a plain run: every task, ``--attempts`` each,
nothing distilled. With ``--generations N`` each generation follows the
steps of :mod:`ksi.generations.steps`, and ``generations.jsonl``
(:mod:`ksi.generations.phases`) records where the loop stands, so a resume
picks up at the step it was killed in and never asks the strategy twice.

With ``--forum-rounds`` (or ``--cross-task-forum-rounds``) a generation's
forum (:mod:`ksi.generations.forum`) runs between its attempts and its
distillation, and the distiller reads its posts.

The loop decides *what* runs; the run it belongs to (:class:`GenerationHost`,
the driver's session) runs the attempts, keeps the journal and the budget,
and tells the observers. A stop (``--max-cost``, a full disk, an auth error)
ends the loop before the distillation of an unfinished generation.

Before generation 1 of a new run, what the knowledge store holds about its
tasks from earlier runs (and the ``--seed-knowledge`` notes) is stored as
generation 0, the notes generation 1 gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ksi.choices import KnowledgeMode
from ksi.errors import DistillationFailed
from ksi.generations.forum import ForumPhase, ForumSessionPlan
from ksi.generations.phases import PhaseEvent, Phases, append_phase
from ksi.generations.run_store import FROM_STORE, RunStore
from ksi.generations.setup import GenerationSetup, plan_tasks
from ksi.generations.steps import (
    PlannedAttempt,
    count_missing,
    distill,
    knowledge_for,
    missing_attempts,
    needs_distillation,
    task_states,
)
from ksi.knowledge.forum import FileForumStore
from ksi.knowledge.models import Knowledge, PlanRequest
from ksi.knowledge.render import IndexedNotes
from ksi.knowledge.retrieval import NoteIndex
from ksi.knowledge.store import (
    clear_unfinished,
    read_knowledge,
    stored_generations,
    write_knowledge,
)
from ksi.models import TaskSpec
from ksi.records import AttemptRecord, now
from ksi.rundir.config import RunConfig

if TYPE_CHECKING:
    from ksi.plugins import ObserverHook


class GenerationHost(Protocol):
    """The run a :class:`GenerationLoop` drives (the driver's session)."""

    def records(self) -> list[AttemptRecord]:
        """Every record in the journal now."""

    def count_attempts(self, total: int, already_done: int) -> None:
        """A generation's ``total`` attempts join the run's count (and its progress)."""

    def run_attempts(self, plan: Iterable[PlannedAttempt], notes: IndexedNotes | None) -> None:
        """Run ``plan`` (taken as attempts are submitted), each attempt with ``KNOWLEDGE.md``
        from ``notes``; journal them."""

    def stopped(self) -> bool:
        """The run launches no more attempts (``--max-cost``, a full disk, an auth error)."""

    def over_budget(self) -> bool:
        """The reported spend reached ``--max-cost`` (which stops the run)."""

    def observe(self, hook: ObserverHook, **kwargs: Any) -> None:
        """Call the observers' ``hook`` (the run's info is added)."""

    def warn(self, message: str) -> None:
        """Something the user must hear at the end of the run."""

    def add_spend(self, usd: float) -> None:
        """A distillation's reported cost, which counts toward ``--max-cost``."""

    def run_forum_sessions(
        self,
        plan: Sequence[ForumSessionPlan],
        finished: Callable[[ForumSessionPlan, AttemptRecord], None],
    ) -> None:
        """Run forum sessions through the run's executor (:class:`ForumHost`)."""


class GenerationLoop:
    """The generations of one session of a run (see the module docstring)."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        tasks: Sequence[TaskSpec],
        setup: GenerationSetup,
        host: GenerationHost,
        *,
        agent_env: Mapping[str, str],
        store: RunStore,
    ) -> None:
        self._config = config
        self._root = run_dir
        self._setup = setup
        self._host = host
        self._store = store
        #: What an ``agent`` distiller's CLI may see (the attempts' scrubbed environment).
        self._agent_env = agent_env
        self._by_id = {t.id: t for t in tasks}
        held = set(config.holdout_task_ids or ())
        self._holdouts = tuple(t for t in self._by_id if t in held)
        self._learning = tuple(t for t in self._by_id if t not in set(self._holdouts))
        self._forum = ForumPhase(
            config, run_dir, self._by_id, host, FileForumStore(run_dir), index=store
        )

    def run(self) -> bool:
        """Run the generations still to run; True when the run is complete.

        Each generation is planned (or its recorded plan read back), its missing
        attempts run, then it is distilled; a stop (``--max-cost``, a full disk)
        ends the loop before the distillation of an unfinished generation.
        """
        cfg, root, host = self._config, self._root, self._host
        records = host.records()
        for generation in stored_generations(root):  # a run made before the store
            if not self._store.db.has_generation(self._store.run_id, generation):
                stored = read_knowledge(root, generation)
                assert stored is not None
                self._store.ensure(stored)
        self._first_notes(records)
        for generation in range(1, cfg.generations + 1):
            phases = Phases.read(root)
            event = phases.started.get(generation)
            if event is None:
                if generation == 1 and (
                    cfg.generations == 1 or any(r.generation == 1 for r in records)
                ):
                    # A plain run (or one that started as one): every task, as always.
                    planned = self._learning
                else:
                    states = task_states(records, self._learning, cfg.solved_threshold)
                    request = PlanRequest(generation, states, cfg.attempts, cfg.solved_threshold)
                    planned = plan_tasks(
                        self._setup.strategy, self._setup.strategy_name, request, self._learning
                    )
                    if not planned:
                        return True  # the strategy has nothing left to run
                    if host.stopped() or host.over_budget():
                        return False
                event, notes = self._start(generation, planned)
            else:  # resumed: the notes the generation started with, whatever came since
                source = event.knowledge_from
                notes = read_knowledge(root, source) if source is not None else None
            gen_tasks = [self._by_id[t] for t in event.task_ids if t in self._by_id]
            to_run = self._missing(gen_tasks, records, generation)
            total = len(gen_tasks) * cfg.attempts
            host.count_attempts(total, total - to_run)
            done = phases.distilled.get(generation)
            if done is not None and not to_run:
                continue  # finished in an earlier session: observers heard of it then
            host.observe("ksi_generation_started", generation=generation, task_ids=event.task_ids)
            if to_run and not host.over_budget():
                plan = missing_attempts(
                    gen_tasks, records, generation, attempts=cfg.attempts, retries=cfg.retries
                )
                host.run_attempts(plan, self._indexed(notes))
            records = host.records()
            if self._missing(gen_tasks, records, generation):
                return False  # stopped (--max-cost, a full disk) before the generation ended
            forum = done is None and cfg.forum and not needs_distillation(generation, cfg)
            if forum and not self._forum.run(generation, records):
                return False  # stopped before the forum ended: a resume finishes it
            if done is None and not needs_distillation(generation, cfg) and host.over_budget():
                return False  # a distillation may spend too: not past --max-cost
            knowledge = self._distill(generation, records, done)
            host.observe("ksi_generation_finished", generation=generation, knowledge=knowledge)
        return True

    def _first_notes(self, records: Sequence[AttemptRecord]) -> None:
        """Generation 0, once: the seed bundle's notes and, for a run that has not started,
        what earlier runs in the store learnt about its tasks."""
        root, store = self._root, self._store
        if self._config.knowledge == KnowledgeMode.NONE or (root / "knowledge" / "0").exists():
            return
        stored = store.stored(0)
        if stored is None:
            seed = self._setup.seed
            fresh = not records and not Phases.read(root).started
            earlier = store.earlier_notes() if fresh else ()
            if seed is None and not earlier:
                return
            sources = [seed.distiller] if seed is not None else []
            if earlier:
                sources.append(f"{FROM_STORE}:{store.path}")
            stored = store.store(
                Knowledge(
                    generation=0,
                    distiller=" + ".join(sources),
                    notes=(*(seed.notes if seed is not None else ()), *earlier),
                    created_at=now(),
                )
            )
        clear_unfinished(root)
        write_knowledge(root, stored)

    def _start(
        self, generation: int, planned: Sequence[str]
    ) -> tuple[PhaseEvent, Knowledge | None]:
        """Record that ``generation`` starts with ``planned`` (and the hold-outs), and
        which notes its attempts get."""
        cfg, root = self._config, self._root
        notes = knowledge_for(root, generation, cfg)
        event = PhaseEvent(
            "started",
            generation,
            task_ids=(*planned, *self._holdouts),
            holdout_task_ids=self._holdouts,
            knowledge_from=None if notes is None else notes.generation,
        )
        if cfg.generations > 1:  # a plain run keeps its plain layout
            append_phase(root, event)
        return event, notes

    def _indexed(self, notes: Knowledge | None) -> IndexedNotes | None:
        """``notes`` ready to render per task (hold-outs get only the shared ones)."""
        if notes is None:
            return None
        return IndexedNotes.of(
            notes,
            withheld=self._config.holdout_task_ids or (),
            ranker=NoteIndex(notes.notes).rank,
        )

    def _missing(
        self, tasks: Sequence[TaskSpec], records: list[AttemptRecord], generation: int
    ) -> int:
        """How many tries of ``generation`` the journal lacks."""
        cfg = self._config
        return count_missing(tasks, records, generation, attempts=cfg.attempts, retries=cfg.retries)

    def _distill(
        self, generation: int, records: list[AttemptRecord], done: PhaseEvent | None
    ) -> Knowledge | None:
        """Distil ``generation`` unless ``done`` (its ``distilled`` event) says it was."""
        root, cfg = self._root, self._config
        if done is not None:
            return read_knowledge(root, generation)
        skipped = needs_distillation(generation, cfg)
        if skipped:
            if cfg.generations > 1:
                append_phase(root, PhaseEvent("distilled", generation, skipped=skipped))
            return None
        try:
            knowledge = distill(
                run_dir=root,
                generation=generation,
                records=records,
                prompts={t: task.prompt for t, task in self._by_id.items()},
                config=cfg,
                distiller=self._setup.distiller,
                distiller_name=self._setup.distiller_name,
                agent_env=self._agent_env,
                store=self._store,
                forum=self._forum.posts(generation) if cfg.forum else (),
            )
        except DistillationFailed as exc:
            self._host.warn(str(exc))
            append_phase(root, PhaseEvent("distilled", generation, skipped=str(exc)))
            return None
        if knowledge.fallback:
            self._host.warn(f"generation {generation}: {knowledge.fallback}")
        append_phase(
            root,
            PhaseEvent(
                "distilled", generation, distiller=knowledge.distiller, fallback=knowledge.fallback
            ),
        )
        if knowledge.usage.cost_usd is not None:
            self._host.add_spend(float(knowledge.usage.cost_usd))
        return knowledge
