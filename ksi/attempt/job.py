"""An attempt as a value: everything one attempt needs, in a frozen, picklable job.

The driver (:mod:`ksi.runs.driver`) builds one :class:`AttemptJob` per try
of an attempt; an executor moves it to a thread, another process or another
machine, where :func:`ksi.attempt.execute.execute_attempt` runs it and returns
its record, which comes back as a :class:`JobOutcome`. Nothing in a job
refers to the driver's state: components travel as :class:`ComponentSpec`
(a registered name and options, resolved where the job runs), the agent's
environment variables travel already scrubbed, and the settings travel as
values.
"""

from __future__ import annotations

import pickle
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from ksi.attempt.evidence import DiffEvidence
from ksi.layout import RunLayout
from ksi.models import TaskSpec
from ksi.records import AttemptRecord, ErrorKind, KnowledgeRef

ComponentKind = Literal["agent", "environment", "evaluator"]


@attrs.frozen
class ComponentSpec:
    """How to get a run's component wherever a job runs.

    ``ref`` is a registered name (the usual case: the worker loads its own
    plugins and builds the component with ``options``), or a component class
    or ready instance handed to :func:`ksi.run` (pickled by value when a job
    leaves the process, so it must be importable there).
    """

    kind: ComponentKind
    ref: Any
    options: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class AttemptSettings:
    """The run options an attempt obeys (the same for every job of a session)."""

    model: str | None = None
    #: ``--timeout`` for every task; None: the task's ``agent_timeout_sec``, else the default.
    timeout_sec: float | None = None
    log_cap_bytes: int = 20 * 1024 * 1024
    capture_max_file_bytes: int = 10 * 1024 * 1024
    #: ``--protect`` globs: files capture treats as the task's tests (with the task's own).
    protect: tuple[str, ...] = ()
    wipe_workspace: bool = True
    #: Where host evaluators grade: ``host`` (the spec) or a fresh ``environment``.
    eval_in: str = "host"
    #: How host grades run, as the driver decided it: ``none`` or ``sandbox``.
    eval_isolation: str = "none"
    #: Host variables the eval command gets besides the scrubbed environment (names).
    eval_env: tuple[str, ...] = ()
    #: The knowledge budget (``--knowledge-budget``): a scored attempt cuts the pieces
    #: of its ``diff.patch`` its stored evidence holds where it runs, and they travel on
    #: its outcome (None: it cuts none; the driver reads the file if it needs them).
    evidence_budget_bytes: int | None = None


@attrs.frozen
class ContextFile:
    """A file placed in the workspace beside ``repo/`` before the agent starts.

    Never inside ``repo/``, so never captured, graded or diffed (knowledge
    notes of earlier generations, for example). ``path`` is relative to the
    workspace.
    """

    path: str = attrs.field()
    content: str = ""
    #: A sentence added to the agent's prompt about this file; ``{path}`` becomes the
    #: file's path as the agent sees it ("" adds nothing).
    prompt_pointer: str = ""

    @path.validator
    def _check(self, _: Any, value: str) -> None:
        norm = posixpath.normpath(value)
        if (
            not value
            or posixpath.isabs(value)
            or norm == "."
            or norm.startswith("..")
            or norm.split("/")[0] == "repo"
        ):
            raise ValueError(
                f"context file {value!r}: expected a relative path in the workspace, outside repo/"
            )


@attrs.frozen
class KnowledgeToolsJob:
    """The store an attempt's knowledge tools answer from (``--knowledge-tools on``; see
    :mod:`ksi.knowledge.tools`), as a path where the job runs, and what they never show."""

    #: The live store, as a path where the job runs.
    store: str
    #: Tasks no answer may be about (the run's hold-outs).
    exclude_tasks: tuple[str, ...] = ()
    #: The job's own generation is visible too (a forum session's: its attempts are over).
    sees_own_generation: bool = False


@attrs.frozen
class ForumToolsJob:
    """A forum session's tools (``forum_read``, ``forum_post``, ``forum_done``: see
    :mod:`ksi.knowledge.forum_tools`), for an agent whose CLI speaks MCP."""

    #: The session's participant number in its room.
    participant: int
    #: The round's live directory, as a path where the job runs: where each session's
    #: posts are copied as they are made, for the others' ``forum_read`` (None: none).
    live_dir: str | None = None


@attrs.frozen
class AttemptJob:
    """One try of one attempt, ready to run anywhere."""

    run_id: str
    #: The driver session that submitted the job; cancellation is per session.
    session_id: str
    #: The run directory as seen where the job runs (the seeds live under it);
    #: an executor running jobs on another machine replaces it (``attrs.evolve``).
    run_dir: str
    task: TaskSpec
    attempt: int
    try_number: int
    agent: ComponentSpec
    environment: ComponentSpec
    evaluator: ComponentSpec
    settings: AttemptSettings
    #: The environment variables every agent process gets (scrubbed by the driver,
    #: plus ``KSI_RUN_ID``).
    agent_env: Mapping[str, str]
    #: The environment of a fresh grading environment (``--eval-in environment``):
    #: the allow-list only, no agent keys.
    eval_env: Mapping[str, str]
    #: Files to place beside ``repo/`` (filled by generations; empty otherwise).
    context_files: tuple[ContextFile, ...] = ()
    #: The generation this attempt belongs to (journalled on its record).
    generation: int = 1
    #: Which notes ``context_files`` hold (journalled on its record; None: no notes).
    knowledge: KnowledgeRef | None = None
    #: The knowledge tools' store and filters (``--knowledge-tools on``; None: no tools).
    knowledge_tools: KnowledgeToolsJob | None = None
    #: A forum session's tools (None: not a forum session, or none).
    forum_tools: ForumToolsJob | None = None

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.task.id, self.attempt, self.try_number)

    def attempt_dir(self, run_dir: Path | None = None) -> Path:
        """Where this try's files go, under ``run_dir`` (default: the job's own)."""
        layout = RunLayout(Path(run_dir) if run_dir is not None else Path(self.run_dir))
        return layout.attempt_dir(self.task.id, self.attempt, self.try_number)

    def seed_dir(self) -> Path:
        """The task's pristine starting files, materialised once per run directory."""
        return RunLayout(Path(self.run_dir)).seed_repo(self.task.id)

    def trash_dir(self) -> Path:
        """Where this job's finished trees go to be deleted in the background."""
        return RunLayout(Path(self.run_dir)).trash


@attrs.frozen
class JobOutcome:
    """What an executor hands back for one job: its record, or why there is none."""

    job: AttemptJob
    record: AttemptRecord | None = None
    #: Set when executing the job raised or its worker died (no record then).
    error: str = ""
    #: With ``error``: :attr:`~ksi.records.ErrorKind.WORKER_LOST` when the process or
    #: machine running the job died (the record gets it; a resume runs it again).
    error_kind: ErrorKind = attrs.field(default=ErrorKind.NONE, converter=ErrorKind)
    #: With ``record``: the pieces of its ``diff.patch`` its evidence holds, cut where it
    #: ran (None: the driver reads the file, as for a resumed attempt).
    evidence: DiffEvidence | None = None


def pickled_job(job: AttemptJob) -> bytes:
    """``job`` pickled to send to another process; ValueError saying why it cannot be.

    What pickle itself says differs between Python versions and never says
    what to do (3.11: "Can't pickle local object", 3.13: "Can't get local
    object"), so the error says it.
    """
    try:
        return pickle.dumps(job)
    except Exception as exc:
        raise ValueError(
            f"the attempt job cannot be pickled to run in another process "
            f"({type(exc).__name__}: {exc}); components given as Python objects must be "
            "defined at module level (or registered by a plugin and given by name)"
        ) from exc


def unpicklable_reason(job: AttemptJob) -> str:
    """Why ``job`` cannot travel to another process ("" when it can).

    For executors that send jobs out of this process: they call it before
    sending and report the reason as the job's error (see :func:`pickled_job`).
    """
    try:
        pickled_job(job)
    except ValueError as exc:
        return str(exc)
    return ""
