"""The executor contract: what an executor moves, runs and returns.

An executor (a built-in such as ``local`` or ``processes``, or a plugin such as
ksi-ray) takes :class:`AttemptJob` values from the driver, runs each with
:func:`run_job` wherever it likes (a thread, another process, another machine),
and hands back a :class:`JobOutcome` holding the job's :class:`AttemptRecord`.
A job is frozen and picklable, and :func:`run_job` shares no state with the
driver, so the same code runs anywhere; the driver alone writes the journal.
:func:`job_outcome` runs a job the same way and returns its outcome with the
pieces of the attempt's files the knowledge store's evidence holds, cut where
the attempt wrote them; an executor that carries them back spares the driver
reading the files (one that returns only the record loses nothing else).

This is the one module executors import; the modules behind it
(:mod:`ksi.attempt`, :mod:`ksi.records`) may move, this one keeps its names.
docs/plugins.md ("Executors") is the guide.
"""

from __future__ import annotations

from ksi.attempt.cancel import cancel_session, forget_session
from ksi.attempt.diskfull import save_unless_disk_full
from ksi.attempt.evidence import DiffEvidence
from ksi.attempt.execute import components_for, forget_components, job_outcome, run_job, seed_dir
from ksi.attempt.job import (
    AttemptJob,
    AttemptSettings,
    ComponentSpec,
    ContextFile,
    JobOutcome,
    pickled_job,
    unpicklable_reason,
)
from ksi.records import WORKER_LOST, AttemptRecord, ErrorKind

__all__ = [
    "WORKER_LOST",
    "AttemptJob",
    "AttemptRecord",
    "AttemptSettings",
    "ComponentSpec",
    "ContextFile",
    "DiffEvidence",
    "ErrorKind",
    "JobOutcome",
    "cancel_session",
    "components_for",
    "forget_components",
    "forget_session",
    "job_outcome",
    "pickled_job",
    "run_job",
    "save_unless_disk_full",
    "seed_dir",
    "unpicklable_reason",
]
