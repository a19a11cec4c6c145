"""Which try starts next: planned attempts, then retries once their backoff is over.

One :class:`Scheduler` runs one batch of jobs (a generation's missing
attempts, or a round of its forum) through the executor, never more than
``--concurrency`` at a time; jobs are made as they are submitted, so a plan
of 10,000 attempts never holds 10,000 jobs. A try that may be
retried (``--retries``) comes back as a new ``try_number``, at once or, for
a rate limit or an overloaded model, after an exponential backoff with
jitter; retries waiting out their backoff sit in a heap ordered by when
they are ready. The scheduler writes nothing itself: the session it
reports to (:class:`Bookkeeper`) clears attempt directories, settles
outcomes into records and journals them.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

import attrs

from ksi.attempt.diskfull import wipe_after_disk_full
from ksi.attempt.execute import RETRYABLE_AGENT_STATUSES
from ksi.attempt.job import AttemptJob, JobOutcome
from ksi.generations.steps import may_retry
from ksi.interfaces import Executor
from ksi.records import AttemptRecord, is_solved
from ksi.runs.progress import Progress
from ksi.runs.stops import RunStops

BACKOFF_BASE_SEC = 2.0
BACKOFF_MAX_SEC = 120.0
#: While a journalled record waits for its sync, the longest the loop waits for an outcome
#: before it looks again (a sync takes about a millisecond; a long attempt, minutes).
_DELIVER_POLL_SEC = 0.005


def backoff_sec(record: AttemptRecord, try_number: int) -> float:
    """How long the next try of ``record`` waits: a rate limit or an overloaded model backs
    off exponentially (with jitter, so many attempts do not return at once); others do not."""
    if record.agent_status not in RETRYABLE_AGENT_STATUSES:
        return 0.0
    delay: float = min(BACKOFF_MAX_SEC, BACKOFF_BASE_SEC * 2**try_number)
    return delay * (0.5 + random.random())


class Bookkeeper(Protocol):
    """What the scheduler hands its jobs and outcomes to (the run's session)."""

    def prepare(self, job: AttemptJob) -> None:
        """Make the run directory ready for ``job`` (before it is submitted)."""

    def settle(self, outcome: JobOutcome) -> AttemptRecord:
        """The record of a finished try, and what it stops (nothing written yet)."""

    def record(
        self, job: AttemptJob, record: AttemptRecord, then: Callable[[], None] | None = None
    ) -> None:
        """Keep ``record`` of ``job``'s try (the journal); once it is durable, tell the
        observers, then call ``then``."""

    def deliver(self, *, wait: bool = False) -> None:
        """Tell of the records that became durable (with ``wait``: of every record)."""

    def unheard(self) -> bool:
        """Whether a kept record is not yet durable, so not yet told of."""


@attrs.frozen(order=True)
class _Retry:
    """A retry waiting out its backoff, in the order it becomes ready."""

    ready_at: float
    sequence: int
    job: AttemptJob = attrs.field(eq=False, order=False)
    #: The try it follows: what stands if the run stops before it starts.
    previous: AttemptRecord = attrs.field(eq=False, order=False)


class Scheduler:
    """Runs one plan of tries through an executor (see the module docstring)."""

    def __init__(
        self,
        jobs: Iterable[AttemptJob],
        *,
        executor: Executor,
        concurrency: int,
        retries: int,
        retry: Callable[[AttemptJob], AttemptJob],
        books: Bookkeeper,
        stops: RunStops,
        progress: Progress,
        solved_threshold: float,
    ) -> None:
        self._executor = executor
        self._window = concurrency
        self._retries = retries
        #: The next try of a job that may be retried.
        self._retry = retry
        self._books = books
        self._stops = stops
        self._progress = progress
        self._solved_threshold = solved_threshold
        self._planned: Iterator[AttemptJob] = iter(jobs)
        self._next: AttemptJob | None = next(self._planned, None)
        #: Retries waiting out their backoff (a heap).
        self._waiting: list[_Retry] = []
        self._sequence = itertools.count()
        self._inflight = 0

    def run(self) -> None:
        """Until every try of the plan (and its retries) is journalled, or the run stops."""
        executor = self._executor
        executor.start(self._window)
        try:
            while True:
                for _ in range(self._submit_ready()):
                    self._progress.attempt_started()
                if self._stops.stopping:
                    self._drop_retries()
                if self._inflight == 0 and not self._waiting:
                    break
                timeout = (
                    max(0.0, self._waiting[0].ready_at - time.monotonic())
                    if self._waiting
                    else None
                )
                if self._inflight == 0 and timeout is not None:
                    self._books.deliver(wait=True)
                    time.sleep(timeout)  # only retries waiting out their backoff
                    continue
                if self._books.unheard():
                    timeout = (
                        _DELIVER_POLL_SEC if timeout is None else min(timeout, _DELIVER_POLL_SEC)
                    )
                for outcome in executor.as_completed(timeout):
                    self._inflight -= 1
                    record = self._books.settle(outcome)
                    # The next attempt starts before this record is journalled: a worker
                    # does not wait for the journal's fsync. What stops the run (a full
                    # disk, --max-cost, an auth error) was decided from the record above;
                    # the record is still durable before anyone hears of it.
                    try:
                        launched = self._submit_ready()
                    except BaseException:
                        self._journal(outcome.job, record)  # journalled whatever stops us
                        raise
                    retry = self._journal(outcome.job, record, launched)
                    if retry is not None:
                        heapq.heappush(self._waiting, retry)
                    self._books.deliver()
                    # A record not synced yet: wait for outcomes a few ms at a time (the
                    # wait above), so it is told of once synced, not when the next one ends.
                    if self._can_submit() or self._books.unheard():
                        break
                self._books.deliver()
            self._books.deliver(wait=True)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                self._stops.interrupted = True
            self._abandon()
            with contextlib.suppress(Exception):  # what was journalled is told of
                self._books.deliver(wait=True)
            raise
        finally:
            with contextlib.suppress(Exception):
                executor.shutdown()

    def _retry_ready(self) -> bool:
        return bool(self._waiting) and self._waiting[0].ready_at <= time.monotonic()

    def _can_submit(self) -> bool:
        if self._stops.stopping or self._inflight >= self._window:
            return False
        return self._retry_ready() or self._next is not None

    def _submit_ready(self) -> int:
        """Submit what may start now; return how many planned (not retried) jobs."""
        launched = 0
        while self._can_submit():
            if self._retry_ready():
                job = heapq.heappop(self._waiting).job
            else:
                assert self._next is not None
                job, self._next = self._next, next(self._planned, None)
                launched += 1
            self._books.prepare(job)
            self._executor.submit(job)
            self._inflight += 1
        return launched

    def _drop_retries(self) -> None:
        """After a stop: no retry starts (its last try stands), and what was never
        launched is listed for the message about the agent's set-up."""
        if self._waiting:
            self._books.deliver(wait=True)  # the tries that stand are durable before told of
        for retry in self._waiting:
            self._finished(retry.previous)
        self._waiting.clear()
        if self._stops.setup_failed:  # for the message: what the stop left out
            while self._next is not None:
                self._stops.not_started.append(self._next.task.id)
                self._next = next(self._planned, None)

    def _journal(self, job: AttemptJob, record: AttemptRecord, launched: int = 0) -> _Retry | None:
        """Journal one settled try; return its retry when it is to be retried.

        The progress hears of it once its record is durable: the last try of an
        attempt finishes it, and only then are the ``launched`` attempts that
        took its place counted as started ("running" never exceeds the window).
        """
        retry = None
        if may_retry(record, self._retries) and not self._stops.stopping:
            ready_at = time.monotonic() + backoff_sec(record, job.try_number)
            retry = _Retry(ready_at, next(self._sequence), self._retry(job), record)

        def heard() -> None:
            if retry is None:
                self._finished(record)
            for _ in range(launched):
                self._progress.attempt_started()

        self._books.record(job, record, heard)
        return retry

    def _finished(self, record: AttemptRecord) -> None:
        """The last try of a (task, attempt): one step of the progress bar."""
        self._progress.attempt_finished(record, is_solved(record.score, self._solved_threshold))

    def _abandon(self) -> None:
        """Teardown: stop launching, kill running attempts and wait until none is left.

        Attempts killed by the driver are not results: their outcomes are
        dropped (a resume runs them again). No attempt may outlive the run:
        one still starting would launch its agent after the kill.
        """
        self._stops.stopping = True
        with contextlib.suppress(Exception):
            self._executor.cancel()
        with contextlib.suppress(Exception):
            for outcome in self._executor.as_completed():
                if self._stops.disk.happened:  # the filler goes; the logs stay
                    wipe_after_disk_full(outcome.job.attempt_dir())
