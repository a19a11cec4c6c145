"""The ``local`` executor: attempt jobs run in threads of this process.

Attempts spend their time waiting on child processes, so threads are enough.
The pool has ``concurrency`` threads; the driver submits at most that many
jobs at a time, so a run of 10,000 tasks never holds 10,000 futures. Jobs run
in the driver's process, with the driver's already prepared components, and
:meth:`LocalExecutor.cancel` stops them through :mod:`ksi.attempt.cancel`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import ClassVar

import attrs

from ksi.hookspecs import Register, hookimpl
from ksi.jobs import AttemptJob, JobOutcome, cancel_session, job_outcome


def outcome_of(job: AttemptJob, future: Future[JobOutcome]) -> JobOutcome:
    """A finished future as an outcome: its own, or the error it raised."""
    exc = future.exception()
    if exc is not None:
        return JobOutcome(job, error=f"{type(exc).__name__}: {exc}")
    return future.result()


@attrs.define
class LocalExecutor:
    """Runs attempt jobs in a bounded thread pool and yields outcomes as they finish."""

    name: ClassVar[str] = "local"
    aliases: ClassVar[tuple[str, ...]] = ("threads",)
    description: ClassVar[str] = (
        "Runs attempts in threads of the ksi process on this machine, at most "
        "--concurrency at a time."
    )

    _pool: ThreadPoolExecutor | None = attrs.field(default=None, init=False)
    _running: dict[Future[JobOutcome], AttemptJob] = attrs.field(factory=dict, init=False)
    _sessions: set[str] = attrs.field(factory=set, init=False)
    _cancelled: bool = attrs.field(default=False, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def start(self, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self._cancelled = False
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ksi-attempt")

    def submit(self, job: AttemptJob) -> None:
        if self._pool is None:
            raise RuntimeError("LocalExecutor.submit() before start()")
        # Known before the job can start: a Ctrl-C landing in this method still cancels it.
        self._sessions.add(job.session_id)
        future = self._pool.submit(job_outcome, job)
        with self._lock:
            self._running[future] = job

    def as_completed(self, timeout: float | None = None) -> Iterator[JobOutcome]:
        while True:
            with self._lock:
                running = set(self._running)
            if not running:
                if self._cancelled and self._pool is not None:
                    # A job whose future a Ctrl-C kept from being recorded still runs
                    # (cancelled): wait for every thread, so none outlives the run.
                    self._pool.shutdown(wait=True, cancel_futures=True)
                    self._pool = None
                return
            done, _ = wait(running, timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:
                return  # timed out with nothing finished
            for future in done:
                with self._lock:
                    job = self._running.pop(future)
                yield outcome_of(job, future)

    def cancel(self) -> None:
        """Stop every running job of this executor's sessions; jobs not started never start."""
        with self._lock:
            self._cancelled = True
            sessions = list(self._sessions)
            queued = [f for f in self._running if f.cancel()]
        for session_id in sessions:
            cancel_session(session_id)
        with self._lock:
            for future in queued:
                self._running.pop(future, None)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


@hookimpl(trylast=True)
def ksi_register_executors(register: Register) -> None:
    register(LocalExecutor)
