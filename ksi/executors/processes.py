"""The ``processes`` executor: attempt jobs run in worker processes on this machine.

Why it exists: the ``local`` executor's threads share one interpreter lock,
and an attempt's own Python work (seeding, capture, diff, grading) is a few
milliseconds, so with many short attempts two threads mostly take turns
(docs/running.md, "What an attempt costs"). Worker processes each have
their own lock and run those parts side by side.

How: up to ``--concurrency`` workers, each a fresh interpreter (``python -c``,
nothing inherited from the driver but its environment, working directory and
``sys.path``), started when a job finds no idle one and kept for the whole
run: a run of fewer attempts than ``--concurrency`` starts only as many
workers as it has attempts (each start costs about 0.12 s of CPU: KSI and the
plugins imported), and a full window's jobs, submitted together, start theirs
side by side. ``ksi run`` starts the first one as it reads its options
(:mod:`ksi.executors.workers`). Each worker holds one job at a time; the
driver writes the pickled job to the worker's job pipe and reads the pickled
record from its record pipe, in the driver's own thread, with no pool thread
in between (a thread hop per job costs as much as a short attempt's Python).
Components are resolved by name in the worker, from the installed plugins
(``ksi.attempt.execute.components_for``), so a component given as a Python
object must pickle (defined at module level), and a plugin registered
in-process only is not found there.

Lifecycle: a worker that dies mid-job makes that job an error outcome with
``worker_lost`` (a resume runs it again) and is replaced for the next job.
Ctrl-C reaches the workers as SIGUSR1: each stops the attempt it runs, as
:func:`ksi.attempt.cancel.cancel_session` does for threads. Workers ignore the
terminal's SIGINT (the driver decides), and die with the driver (Linux's
parent-death signal), as threads would.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Iterator
from types import FrameType
from typing import ClassVar

import attrs

from ksi.errors import UnknownComponentError
from ksi.executors.workers import Worker, start_worker
from ksi.hookspecs import Register, hookimpl
from ksi.jobs import (
    AttemptJob,
    AttemptRecord,
    DiffEvidence,
    ErrorKind,
    JobOutcome,
    pickled_job,
)

#: Seconds a worker whose record pipe closed has to finish dying before it is killed.
_DEATH_WAIT_SEC = 5.0


@attrs.define
class ProcessExecutor:
    """Runs attempt jobs in up to ``concurrency`` worker processes, yielding each outcome."""

    name: ClassVar[str] = "processes"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Runs attempts in --concurrency worker processes on this machine (faster than "
        "threads for many short attempts; components must be named plugins or pickle)."
    )

    _workers: list[Worker] = attrs.field(factory=list, init=False)
    #: The most workers this run may have (start()'s concurrency; 0 before and after).
    _size: int = attrs.field(default=0, init=False)
    _queued: deque[AttemptJob] = attrs.field(factory=deque, init=False)
    _done: deque[JobOutcome] = attrs.field(factory=deque, init=False)
    _cancelled: bool = attrs.field(default=False, init=False)

    def start(self, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self._cancelled = False
        self._size = concurrency  # the workers start with the jobs that need them

    def submit(self, job: AttemptJob) -> None:
        if not self._size:
            raise RuntimeError("ProcessExecutor.submit() before start()")
        self._queued.append(job)
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand queued jobs to idle workers, starting one while fewer than ``concurrency``
        run (a dead idle worker is replaced first)."""
        while self._queued and not self._cancelled:
            worker = next((w for w in self._workers if w.job is None), None)
            if worker is None:
                if len(self._workers) >= self._size:
                    return
                worker = start_worker()
                self._workers.append(worker)
            job = self._queued.popleft()
            try:
                data = pickled_job(job)
            except ValueError as exc:
                self._done.append(JobOutcome(job, error=str(exc)))
                continue
            try:
                worker.jobs.send_bytes(data)
            except OSError:  # it died while idle: a fresh one takes the job
                self._replace(worker)
                self._queued.appendleft(job)
                continue
            worker.job = job

    def _replace(self, worker: Worker) -> None:
        worker.end()
        self._workers[self._workers.index(worker)] = start_worker()

    def as_completed(self, timeout: float | None = None) -> Iterator[JobOutcome]:
        # start-up: listing components imports this module; this only when used
        from multiprocessing.connection import wait

        while True:
            while self._done:
                yield self._done.popleft()
            busy = {w.records: w for w in self._workers if w.job is not None}
            if not busy:
                return
            ready = wait(list(busy), timeout)
            if not ready:
                return  # timed out with nothing finished
            for conn in ready:
                worker = busy[conn]  # type: ignore[index]
                job, worker.job = worker.job, None
                assert job is not None
                self._done.append(self._receive(worker, job))
            self._dispatch()

    def _receive(self, worker: Worker, job: AttemptJob) -> JobOutcome:
        try:
            data = worker.records.recv_bytes()
        except (EOFError, OSError):  # the record pipe closes when the worker dies
            try:
                code = worker.proc.wait(_DEATH_WAIT_SEC)
            except subprocess.TimeoutExpired:  # alive, but it closed its pipe: unusable
                worker.proc.kill()
                code = worker.proc.wait()
            self._replace(worker)
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            return JobOutcome(
                job,
                error=f"the worker process running this attempt died ({how})",
                error_kind=ErrorKind.WORKER_LOST,
            )
        try:
            record, evidence, error = pickle.loads(data)
        except Exception as exc:
            return JobOutcome(
                job, error=f"the worker's record could not be read ({type(exc).__name__}: {exc})"
            )
        if record is None:
            return JobOutcome(job, error=error)
        return JobOutcome(job, record=record, evidence=evidence)

    def cancel(self) -> None:
        """Stop every running job (SIGUSR1 to each busy worker); queued jobs never start."""
        self._cancelled = True
        self._queued.clear()
        for worker in self._workers:
            if worker.job is not None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.send_signal(signal.SIGUSR1)

    def shutdown(self) -> None:
        """End every worker at once: an idle one holds no attempt, so nothing is lost;
        a busy one only after a cancel whose outcomes were not awaited."""
        workers, self._workers, self._size = self._workers, [], 0
        for worker in workers:
            worker.close()
            with contextlib.suppress(OSError):
                worker.proc.kill()
        for worker in workers:
            worker.proc.wait()


# -- the worker's side ------------------------------------------------------------------

_IN_PROCESS_HINT = (
    " (in a worker process of executor 'processes', which loads the installed plugins "
    "only: a plugin registered in the driver's process with register_plugin is not "
    "there; install it as a plugin, or use --executor local)"
)
#: The session of the job this worker runs now ("" when idle).
_current_session = ""
_cancel_requested = False


def _on_cancel(signum: int, frame: FrameType | None) -> None:
    """SIGUSR1: stop the running attempt, from a thread (never under a lock the handler
    may have interrupted), and every attempt of the session received later."""
    global _cancel_requested
    _cancel_requested = True
    if _current_session:
        _cancel_in_thread(_current_session)


def _cancel_in_thread(session_id: str) -> None:
    # start-up: listing components imports this module; this only when used
    from ksi.jobs import cancel_session

    threading.Thread(target=cancel_session, args=(session_id,), daemon=True).start()


def _die_with_parent(driver: int) -> None:
    """SIGKILL this worker when the driver dies (Linux), as its threads would die with it.

    The signal is only asked for once the interpreter has started, which under
    load takes seconds, and the driver writes the first job into the pipe
    without waiting: a driver killed meanwhile would leave a worker that runs
    that job with nobody to report to. Its parent is then no longer the driver
    (an orphan's parent is a subreaper or init), so it ends here instead.
    """
    with contextlib.suppress(Exception):
        # start-up: listing components imports this module; this only when used
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != driver:  # the driver died before the signal was asked for
        os._exit(1)


def serve(job_fd: int, record_fd: int, driver: int) -> None:
    """A worker's loop: read a pickled job, run it, write back ``(record, error)``.

    ``driver`` is the pid of the process that started this worker.
    """
    global _current_session
    _die_with_parent(driver)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    signal.signal(signal.SIGUSR1, _on_cancel)
    # start-up: listing components imports this module; this only when used
    from multiprocessing.connection import Connection

    from ksi.jobs import cancel_session, job_outcome

    jobs = Connection(job_fd, writable=False)
    records = Connection(record_fd, readable=False)
    while True:
        try:
            data = jobs.recv_bytes()
        except EOFError:
            return  # the driver closed the pipe: the run is over
        result: tuple[AttemptRecord | None, DiffEvidence | None, str]
        try:
            job: AttemptJob = pickle.loads(data)
            _current_session = job.session_id
            if _cancel_requested:  # Ctrl-C came before the job: it starts cancelled
                cancel_session(job.session_id)
            outcome = job_outcome(job)
            result = (outcome.record, outcome.evidence, "")
        except UnknownComponentError as exc:
            result = (None, None, f"{type(exc).__name__}: {exc}{_IN_PROCESS_HINT}")
        except Exception as exc:
            result = (None, None, f"{type(exc).__name__}: {exc}")
        _current_session = ""
        try:
            reply = pickle.dumps(result)
        except Exception as exc:
            reply = pickle.dumps((None, None, f"the attempt's record cannot be pickled: {exc}"))
        records.send_bytes(reply)


@hookimpl(trylast=True)
def ksi_register_executors(register: Register) -> None:
    register(ProcessExecutor)
