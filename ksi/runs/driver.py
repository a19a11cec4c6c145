"""The driver: one ``ksi run`` (a new run, or a resume), on the machine holding the run directory.

A :class:`Driver` is built complete: constructing it loads the tasks and
resolves the components, the executor and the generation setup
(:mod:`ksi.runs.setup`), so :meth:`Driver.preview` (``--dry-run``) and
:meth:`Driver.run` start from the same checked values. A run then holds the
run directory, opens ``run.json`` and runs one session
(:class:`~ksi.runs.session.RunSession`): the generation loop
(:mod:`ksi.generations.loop`; one generation for a plain run) plans what the
journal is missing, and the scheduler (:mod:`ksi.runs.scheduler`) hands
:class:`~ksi.attempt.job.AttemptJob` values to the executor, at most
``--concurrency`` at a time. The session alone writes the journal, calls
observers, enforces ``--max-cost``, decides retries (a new ``try_number``; a
pause for rate limits) and handles Ctrl-C: running attempts are cancelled,
never journalled, and the run exits with code 130, ready to resume.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi.attempt.cancel import forget_session
from ksi.attempt.components import component_name
from ksi.attempt.diskfull import DiskFullError
from ksi.attempt.execute import forget_components, use_components
from ksi.errors import AgentSetupError, KsiError, RunError, UserInputError
from ksi.fstree import empty_trash
from ksi.generations.loop import GenerationLoop
from ksi.generations.run_store import RunStore
from ksi.generations.steps import count_missing
from ksi.layout import RunLayout, refuse_own_file
from ksi.models import TaskSpec
from ksi.provenance import collect_in_background
from ksi.records import AttemptRecord, RunSummary
from ksi.rundir.config import RunConfig, resume_mismatches, task_set_fingerprint
from ksi.rundir.journal import read_records
from ksi.rundir.run_state import RunState, load_run_state
from ksi.runs.job_template import forum_session_id
from ksi.runs.progress import NullProgress, Progress
from ksi.runs.session import RunSession
from ksi.runs.setup import open_run_dir, preflight, resolve_run


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


class RunInterrupted(KsiError):
    """The user stopped the run; the journal holds every finished attempt."""

    exit_code = 130


class Driver:
    """One invocation of ``ksi run`` (a new run, or a resume of an existing one).

    Constructing it checks the configuration, loads the tasks and resolves the
    components (names, classes or ready instances: ``ksi.run()`` takes all
    three), creating nothing; a :class:`~ksi.errors.UserInputError` says what
    to fix.
    """

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
        self.progress = progress or NullProgress()
        self.session_id = uuid.uuid4().hex
        # Where the tasks and KSI came from (git), found while the tasks load; run() records it.
        self._provenance = collect_in_background(config.tasks_path)
        self.resolved = resolve_run(
            config,
            self.layout,
            tasks=tasks,
            agent=agent,
            evaluator=evaluator,
            environment=environment,
        )
        #: What observers raised (``ksi run`` prints them; a run never fails for them).
        self.observer_errors: list[str] = []
        #: Set by run(): what ``ksi run`` must raise (exit 3) when the agent's set-up failed
        #: (a key, an endpoint, its own sandbox: :mod:`ksi.runs.stops`).
        self.setup_failure: AgentSetupError | None = None

    @property
    def tasks(self) -> tuple[TaskSpec, ...]:
        return self.resolved.tasks

    def preview(self) -> RunPlan:
        """What :meth:`run` would do (``ksi run --dry-run``), starting and writing nothing.

        Every check that needs no agent runs: the tasks load and the selection
        applies, the components resolve with their options, the agent says which
        tasks it cannot attempt (oracle: one without a solution), and a resume is
        checked against the run it would continue. Credentials and images are
        not checked (a dry run may be made where the keys are not; that is the
        run's own preflight).
        """
        self._check_outputs()
        tasks, components = self.tasks, self.resolved.components
        problems = list(components.agent.check_tasks(tasks))
        if problems:
            raise UserInputError("\n".join(problems))
        layout = self.layout
        records: list[AttemptRecord] = []
        resumed = layout.run_json.exists()
        if resumed:
            stored = load_run_state(layout)
            problems = resume_mismatches(
                stored.config, stored.tasks, self.config, task_set_fingerprint(tasks)
            )
            if problems:
                raise RunError(
                    f"{layout.root} holds a different run; it would not resume:\n"
                    + "\n".join(f"  {p}" for p in problems)
                )
            records = read_records(layout.journal)
        else:
            layout.check_new_run_dir()
        cfg = self.config
        to_run = count_missing(tasks, records, 1, attempts=cfg.attempts, retries=cfg.retries)
        return RunPlan(
            run_dir=layout.root,
            resumes=resumed,
            task_ids=tuple(t.id for t in tasks),
            attempts=cfg.attempts,
            to_run=to_run,
            agent=component_name(components.agent),
            model=cfg.model,
            environment=component_name(components.environment),
            evaluator=component_name(components.evaluator),
            grades_in=components.grades_in,
            eval_isolation=components.eval_isolation,
            executor=component_name(self.resolved.executor),
            concurrency=cfg.concurrency,
            generations=cfg.generations,
            generation_plan=self._generation_plan(),
        )

    def _generation_plan(self) -> str:
        """How the loop will run, in one line (``--dry-run``); "" for a plain run."""
        cfg = self.config
        if cfg.generations == 1:
            return ""
        held = [t.id for t in self.tasks if t.id in set(cfg.holdout_task_ids or ())]
        forum = (
            f", forum {cfg.forum_rounds} round(s) per task and {cfg.cross_task_forum_rounds} "
            "across tasks"
            if cfg.forum
            else ""
        )
        return (
            f"up to {cfg.generations} (strategy {cfg.strategy}, knowledge {cfg.knowledge}, "
            f"distiller {cfg.distiller}{forum}"
            + (f", hold-outs {', '.join(held)}" if held else "")
            + "); the attempts shown are generation 1's"
        )

    def _check_outputs(self) -> None:
        """Refuse a report path that would overwrite a run directory's own file."""
        if self.config.output_json:
            refuse_own_file(Path(self.config.output_json), "--output-json", [self.layout.root])

    def run(self) -> RunSummary:
        """Run what the run directory lacks; the summary of the whole run.

        Ctrl-C raises :class:`RunInterrupted` and a full disk a
        :class:`~ksi.attempt.diskfull.DiskFullError`, each once the journal holds
        every finished attempt; the agent's set-up failing is left in :attr:`setup_failure`.
        """
        self._check_outputs()
        preflight(self.config, self.resolved)
        # Images are checked or built before the run directory exists: a run that
        # cannot start leaves nothing behind.
        self.resolved.components.environment.prepare(self.tasks)
        # Released when this call ends, even when an exception (Ctrl-C) outlives it.
        forum = self.resolved.forum
        forum_id = forum_session_id(self.session_id)
        with self.layout.lock_exclusive():
            use_components(self.session_id, self.resolved.components)
            if forum is not None:  # forum jobs in this process use the prepared environment
                use_components(forum_id, forum.components)
            try:
                return self._run_locked()
            finally:
                for session_id in (self.session_id, forum_id):
                    forget_components(session_id)
                    forget_session(session_id)

    def _run_locked(self) -> RunSummary:
        state, resumed = open_run_dir(self.layout, self.config, self.resolved, self._provenance)
        store = RunStore.open(
            self.config, self.layout.root, run_id=state.run_id, task_hashes=state.tasks
        )
        try:
            return self._run_session(state, resumed, store)
        finally:
            store.close()

    def _run_session(self, state: RunState, resumed: bool, store: RunStore) -> RunSummary:
        session = RunSession(
            self.config,
            self.layout,
            self.resolved,
            state,
            session_id=self.session_id,
            progress=self.progress,
            observer_errors=self.observer_errors,
            store=store,
        )
        environment, stops = self.resolved.components.environment, session.stops
        loop = GenerationLoop(
            self.config,
            self.layout.root,
            self.tasks,
            self.resolved.generations,
            session,
            agent_env=session.jobs.base.agent_env,
            store=store,
        )
        complete = False
        try:
            if resumed:
                environment.cleanup(state.run_id)
            session.observe("ksi_run_started")
            complete = loop.run()
        except KeyboardInterrupt:
            stops.interrupt()
        except DiskFullError:
            pass  # the journal could not be written (noted by the session): the error comes below
        finally:
            self.progress.close()
            session.journal.close()
            with contextlib.suppress(Exception):
                environment.cleanup(state.run_id)
            with contextlib.suppress(OSError):  # the last wiped trees, and a killed run's
                empty_trash(self.layout.trash)
        summary = session.finish(loop_complete=complete)
        if stops.disk.happened:
            raise stops.disk.error(f"ksi run --resume --run-dir {self.layout.root}")
        self.setup_failure = stops.setup_failure(self.resolved.components.agent, self.layout.root)
        if stops.interrupted:
            raise RunInterrupted(
                f"run interrupted; {summary.n_attempts}/{session.total} attempts are in the "
                "journal. Resume with the same command "
                f"(or: ksi run --resume --run-dir {self.layout.root})"
            )
        return summary
