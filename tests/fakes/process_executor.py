"""An executor that runs each attempt job in a separate process, as a remote one would.

Registered like any plugin (``processes``). Jobs are pickled into
``spawn``-ed worker processes (a fresh interpreter: KSI's plugins load there,
nothing is inherited from the driver) and records come back as values. On
cancel it does what the Executor protocol asks of any executor whose jobs run
elsewhere: it makes every worker call :func:`ksi.runner.cancel.cancel_all`
(here through SIGUSR1), so the agents they started are stopped.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from types import FrameType
from typing import ClassVar

import attrs

from ksi.executors.local import outcome_of
from ksi.hookspecs import Register, hookimpl
from ksi.runner.attempt import run_job
from ksi.runner.cancel import cancel_all
from ksi.runner.job import AttemptJob, JobOutcome, unpicklable_reason
from ksi.runner.models import AttemptRecord


def _on_cancel(signum: int, frame: FrameType | None) -> None:
    threading.Thread(target=cancel_all, daemon=True).start()


def _worker_init() -> None:
    signal.signal(signal.SIGUSR1, _on_cancel)
    # Ctrl-C in a terminal reaches the whole process group: the driver decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def work(job: AttemptJob) -> tuple[AttemptRecord, int]:
    """Run one job; also say which process ran it."""
    return run_job(job), os.getpid()


@attrs.define
class ProcessExecutor:
    name: ClassVar[str] = "processes"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "Runs each attempt job in a worker process (tests)."

    #: Process ids of the workers that ran jobs (the test checks they are not the driver).
    worker_pids: ClassVar[set[int]] = set()

    _pool: ProcessPoolExecutor | None = attrs.field(default=None, init=False)
    _running: dict[Future[tuple[AttemptRecord, int]], AttemptJob] = attrs.field(
        factory=dict, init=False
    )
    #: Jobs refused before they were sent (they could not be pickled).
    _failed: list[JobOutcome] = attrs.field(factory=list, init=False)

    def start(self, concurrency: int) -> None:
        self._pool = ProcessPoolExecutor(
            max_workers=concurrency,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init,
        )

    def submit(self, job: AttemptJob) -> None:
        assert self._pool is not None
        if reason := unpicklable_reason(job):
            self._failed.append(JobOutcome(job, error=reason))
            return
        self._running[self._pool.submit(work, job)] = job

    def as_completed(self, timeout: float | None = None) -> Iterator[JobOutcome]:
        while self._failed:
            yield self._failed.pop()
        while self._running:
            done, _ = wait(set(self._running), timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:
                return
            for future in done:
                job = self._running.pop(future)
                if future.exception() is None:
                    record, pid = future.result()
                    type(self).worker_pids.add(pid)
                    yield JobOutcome(job, record=record)
                else:
                    yield outcome_of(job, future)  # type: ignore[arg-type]

    def cancel(self) -> None:
        for future in [f for f in self._running if f.cancel()]:
            self._running.pop(future, None)
        pool = self._pool
        for pid in list(getattr(pool, "_processes", None) or {}):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


@hookimpl
def ksi_register_executors(register: Register) -> None:
    register(ProcessExecutor)
