"""One session of a run: from its opened run directory to its summary.

A session is one ``ksi run`` (or ``ksi.run()``) on a run directory: a new
run or a resume. It holds what only the driver may touch: the journal (one
durable line per finished try), the observers, the budget and the other
stops (:mod:`ksi.runs.stops`), the progress display and the warnings the
user hears at the end. The generation loop (:mod:`ksi.generations.loop`)
asks it to run attempts, and forum sessions; each batch goes through a
:class:`~ksi.runs.scheduler.Scheduler`, which reports every outcome back here
(a forum session's to the forum, never to the journal: it is not an attempt,
but it spends toward ``--max-cost`` like one).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs

from ksi.attempt.components import component_name
from ksi.attempt.diskfull import (
    DiskFullError,
    DiskFullWatch,
    disk_full_as_error,
    save_unless_disk_full,
)
from ksi.attempt.evidence import DiffEvidence
from ksi.attempt.job import AttemptJob, JobOutcome
from ksi.generations.forum import ForumSessionPlan
from ksi.generations.run_store import RunStore
from ksi.generations.setup import distillation_spend, grow_progress
from ksi.generations.steps import PlannedAttempt
from ksi.knowledge.db_schema import StoreBusy
from ksi.knowledge.forum import FileForumStore
from ksi.knowledge.render import IndexedNotes
from ksi.layout import RunLayout, clear_attempt_dir
from ksi.plugins import ObserverHook, get_plugins
from ksi.records import (
    AttemptRecord,
    ErrorKind,
    RunInfo,
    RunSummary,
    error_record,
    is_solved,
)
from ksi.reporting.summary import summarize_run
from ksi.rundir.config import RunConfig
from ksi.rundir.journal import Journal, latest_by_attempt, spending_records
from ksi.rundir.run_state import RunState
from ksi.runs.job_template import ForumJobs, JobTemplate
from ksi.runs.progress import NullProgress, Progress
from ksi.runs.scheduler import Scheduler
from ksi.runs.setup import ResolvedRun
from ksi.runs.stops import RunStops
from ksi.serialization import to_data


class RunSession:
    """The driver's side of one session (see the module docstring)."""

    def __init__(
        self,
        config: RunConfig,
        layout: RunLayout,
        run: ResolvedRun,
        state: RunState,
        *,
        session_id: str,
        progress: Progress,
        observer_errors: list[str],
        store: RunStore,
    ) -> None:
        self.config = config
        #: The knowledge store: each journalled attempt's evidence goes there too.
        self.store = store
        self.layout = layout
        self.resolved = run
        self.state = state
        self.progress = progress
        #: What observers raised (``ksi run`` prints them; a run never fails for them).
        self.observer_errors = observer_errors
        self.journal = Journal(layout.journal)
        records = self.journal.contents.records
        spent = sum(float(r.usage.cost_usd or 0.0) for r in spending_records(list(records)))
        self.stops = RunStops(
            max_cost_usd=config.max_cost_usd,
            fail_fast_auth=config.fail_fast_auth,
            disk=DiskFullWatch(layout.root),
            spent_usd=spent + distillation_spend(layout.root) + FileForumStore(layout.root).spend(),
        )
        self.info = RunInfo(
            run_id=state.run_id,
            run_dir=layout.root,
            config=state.config,
            task_ids=tuple(t.id for t in run.tasks),
            attempts_per_task=config.attempts,
        )
        self.jobs = JobTemplate.for_session(
            config,
            specs=run.specs,
            components=run.components,
            run_id=state.run_id,
            session_id=session_id,
            run_dir=layout.root,
        )
        forum = run.forum
        self.forum_jobs = (
            None
            if forum is None
            else ForumJobs.for_session(
                config,
                self.jobs,
                agent_spec=forum.agent,
                agent=forum.components.agent,
                evaluator=forum.components.evaluator.name,
                run_dir=layout.root,
            )
        )
        #: The attempts of the generations this session ran or found done (for Ctrl-C's message).
        self.total = 0
        #: What this session did that the user must hear (an attempt directory kept aside...).
        self.warnings: list[str] = []
        self._progress_started = False
        #: Records written to the journal but not yet synced: (how many records the journal
        #: held with it, the record, what to do once it is heard of).
        self._unheard: deque[tuple[int, AttemptRecord, Callable[[], None] | None]] = deque()
        #: The evidence pieces settled outcomes brought (by attempt directory), until their
        #: records reach the store.
        self._evidence: dict[str, DiffEvidence] = {}

    # -- what the generation loop asks -------------------------------------------------
    def records(self) -> list[AttemptRecord]:
        return self.journal.records()

    def count_attempts(self, total: int, already_done: int) -> None:
        self.total += total
        if self._progress_started:
            grow_progress(self.progress, total, already_done)
            return
        threshold = self.config.solved_threshold
        # Tasks the journal already shows solved: a resume's progress starts from them.
        solved = {r.task_id for r in self.journal.records() if is_solved(r.score, threshold)}
        self.progress.start(total, already_done, solved, n_tasks=len(self.resolved.tasks))
        self._progress_started = True

    def run_attempts(self, plan: Iterable[PlannedAttempt], notes: IndexedNotes | None) -> None:
        cfg = self.config
        jobs = self.jobs.with_notes(notes)
        Scheduler(
            (jobs.job(p.task, p.attempt, p.try_number) for p in plan),
            executor=self.resolved.executor,
            concurrency=cfg.concurrency,
            retries=cfg.retries,
            retry=lambda job: jobs.job(job.task, job.attempt, job.try_number + 1),
            books=self,
            stops=self.stops,
            progress=self.progress,
            solved_threshold=cfg.solved_threshold,
        ).run()

    def run_forum_sessions(
        self,
        plan: Sequence[ForumSessionPlan],
        finished: Callable[[ForumSessionPlan, AttemptRecord], None],
    ) -> None:
        forum = self.forum_jobs
        assert forum is not None, "a run with a forum has its forum jobs"
        jobs = [(forum.job(item), item) for item in plan]
        books = _ForumBooks(self, {job.key: item for job, item in jobs}, finished)
        Scheduler(
            (job for job, _ in jobs),
            executor=self.resolved.executor,
            concurrency=self.config.concurrency,
            retries=0,  # a session that fails is over: its participant said nothing that round
            retry=lambda job: attrs.evolve(job, try_number=job.try_number + 1),
            books=books,
            stops=self.stops,
            progress=NullProgress(),
            solved_threshold=self.config.solved_threshold,
        ).run()

    def stopped(self) -> bool:
        return self.stops.stopping

    def over_budget(self) -> bool:
        return self.stops.over_budget()

    def observe(self, hook: ObserverHook, **kwargs: Any) -> None:
        self.observer_errors.extend(get_plugins().call_observers(hook, run=self.info, **kwargs))

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def add_spend(self, usd: float) -> None:
        self.stops.spent_usd += usd

    # -- what the scheduler hands over ---------------------------------------------------
    def prepare(self, job: AttemptJob) -> None:
        """Before a job runs: the run directory is still there, and its attempt directory
        is free (a finished attempt whose journal line is unreadable is kept aside)."""
        self.journal.check_present()  # a deleted run directory stops the run
        kept_aside = clear_attempt_dir(job.attempt_dir())
        if kept_aside is not None:
            self.warnings.append(kept_aside)

    def settle(self, outcome: JobOutcome) -> AttemptRecord:
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
        elif outcome.evidence is not None:
            self._evidence[record.attempt_dir] = outcome.evidence
        self.stops.settle(record)
        return record

    def record(
        self, job: AttemptJob, record: AttemptRecord, then: Callable[[], None] | None = None
    ) -> None:
        """Journal ``record``; once its line is synced, tell the observers, then ``then``.

        The line is written now (a ``kill -9`` keeps it) and synced in the
        background with the lines written meanwhile: the driver does not wait
        for the disk, and nobody hears of a record the journal could still lose.
        """
        with self._journal_errors():
            count = self.journal.write(record)
        self._unheard.append((count, record, then))

    def deliver(self, *, wait: bool = False) -> None:
        """Tell of every record whose line is synced now (with ``wait``: of every record)."""
        if not self._unheard:
            return
        with self._journal_errors():
            if wait:
                self.journal.wait_durable(self._unheard[-1][0])
            durable = self.journal.durable()
        ready = [record for count, record, _ in self._unheard if count <= durable]
        # One store transaction for the records one sync made durable (half of them come
        # two or more at a time), then each is told of, in the journal's order.
        evidence = {
            r.attempt_dir: found
            for r in ready
            if (found := self._evidence.pop(r.attempt_dir, None)) is not None
        }
        self._store(ready, evidence)
        for _ in ready:
            _, record, then = self._unheard.popleft()
            self.observe("ksi_attempt_finished", record=record)
            if then is not None:
                then()

    def _store(self, records: list[AttemptRecord], evidence: dict[str, DiffEvidence]) -> None:
        """The journalled attempts into the knowledge store too."""
        try:
            self.store.record(records, evidence)
        except (sqlite3.Error, StoreBusy) as exc:
            # The journal holds the attempts: the store gets them before the next distillation.
            note = f"knowledge store {self.store.path}: could not record an attempt ({exc})"
            if note not in self.warnings:
                self.warnings.append(note)

    def unheard(self) -> bool:
        """Whether a journalled record waits for its sync before anyone hears of it."""
        return bool(self._unheard)

    @contextlib.contextmanager
    def _journal_errors(self) -> Iterator[None]:
        try:
            yield
        except DiskFullError as exc:  # noted before the teardown, which then wipes workspaces
            self.stops.note_full_disk(exc.__cause__, journal_failed=True)
            raise

    def _error_record(
        self, job: AttemptJob, error: str, error_kind: ErrorKind = ErrorKind.NONE
    ) -> AttemptRecord:
        components = self.resolved.components
        return error_record(
            error,
            kind=error_kind,
            task_id=job.task.id,
            attempt=job.attempt,
            try_number=job.try_number,
            agent=component_name(components.agent),
            evaluator=component_name(components.evaluator),
            environment=component_name(components.environment),
            model=job.settings.model,
            attempt_dir=os.path.relpath(job.attempt_dir(), job.run_dir),
            generation=job.generation,
            knowledge=job.knowledge,
        )

    # -- the end -------------------------------------------------------------------------
    def finish(self, *, loop_complete: bool) -> RunSummary:
        """``run.json`` closed for this session, the summary, and ``ksi_run_finished``."""
        # Complete when the loop finished (a budget reached by the last attempt stopped
        # nothing) and no task of the run this session left out (--task-id...) lacks
        # an attempt of generation 1.
        journal = self.journal.current()  # read back from memory: it was closed just now
        latest = latest_by_attempt(list(journal.records))
        session = {t.id for t in self.resolved.tasks}
        missing_elsewhere = any(
            (task_id, n) not in latest
            for task_id in self.state.task_ids
            if task_id not in session
            for n in range(1, self.config.attempts + 1)
        )
        complete = not self.stops.interrupted and loop_complete and not missing_elsewhere
        finished = self.state.finished_session(complete=complete, stopped_reason=self.stops.reason)
        if not save_unless_disk_full(self.layout.run_json, to_data(finished)):
            self.stops.note_full_disk()
        summary = summarize_run(self.layout.root, journal=journal)
        summary = attrs.evolve(summary, warnings=(*summary.warnings, *self.warnings))
        self.observe("ksi_run_finished", summary=summary)
        return summary


class _ForumBooks:
    """The scheduler's bookkeeper for forum sessions: the session's checks and stops, and
    each finished session handed to the forum (which stores it), never to the journal."""

    def __init__(
        self,
        session: RunSession,
        plans: dict[tuple[str, int, int], ForumSessionPlan],
        finished: Callable[[ForumSessionPlan, AttemptRecord], None],
    ) -> None:
        self._session = session
        self._plans = plans
        self._finished = finished

    def prepare(self, job: AttemptJob) -> None:
        self._session.prepare(job)

    def settle(self, outcome: JobOutcome) -> AttemptRecord:
        return self._session.settle(outcome)

    def record(
        self, job: AttemptJob, record: AttemptRecord, then: Callable[[], None] | None = None
    ) -> None:
        """Hand the session to the forum now: it is not journalled, so there is no sync
        to wait for before ``then``."""
        stops = self._session.stops
        try:
            with disk_full_as_error(self._session.layout.root, "the forum's sessions"):
                self._finished(self._plans[job.key], record)
        except DiskFullError as exc:  # the run stops, and says why; a resume reruns the session
            stops.note_full_disk(exc.__cause__)
            raise
        if then is not None:
            then()

    def deliver(self, *, wait: bool = False) -> None:
        """Nothing waits: each session was handed over when it ended."""

    def unheard(self) -> bool:
        return False
