"""The driver: one ``ksi run`` (a new run, or a resume), on the machine holding the run directory.

It loads the tasks, resolves and prepares the components, opens the run
directory (``run.json``), runs generation after generation (one for a plain
run; :mod:`ksi.generations.steps`), plans what is missing from the journal, and hands
:class:`~ksi.attempt.job.AttemptJob` values to the executor, at most
``--concurrency`` at a time. It alone writes the journal, calls observers,
enforces ``--max-cost``, decides retries (a new ``try_number``; a pause for
rate limits) and handles Ctrl-C: running attempts are cancelled, never
journalled, and the run exits with code 130, ready to resume.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import platform
import random
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi._version import __version__
from ksi.attempt.cancel import forget_session
from ksi.attempt.components import (
    Components,
    component_name,
    resolve_components,
    resolve_executor,
)
from ksi.attempt.diskfull import (
    DISK_FULL,
    DiskFullError,
    DiskFullWatch,
    disk_full_as_error,
    reruns_on_resume,
    save_unless_disk_full,
    wipe_after_disk_full,
)
from ksi.attempt.envscrub import agent_optional_env, missing_required, scrubbed_env
from ksi.attempt.execute import RETRYABLE_AGENT_STATUSES, forget_components, use_components
from ksi.attempt.job import AttemptJob, AttemptSettings, ComponentSpec, JobOutcome
from ksi.attempt.safety import credential_warning, endpoint_warning
from ksi.errors import KsiError, KsiWarning, RunError, UserInputError
from ksi.generations.phases import PhaseEvent, Phases, append_phase
from ksi.generations.setup import (
    distillation_spend,
    grow_progress,
    plan_tasks,
    resolve_generation_parts,
    store_seed,
)
from ksi.generations.steps import (
    DistillationFailed,
    attempt_numbers,
    context_for,
    distill,
    generation_of,
    knowledge_for,
    needs_distillation,
    task_states,
)
from ksi.interfaces import Executor, TaskSource
from ksi.knowledge.models import Knowledge, PlanRequest
from ksi.knowledge.render import IndexedNotes
from ksi.knowledge.store import read_knowledge
from ksi.layout import RunLayout, clear_attempt_dir, refuse_own_file
from ksi.models import TaskSpec
from ksi.plugins import get_plugins
from ksi.records import (
    AttemptRecord,
    RunInfo,
    RunSummary,
    Timings,
    is_solved,
    now,
)
from ksi.reporting.summary import summarize_run
from ksi.runs.progress import NullProgress, Progress
from ksi.rundir.config import RunConfig, resume_mismatches, task_set_fingerprint
from ksi.rundir.journal import Journal, latest_by_attempt, read_records, spending_records
from ksi.rundir.run_state import RunState, load_run_state, save_run_state
from ksi.serialization import to_data

BACKOFF_BASE_SEC = 2.0
BACKOFF_MAX_SEC = 120.0


@attrs.frozen
class PlannedAttempt:
    task: TaskSpec
    attempt: int
    try_number: int = 0


@attrs.frozen
class RunPlan:
    """What a ``ksi run`` would do (``--dry-run``): nothing here has started."""

    run_dir: Path
    #: True when the run directory holds a run this one would continue.
    resumes: bool
    task_ids: tuple[str, ...]
    attempts: int
    #: Attempts the run would start (all of them, or what a resume still lacks).
    to_run: int
    agent: str
    model: str | None
    environment: str
    evaluator: str
    grades_in: str
    eval_isolation: str
    executor: str
    concurrency: int
    #: ``--generations``, and how the loop runs ("" for a run of one generation).
    generations: int = 1
    generation_plan: str = ""


def _auth_failed(record: AttemptRecord) -> bool:
    """The agent could not authenticate: no fault of the attempt, so a resume (after the
    key is fixed) runs it again, ``--retries`` or not; within one session it is not retried."""
    return record.agent_status == "auth_error"


class RunInterrupted(KsiError):
    """The user stopped the run; the journal holds every finished attempt."""

    exit_code = 130


class Driver:
    """One invocation of ``ksi run`` (a new run, or a resume of an existing one)."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        *,
        tasks: Sequence[TaskSpec] | None = None,
        agent: Any = None,
        evaluator: Any = None,
        environment: Any = None,
        progress: Progress | None = None,
    ) -> None:
        self.config = config
        self.layout = RunLayout(Path(run_dir).resolve())
        self._given_tasks = tasks
        # Names, classes or ready instances (ksi.run() takes all three).
        self._agent_ref = agent if agent is not None else config.agent
        self._evaluator_ref = evaluator
        self._environment_ref = environment if environment is not None else config.environment
        self.progress = progress or NullProgress()
        self.session_id = uuid.uuid4().hex
        self._stopping = False
        self._stop_reason = ""
        self._interrupted = False
        self._spent_usd = 0.0
        #: The last record of each attempt waiting for a retry.
        self._last: dict[tuple[str, int], AttemptRecord] = {}
        self.observer_errors: list[str] = []
        #: A full disk seen by any attempt: the run stops launching and ends with its error.
        self._disk = DiskFullWatch(self.layout.root)
        #: What this session did that the user must hear (an attempt directory kept aside...).
        self._warnings: list[str] = []
        #: The attempts of this session that ended in ``auth_error``.
        self._auth_failures: list[AttemptRecord] = []
        #: Planned attempts not launched because an auth_error stopped the run.
        self._not_started: list[str] = []
        #: Set after run(): what ``ksi run`` must say (and exit 3 for) about auth errors.
        self.auth_failure: str | None = None
        #: The notes the current generation's attempts get (None: none).
        self._notes: IndexedNotes | None = None
        self._complete = False

    # -- setup ----------------------------------------------------------------
    def _load_tasks(self) -> tuple[list[TaskSpec], TaskSource | None]:
        from ksi.tasks.loaders import get_task_source

        source = None
        if self._given_tasks is not None:
            tasks = list(self._given_tasks)
        else:
            if not self.config.tasks_path:
                raise UserInputError("no tasks: give a tasks path (ksi run TASKS_PATH ...)")
            source = get_task_source(self.config.task_source, self.config.task_source_options)
            tasks = source.load(Path(self.config.tasks_path))
        ids = [t.id for t in tasks]
        dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) != len(ids) else []
        if dupes:
            raise UserInputError(f"duplicate task ids: {', '.join(dupes)}")
        tasks = self.config.selection.apply(tasks, where=self.config.tasks_path or "")
        return tasks, source

    def _component_specs(
        self, source: TaskSource | None
    ) -> tuple[ComponentSpec, ComponentSpec, ComponentSpec]:
        cfg = self.config
        evaluator_ref = self._evaluator_ref or cfg.evaluator
        if evaluator_ref is None:
            evaluator_ref = source.default_evaluator if source is not None else "command"
        return (
            ComponentSpec("agent", self._agent_ref, dict(cfg.agent_options)),
            ComponentSpec("environment", self._environment_ref, dict(cfg.environment_options)),
            ComponentSpec("evaluator", evaluator_ref, dict(cfg.evaluator_options)),
        )

    def _preflight(self, tasks: list[TaskSpec]) -> None:
        agent = self.parts.agent
        problems = list(agent.check_tasks(tasks))
        problems.extend(
            missing_required(
                component_name(agent), agent.required_env, passthrough=self.config.agent_env
            )
        )
        # "One of these keys, or a login file" rules live with the agent.
        problems.extend(agent.missing_credentials(os.environ))
        if problems:
            raise UserInputError("\n".join(problems))
        exposed = credential_warning(
            self.parts.environment,
            agent,
            model=self.config.model,
            agent_env=self.config.agent_env,
            host_env=os.environ,
        )
        if exposed:
            warnings.warn(exposed, KsiWarning, stacklevel=2)
        unreachable = endpoint_warning(self.parts.environment, agent)
        if unreachable:
            warnings.warn(unreachable, KsiWarning, stacklevel=2)

    def _open_run_dir(self, tasks: list[TaskSpec]) -> tuple[RunState, bool]:
        layout = self.layout
        fingerprints = task_set_fingerprint(tasks)
        config = attrs.asdict(self.config)
        resumed = layout.run_json.exists()
        if not resumed:
            layout.check_new_run_dir()
        if resumed:
            stored = load_run_state(layout)
            problems = resume_mismatches(stored, self.config, fingerprints)
            if problems:
                raise RunError(
                    f"{layout.root} holds a different run; refusing to resume it:\n"
                    + "\n".join(f"  {p}" for p in problems)
                    + "\nMore --attempts and new tasks are fine; these are not "
                    "(docs/running.md#resuming)."
                )
            # Nothing that defines the experiment changed; the rest (concurrency,
            # retries, more attempts...) may, and the newest values are recorded.
            # Tasks new to the run join it; tasks this session leaves out stay in it.
            added = [t.id for t in tasks if t.id not in stored.tasks]
            state = attrs.evolve(
                stored,
                config={**stored.config, **config},
                tasks={**stored.tasks, **fingerprints},
                task_ids=[*stored.task_ids, *added],
            )
        else:
            state = RunState(
                run_id=uuid.uuid4().hex[:12],
                config=config,
                tasks=fingerprints,
                task_ids=[t.id for t in tasks],
            )
        # Until this session ends, the run is going again (a kill -9 leaves it so).
        state = attrs.evolve(state.started_session(), versions=self._versions())
        with disk_full_as_error(layout.root, "writing run.json"):
            save_run_state(layout, state)
        return state, resumed

    def _versions(self) -> dict[str, Any]:
        plugin_state = get_plugins()
        plugins = {}
        for name in sorted(set(self.parts.plugins)):
            info = plugin_state.infos.get(name)
            if info is not None:
                plugins[name] = {"distribution": info.distribution, "version": info.version}
            else:
                plugins[name] = {"distribution": name, "version": ""}
        return {"ksi": __version__, "python": platform.python_version(), "plugins": plugins}

    # -- planning -------------------------------------------------------------
    def _is_retryable(self, rec: AttemptRecord) -> bool:
        return rec.retryable and rec.try_number < self.config.retries

    def _plan(
        self, tasks: Sequence[TaskSpec], records: list[AttemptRecord], generation: int = 1
    ) -> list[PlannedAttempt]:
        """What is missing of ``generation`` for ``tasks`` (its attempt numbers only)."""
        latest = latest_by_attempt(records)
        plan = []
        for task in tasks:
            for n in attempt_numbers(generation, self.config.attempts):
                rec = latest.get((task.id, n))
                if rec is None:
                    plan.append(PlannedAttempt(task, n, 0))
                elif self._is_retryable(rec) or reruns_on_resume(rec) or _auth_failed(rec):
                    plan.append(PlannedAttempt(task, n, rec.try_number + 1))
        return plan

    # -- the run --------------------------------------------------------------
    def _resolve(self) -> list[TaskSpec]:
        """Check the configuration, load the tasks, resolve the components; create nothing."""
        problems = self.config.problems()
        if problems:
            raise UserInputError("run configuration:\n" + "\n".join(f"  {p}" for p in problems))
        tasks, source = self._load_tasks()
        # Before anything is created: ids this run directory cannot hold apart, seeds
        # that would copy the run into itself.
        self.layout.check_tasks(tasks, self.config.tasks_path or "tasks")
        self.specs = self._component_specs(source)
        cfg = self.config
        self.loop = resolve_generation_parts(cfg, tasks, self.layout.root)
        self.parts: Components = resolve_components(
            *self.specs,
            eval_isolation=cfg.eval_isolation,
            eval_in=cfg.eval_in,
            eval_env=cfg.eval_env,
        )
        self.executor: Executor = resolve_executor(
            self.config.executor, self.config.executor_options
        )
        return tasks

    def preview(self) -> RunPlan:
        """What :meth:`run` would do (``ksi run --dry-run``), starting and writing nothing.

        Every check that needs no agent runs: the tasks load and the selection
        applies, the components resolve with their options, the agent says which
        tasks it cannot attempt (oracle: one without a solution), and a resume is
        checked against the run it would continue. Credentials and images are
        not checked (a dry run may be made where the keys are not; that is the
        run's own preflight).
        """
        tasks = self._resolve()
        self._check_outputs()
        problems = list(self.parts.agent.check_tasks(tasks))
        if problems:
            raise UserInputError("\n".join(problems))
        layout = self.layout
        records: list[AttemptRecord] = []
        resumed = layout.run_json.exists()
        if resumed:
            problems = resume_mismatches(
                load_run_state(layout), self.config, task_set_fingerprint(tasks)
            )
            if problems:
                raise RunError(
                    f"{layout.root} holds a different run; it would not resume:\n"
                    + "\n".join(f"  {p}" for p in problems)
                )
            records = read_records(layout.journal)
        else:
            layout.check_new_run_dir()
        parts = self.parts
        return RunPlan(
            run_dir=layout.root,
            resumes=resumed,
            task_ids=tuple(t.id for t in tasks),
            attempts=self.config.attempts,
            to_run=len(self._plan(tasks, records)),
            agent=component_name(parts.agent),
            model=self.config.model,
            environment=component_name(parts.environment),
            evaluator=component_name(parts.evaluator),
            grades_in=parts.grades_in,
            eval_isolation=parts.eval_isolation,
            executor=component_name(self.executor),
            concurrency=self.config.concurrency,
            generations=self.config.generations,
            generation_plan=self._generation_plan(tasks),
        )

    def _generation_plan(self, tasks: list[TaskSpec]) -> str:
        """How the loop will run, in one line (``--dry-run``); "" for a plain run."""
        cfg = self.config
        if cfg.generations == 1:
            return ""
        held = [t.id for t in tasks if t.id in set(cfg.holdout_task_ids or ())]
        return (
            f"up to {cfg.generations} (strategy {cfg.strategy}, knowledge {cfg.knowledge}, "
            f"distiller {cfg.distiller}"
            + (f", hold-outs {', '.join(held)}" if held else "")
            + "); the attempts shown are generation 1's"
        )

    def _check_outputs(self) -> None:
        """Refuse a report path that would overwrite a run directory's own file."""
        if self.config.output_json:
            refuse_own_file(Path(self.config.output_json), "--output-json", [self.layout.root])

    def run(self) -> RunSummary:
        tasks = self._resolve()
        self._check_outputs()
        self._preflight(tasks)
        # Images are checked or built before the run directory exists: a run that
        # cannot start leaves nothing behind.
        self.parts.environment.prepare(tasks)
        # Released when this call ends, even when an exception (Ctrl-C) outlives it.
        with self.layout.lock_exclusive():
            use_components(self.session_id, self.parts)
            try:
                return self._run_locked(tasks)
            finally:
                forget_components(self.session_id)
                forget_session(self.session_id)

    def _run_locked(self, tasks: list[TaskSpec]) -> RunSummary:
        state, resumed = self._open_run_dir(tasks)
        self.run_id = state.run_id
        self.journal = Journal(self.layout.journal)
        records = list(self.journal.contents.records)
        self._spent_usd = sum(float(r.usage.cost_usd or 0.0) for r in spending_records(records))
        self._spent_usd += distillation_spend(self.layout.root)
        self.info = RunInfo(
            run_id=self.run_id,
            run_dir=self.layout.root,
            config=state.config,
            task_ids=tuple(t.id for t in tasks),
            attempts_per_task=self.config.attempts,
        )
        self._job_base = self._job_template()
        self._complete = False
        self._total = 0
        try:
            if resumed:
                self.parts.environment.cleanup(self.run_id)
            self._observe("ksi_run_started", run=self.info)
            self._complete = self._run_generations(tasks, records)
        except KeyboardInterrupt:
            self._interrupted = True
            self._stop_reason = "interrupted"
        except DiskFullError:
            pass  # the journal could not be written (noted by _record): the error comes below
        finally:
            self.progress.close()
            self.journal.close()
            with contextlib.suppress(Exception):
                self.parts.environment.cleanup(self.run_id)
        summary = self._finish(state, tasks)
        if self._disk.happened:
            raise self._disk.error(f"ksi run --resume --run-dir {self.layout.root}")
        self.auth_failure = self._auth_failure_message() if self._auth_failures else None
        if self._interrupted:
            raise RunInterrupted(
                f"run interrupted; {summary.n_attempts}/{self._total} attempts are in the journal. "
                f"Resume with the same command (or: ksi run --resume --run-dir {self.layout.root})"
            )
        return summary

    def _auth_failure_message(self) -> str:
        """Which agent failed to authenticate, what to check, and the CLI's own words."""
        first = self._auth_failures[0]
        agent = self.parts.agent
        variables = tuple(getattr(agent, "credential_env", ()) or ()) + tuple(
            getattr(agent, "required_env", ()) or ()
        )
        given = [v for v in variables if os.environ.get(v, "").strip()]
        check = given or list(variables)
        lines = [
            f"agent {first.agent!r} could not authenticate in "
            f"{len(self._auth_failures)} attempt(s) (first: task {first.task_id}, "
            f"attempt {first.attempt})",
            f"  the CLI said: {first.error or '(nothing)'}",
        ]
        if check:
            which = "the value of" if given else "set"
            lines.append(f"  check: {which} {' / '.join(check)}")
        if self._not_started:
            unique = list(dict.fromkeys(self._not_started))
            lines.append(
                f"  not started ({len(self._not_started)} attempt(s)): {', '.join(unique[:10])}"
                + (" ..." if len(unique) > 10 else "")
            )
        lines.append(
            "  fix the credentials, then resume (the auth_error attempts run again): "
            f"ksi run --resume --run-dir {self.layout.root}"
        )
        if self.config.fail_fast_auth:
            lines.append("  (--no-fail-fast keeps launching attempts after an auth error)")
        return "\n".join(lines)

    def _run_generations(self, tasks: list[TaskSpec], records: list[AttemptRecord]) -> bool:
        """Run the generations still to run; True when the run is complete.

        Each generation is planned (or its recorded plan read back), its missing
        attempts run, then it is distilled; a stop (``--max-cost``, a full disk)
        ends the loop before the distillation of an unfinished generation.
        """
        cfg, root = self.config, self.layout.root
        by_id = {t.id: t for t in tasks}
        holdouts = tuple(t for t in by_id if t in set(cfg.holdout_task_ids or ()))
        learning = tuple(t for t in by_id if t not in set(holdouts))
        if self.loop.seed is not None and not (root / "knowledge" / "0").exists():
            store_seed(root, self.loop.seed)
        started_progress = False
        for generation in range(1, cfg.generations + 1):
            phases = Phases.read(root)
            event = phases.started.get(generation)
            if event is None:
                if generation == 1 and (
                    cfg.generations == 1 or any(r.generation == 1 for r in records)
                ):
                    # A plain run (or one that started as one): every task, as always.
                    planned = learning
                else:
                    states = task_states(records, learning, cfg.solved_threshold)
                    request = PlanRequest(generation, states, cfg.attempts, cfg.solved_threshold)
                    planned = plan_tasks(
                        self.loop.strategy, self.loop.strategy_name, request, learning
                    )
                    if not planned:
                        return True  # the strategy has nothing left to run
                    if self._stopping or self._over_budget():
                        return False
                notes = knowledge_for(root, generation, cfg)
                event = PhaseEvent(
                    "started",
                    generation,
                    task_ids=(*planned, *holdouts),
                    holdout_task_ids=holdouts,
                    knowledge_from=None if notes is None else notes.generation,
                )
                if cfg.generations > 1:  # a plain run keeps its plain layout
                    append_phase(root, event)
            else:  # resumed: the notes the generation started with, whatever came since
                source = event.knowledge_from
                notes = read_knowledge(root, source) if source is not None else None
            gen_tasks = [by_id[t] for t in event.task_ids if t in by_id]
            self._notes = (
                IndexedNotes.of(notes, withheld=cfg.holdout_task_ids or ())
                if notes is not None
                else None
            )
            plan = self._plan(gen_tasks, records, generation)
            total = len(gen_tasks) * cfg.attempts
            self._total += total
            if not started_progress:
                self.progress.start(
                    total, total - len(plan), self._solved_task_ids(records), n_tasks=len(tasks)
                )
                started_progress = True
            else:
                grow_progress(self.progress, total, total - len(plan))
            done = phases.distilled.get(generation)
            if done is not None and not plan:
                continue  # finished in an earlier session: observers heard of it then
            self._observe(
                "ksi_generation_started",
                run=self.info,
                generation=generation,
                task_ids=event.task_ids,
            )
            if plan and not self._over_budget():
                self._execute(plan)
            records = self.journal.records()
            if self._plan(gen_tasks, records, generation):
                return False  # stopped (--max-cost, a full disk) before the generation ended
            if done is None and not needs_distillation(generation, cfg) and self._over_budget():
                return False  # a distillation may spend too: not past --max-cost
            knowledge = self._distill_phase(generation, records, by_id, done)
            self._observe(
                "ksi_generation_finished",
                run=self.info,
                generation=generation,
                knowledge=knowledge,
            )
        if not started_progress:
            self.progress.start(0, 0)
        return True

    def _distill_phase(
        self,
        generation: int,
        records: list[AttemptRecord],
        by_id: dict[str, TaskSpec],
        done: PhaseEvent | None,
    ) -> Knowledge | None:
        """Distil ``generation`` unless ``done`` (its ``distilled`` event) says it was."""
        root, cfg = self.layout.root, self.config
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
                prompts={t: task.prompt for t, task in by_id.items()},
                config=cfg,
                distiller=self.loop.distiller,
                distiller_name=self.loop.distiller_name,
                agent_env=self._job_base.agent_env,
            )
        except DistillationFailed as exc:
            self._warnings.append(str(exc))
            append_phase(root, PhaseEvent("distilled", generation, skipped=str(exc)))
            return None
        if knowledge.fallback:
            self._warnings.append(f"generation {generation}: {knowledge.fallback}")
        append_phase(
            root,
            PhaseEvent(
                "distilled", generation, distiller=knowledge.distiller, fallback=knowledge.fallback
            ),
        )
        if knowledge.usage.cost_usd is not None:
            self._spent_usd += float(knowledge.usage.cost_usd)
        return knowledge

    def _finish(self, state: RunState, tasks: list[TaskSpec]) -> RunSummary:
        # Complete when the loop finished (a budget reached by the last attempt stopped
        # nothing) and no task of the run this session left out (--task-id...) lacks
        # an attempt of generation 1.
        journal = self.journal.current()  # read back from memory: it was closed just now
        latest = latest_by_attempt(list(journal.records))
        session = {t.id for t in tasks}
        missing_elsewhere = any(
            (task_id, n) not in latest
            for task_id in state.task_ids
            if task_id not in session
            for n in range(1, self.config.attempts + 1)
        )
        complete = not self._interrupted and self._complete and not missing_elsewhere
        finished = state.finished_session(complete=complete, stopped_reason=self._stop_reason)
        if not save_unless_disk_full(self.layout.run_json, to_data(finished)):
            self._note_full_disk()
        summary = summarize_run(self.layout.root, journal=journal)
        summary = attrs.evolve(summary, warnings=(*summary.warnings, *self._warnings))
        self._observe("ksi_run_finished", run=self.info, summary=summary)
        return summary

    # -- jobs -----------------------------------------------------------------
    def _job_template(self) -> AttemptJob:
        """What every job of this session shares (a job is this with task and numbers)."""
        cfg, agent = self.config, self.parts.agent
        # Scrubbed once, here: the job carries the values, never the host environment.
        agent_env = scrubbed_env(
            required=agent.required_env,
            optional=agent_optional_env(agent, cfg.model),
            passthrough=cfg.agent_env,
        )
        run_tag = {"KSI_RUN_ID": self.run_id}  # lets cleanup find this run's processes
        eval_env = scrubbed_env(required=(), optional=(), passthrough=cfg.eval_env)
        agent_spec, env_spec, eval_spec = self.specs
        return AttemptJob(
            run_id=self.run_id,
            session_id=self.session_id,
            run_dir=str(self.layout.root),
            task=TaskSpec(id=""),
            attempt=0,
            try_number=0,
            agent=agent_spec,
            environment=env_spec,
            evaluator=eval_spec,
            settings=AttemptSettings(
                model=cfg.model,
                timeout_sec=cfg.timeout_sec,
                log_cap_bytes=cfg.log_cap_bytes,
                capture_max_file_bytes=cfg.capture_max_file_bytes,
                protect=tuple(cfg.protect),
                wipe_workspace=cfg.wipe_workspace,
                eval_in=cfg.eval_in,
                eval_isolation=self.parts.eval_isolation,
                eval_env=tuple(cfg.eval_env),
            ),
            agent_env={**agent_env, **run_tag},
            eval_env={**eval_env, **run_tag},
        )

    def _job(self, task: TaskSpec, attempt: int, try_number: int) -> AttemptJob:
        # Rendered per job, not per generation up front: 10,000 tasks' notes are not kept.
        files, ref = context_for(self._notes, task.id, self.config.knowledge_budget_bytes)
        return attrs.evolve(
            self._job_base,
            task=task,
            attempt=attempt,
            try_number=try_number,
            generation=generation_of(attempt, self.config.attempts),
            context_files=files,
            knowledge=ref,
        )

    # -- scheduling -----------------------------------------------------------
    def _execute(self, plan: list[PlannedAttempt]) -> None:
        executor = self.executor
        window = self.config.concurrency
        planned: Iterator[PlannedAttempt] = iter(plan)
        next_planned: PlannedAttempt | None = next(planned, None)
        #: Retries waiting out their backoff: (ready at, sequence, job).
        waiting: list[tuple[float, int, AttemptJob]] = []
        seq = 0
        inflight = 0

        def can_submit() -> bool:
            if self._stopping or inflight >= window:
                return False
            ready = bool(waiting) and waiting[0][0] <= time.monotonic()
            return ready or next_planned is not None

        def submit_ready() -> int:
            """Submit what may start now; return how many planned (not retried) jobs."""
            nonlocal inflight, next_planned
            launched = 0
            while can_submit():
                if waiting and waiting[0][0] <= time.monotonic():
                    job = heapq.heappop(waiting)[2]
                else:
                    assert next_planned is not None
                    item, next_planned = next_planned, next(planned, None)
                    job = self._job(item.task, item.attempt, item.try_number)
                    launched += 1
                self._prepare_attempt_dir(job)
                executor.submit(job)
                inflight += 1
            return launched

        executor.start(window)
        try:
            while True:
                for _ in range(submit_ready()):
                    self.progress.attempt_started()
                if self._stopping:
                    for _, _, job in waiting:  # no retry after a stop: its last try stands
                        self._finished(self._last.pop((job.task.id, job.attempt), None))
                    waiting.clear()
                    if self._auth_failures:  # for the message: what the stop left out
                        while next_planned is not None:
                            self._not_started.append(next_planned.task.id)
                            next_planned = next(planned, None)
                if inflight == 0 and not waiting:
                    return
                timeout = max(0.0, waiting[0][0] - time.monotonic()) if waiting else None
                if inflight == 0 and timeout is not None:
                    time.sleep(timeout)  # only retries waiting out their backoff
                    continue
                for outcome in executor.as_completed(timeout):
                    inflight -= 1
                    record = self._settle(outcome)
                    # The next attempt starts before this record is journalled: a worker
                    # does not wait for the journal's fsync. What stops the run (a full
                    # disk, --max-cost, an auth error) was decided from the record above;
                    # the record is still durable before anyone hears of it.
                    try:
                        launched = submit_ready()
                    except BaseException:
                        self._on_outcome(outcome.job, record)  # journalled whatever stops us
                        raise
                    retry = self._on_outcome(outcome.job, record)
                    # Counted after the finish: "running" never exceeds the window.
                    for _ in range(launched):
                        self.progress.attempt_started()
                    if retry is not None:
                        seq += 1
                        heapq.heappush(waiting, (retry[0], seq, retry[1]))
                    if can_submit():
                        break
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                self._interrupted = True
            self._abandon()
            raise
        finally:
            with contextlib.suppress(Exception):
                executor.shutdown()

    def _prepare_attempt_dir(self, job: AttemptJob) -> None:
        """Before a job runs: the run directory is still there, and its attempt directory
        is free (a finished attempt whose journal line is unreadable is kept aside)."""
        self.journal.check_present()  # a deleted run directory stops the run
        kept_aside = clear_attempt_dir(job.attempt_dir())
        if kept_aside is not None:
            self._warnings.append(kept_aside)

    def _abandon(self) -> None:
        """Teardown: stop launching, kill running attempts and wait until none is left.

        Attempts killed by the driver are not results: their outcomes are
        dropped (a resume runs them again). No attempt may outlive the run:
        one still starting would launch its agent after the kill.
        """
        self._stopping = True
        with contextlib.suppress(Exception):
            self.executor.cancel()
        with contextlib.suppress(Exception):
            for outcome in self.executor.as_completed():
                if self._disk.happened:  # the filler goes; the logs stay
                    wipe_after_disk_full(outcome.job.attempt_dir())

    def _settle(self, outcome: JobOutcome) -> AttemptRecord:
        """The record of one finished try, and what it stops (before anything is written).

        A full disk, the spend reaching ``--max-cost`` and an auth error (with
        fail-fast) stop new launches; deciding that from the record alone lets
        the next attempt start while this one is journalled.
        """
        record = outcome.record
        if record is None:  # the executor could not run it (a worker died...)
            record = self._error_record(
                outcome.job, outcome.error or "the executor returned no record", outcome.error_kind
            )
        if record.error_kind == DISK_FULL:
            self._note_full_disk(stopped=True)
        if record.usage.cost_usd is not None:
            self._spent_usd += float(record.usage.cost_usd)
            self._over_budget()
        if record.agent_status == "auth_error":
            self._auth_failures.append(record)
            if self.config.fail_fast_auth and not self._stopping:
                self._stopping = True
                self._stop_reason = (
                    f"auth_error: agent {record.agent!r} could not authenticate "
                    f"(task {record.task_id}); no new attempts launched"
                )
        return record

    def _on_outcome(
        self, job: AttemptJob, record: AttemptRecord
    ) -> tuple[float, AttemptJob] | None:
        """Journal one settled try; return ``(ready at, job)`` when it is to be retried."""
        self._record(record)
        if self._is_retryable(record) and not self._stopping:
            delay = 0.0
            if record.agent_status in RETRYABLE_AGENT_STATUSES:
                delay = min(BACKOFF_MAX_SEC, BACKOFF_BASE_SEC * 2**job.try_number)
                delay *= 0.5 + random.random()
            self._last[(job.task.id, job.attempt)] = record
            retry = self._job(job.task, job.attempt, job.try_number + 1)
            return time.monotonic() + delay, retry
        self._last.pop((job.task.id, job.attempt), None)
        self._finished(record)
        return None

    def _solved_task_ids(self, records: list[AttemptRecord]) -> set[str]:
        """Tasks the journal already shows solved (a resume's progress starts from them)."""
        threshold = self.config.solved_threshold
        return {r.task_id for r in records if is_solved(r.score, threshold)}

    def _finished(self, record: AttemptRecord | None) -> None:
        """The last try of a (task, attempt): one step of the progress bar."""
        if record is None:
            return
        self.progress.attempt_finished(
            record, is_solved(record.score, self.config.solved_threshold)
        )

    def _error_record(self, job: AttemptJob, error: str, error_kind: str = "") -> AttemptRecord:
        parts = self.parts
        return AttemptRecord(
            task_id=job.task.id,
            attempt=job.attempt,
            try_number=job.try_number,
            status="error",
            score=None,
            agent=component_name(parts.agent),
            evaluator=component_name(parts.evaluator),
            environment=component_name(parts.environment),
            model=job.settings.model,
            error=error,
            error_kind=error_kind,
            attempt_dir=os.path.relpath(job.attempt_dir(), job.run_dir),
            timings=Timings(),
            finished_at=now(),
            retryable=True,
        )

    def _record(self, record: AttemptRecord) -> None:
        try:
            self.journal.append(record)
        except DiskFullError as exc:  # noted before the teardown, which then wipes workspaces
            self._note_full_disk(exc.__cause__, journal_failed=True)
            raise
        self._observe("ksi_attempt_finished", run=self.info, record=record)

    def _over_budget(self) -> bool:
        """Stop launching attempts once the reported spend reaches ``--max-cost``."""
        limit = self.config.max_cost_usd
        if limit is None or self._spent_usd < limit:
            return False
        if not self._stopping:
            self._stop_reason = (
                f"max_cost: reported spend ${self._spent_usd:.4f} reached "
                f"--max-cost ${limit:.4f}; no new attempts launched"
            )
            self._stopping = True
        return True

    def _note_full_disk(
        self,
        exc: BaseException | None = None,
        *,
        stopped: bool = False,
        journal_failed: bool = False,
    ) -> None:
        """The disk is full: launch nothing more; the run ends with the disk-full error."""
        self._disk.note(exc, attempt_stopped=stopped, journal_failed=journal_failed)
        self._stop_reason = self._disk.stop_reason()
        self._stopping = True

    def _observe(self, hook: str, **kwargs: Any) -> None:
        self.observer_errors.extend(get_plugins().call_observers(hook, **kwargs))
