"""Starting the ``processes`` executor's worker processes, apart from the executor so that
``ksi run`` can start one before it has imported what the run needs.

Why: a worker is a fresh interpreter that imports KSI and the plugins (about
0.12 s of CPU on a 2-core VM). Started when the scheduler submits the first
job, it keeps a short run's first attempt waiting that long, with one core
idle; started as ``ksi run`` reads its options (:func:`prestart`), it loads
beside the driver's own set-up (its imports, the tasks, the run directory).
Importing this module costs nothing the CLI has not loaded.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a worker starts: prestart() must not wait for it
    from multiprocessing.connection import Connection

    from ksi.attempt.job import AttemptJob

#: What the worker process runs: :func:`ksi.executors.processes.serve` on the two pipe
#: descriptors and the driver's pid, with the driver's ``sys.path`` (set before KSI is
#: imported: a source checkout, a test's paths).
_WORKER_CODE = (
    "import os, sys; sys.path[:] = os.environ.pop('KSI_WORKER_SYS_PATH').split(os.pathsep); "
    "from ksi.executors.processes import serve; "
    "serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))"
)


class Worker:
    """One worker process, its two pipes, and the job it runs (None when idle)."""

    def __init__(self, proc: subprocess.Popen[bytes], jobs: Connection, records: Connection):
        self.proc = proc
        self.jobs = jobs  # driver -> worker
        self.records = records  # worker -> driver
        self.job: AttemptJob | None = None

    def close(self) -> None:
        for conn in (self.jobs, self.records):
            with contextlib.suppress(OSError):
                conn.close()

    def end(self) -> None:
        """Close its pipes and kill it (an idle worker holds no attempt), then reap it."""
        self.close()
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()


def start_worker() -> Worker:
    """A new worker; a worker started by :func:`prestart` and not taken yet, if any."""
    if _warm:
        return _warm.pop()
    # start-up: multiprocessing's connection module only when a worker starts
    from multiprocessing.connection import Connection

    job_r, job_w = os.pipe()
    rec_r, rec_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_CODE, str(job_r), str(rec_w), str(os.getpid())],
            pass_fds=(job_r, rec_w),
            stdin=subprocess.DEVNULL,
            # A plugin's print() must not land in the driver's stdout (a report may be there).
            stdout=2,
            env={**os.environ, "KSI_WORKER_SYS_PATH": os.pathsep.join(sys.path)},
            close_fds=True,
        )
    except BaseException:
        for fd in (job_w, rec_r):
            os.close(fd)
        raise
    finally:
        os.close(job_r)
        os.close(rec_w)
    return Worker(proc, Connection(job_w, readable=False), Connection(rec_r, writable=False))


#: Workers started by :func:`prestart` that no executor has taken yet.
_warm: list[Worker] = []


def prestart() -> None:
    """Start one worker now, for a run of executor ``processes`` this process is about to
    set up: its executor's first worker is this one, already loaded.

    One, not ``--concurrency``: every run with an attempt to run needs one, and
    the others start with the jobs that need them (a one-attempt run starts
    no more). A process that never runs attempts (its run refused, nothing
    left to resume) ends it at exit; a killed one takes it along, as it does
    its other workers (the parent-death signal).
    """
    if not _warm:
        worker = start_worker()
        _warm.append(worker)
        atexit.register(_end_warm)


def _end_warm() -> None:
    while _warm:
        _warm.pop().end()
