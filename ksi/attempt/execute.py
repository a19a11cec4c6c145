"""Executing one attempt job: the lifecycle in docs/running.md.

:func:`execute_attempt` seeds ``workspace/repo`` from the task's pristine
seed, starts the environment, lets the agent work (:mod:`ksi.attempt.agent_run`),
grades (:mod:`ksi.attempt.grading`: inside the environment for evaluators that
ask for it; otherwise on the host, on a copy of the captured repo), writes the
attempt's files and returns its record. Any failure of KSI or of the
environment becomes an ``error`` record, never an exception. It never touches
the journal: the driver does that.

A job shares no state with the driver: it carries everything it needs as
values, and its record is all the driver gets back, so it runs as well in a
thread of the driver's process, in another process, or on another machine.
Three things are shared within a process, on purpose:

* the components, resolved from the job's specs once per process and driver
  session (resolving loads plugins; an environment prepares once), or the
  driver's own, already prepared instances when the job runs in the driver's
  process (:func:`use_components`);
* the seed locks: a task's pristine seed is written once per run directory,
  by the first attempt that needs it (threads wait on a lock; processes race,
  and an atomic rename settles it);
* the cancel registry (:mod:`ksi.attempt.cancel`): the environment handles
  running now, by session, so Ctrl-C on the driver stops them where they run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from ksi.attempt.agent_run import AgentRunner, attempt_prompt
from ksi.attempt.cancel import CancelToken, close_token, open_token
from ksi.attempt.capture import CaptureReport, capture_repo, copy_tree, remove_tree
from ksi.attempt.clock import AttemptClock
from ksi.attempt.components import Components, component_name, resolve_components
from ksi.attempt.diff import write_diff
from ksi.attempt.diskfull import (
    disk_full_message,
    is_disk_full,
    save_unless_disk_full,
    wipe_after_disk_full,
)
from ksi.attempt.evidence import DiffEvidence, diff_bytes_needed, diff_evidence
from ksi.attempt.grading import Grader
from ksi.attempt.job import AttemptJob, JobOutcome
from ksi.attempt.safety import agent_is_isolated
from ksi.fstree import discard_tree
from ksi.interfaces import (
    AgentContext,
    AgentOutcome,
    AttemptContext,
    EnvironmentHandle,
    ExecResult,
    GivesFeedback,
    McpServer,
)
from ksi.models import AgentStatus, EvalResult, EvalStatus, TaskSpec, total_usage
from ksi.protected_files import ProtectRule
from ksi.records import (
    AttemptRecord,
    AttemptStatus,
    ErrorKind,
    RoundResult,
    error_record,
    now,
)
from ksi.serialization import to_data
from ksi.tasks.prompts import agent_prompt

#: Agent statuses meaning the agent never really worked on the task.
AGENT_INFRA_STATUSES = frozenset(
    {
        AgentStatus.AUTH_ERROR,
        AgentStatus.CONNECTION_ERROR,
        AgentStatus.TOOLS_REFUSED,
        AgentStatus.RATE_LIMITED,
        AgentStatus.OVERLOADED,
        AgentStatus.BUDGET_EXCEEDED,
        AgentStatus.ERROR,
    }
)
#: Agent statuses no attempt is at fault for, only the run's set-up (a key, an endpoint,
#: the agent's own sandbox or permission mode): not retried within a session (the next
#: try would fail the same way; they stop the run, :mod:`ksi.runs.stops`), run again by a
#: resume after the user's fix.
SETUP_FAILURES = frozenset(
    {AgentStatus.AUTH_ERROR, AgentStatus.CONNECTION_ERROR, AgentStatus.TOOLS_REFUSED}
)
#: Agent statuses worth another try after a pause (the driver backs off on them).
RETRYABLE_AGENT_STATUSES = frozenset({AgentStatus.RATE_LIMITED, AgentStatus.OVERLOADED})
#: Eval statuses that are deterministic: retrying cannot change them.
FINAL_EVAL_STATUSES = frozenset({EvalStatus.NO_EVAL})


# -- components, once per process and driver session ---------------------------------

_COMPONENTS: dict[str, Components] = {}
_COMPONENTS_LOCK = threading.Lock()


def use_components(session_id: str, components: Components) -> None:
    """Jobs of ``session_id`` run in this process use these (the driver's prepared ones)."""
    with _COMPONENTS_LOCK:
        _COMPONENTS[session_id] = components


def forget_components(session_id: str) -> None:
    with _COMPONENTS_LOCK:
        _COMPONENTS.pop(session_id, None)


def components_for(job: AttemptJob) -> Components:
    """The job's components: resolved from its specs on the first job of the session here."""
    with _COMPONENTS_LOCK:
        found = _COMPONENTS.get(job.session_id)
        if found is None:
            # In a worker process: plugins load here; environments prepare lazily.
            found = resolve_components(
                job.agent,
                job.environment,
                job.evaluator,
                eval_isolation=job.settings.eval_isolation,
                eval_in=job.settings.eval_in,
                eval_env=job.settings.eval_env,
            )
            _COMPONENTS[job.session_id] = found
        return found


# -- seeds: one pristine copy per task and run directory --------------------------------

_SEED_LOCKS: dict[str, threading.Lock] = {}
_SEED_LOCKS_GUARD = threading.Lock()


def seed_dir(task: TaskSpec, dest: Path) -> Path:
    """``dest`` filled with the task's starting files, written once (safe across processes)."""
    if dest.is_dir():
        return dest
    with _SEED_LOCKS_GUARD:
        lock = _SEED_LOCKS.setdefault(str(dest), threading.Lock())
    with lock:
        if not dest.is_dir():
            tmp = dest.with_name(f"repo.tmp-{os.getpid()}-{threading.get_ident()}")
            shutil.rmtree(tmp, ignore_errors=True)
            # The task's directory is made here, `tmp` by seed_into: one mkdir each (a
            # mkdir of `tmp` with parents=True would first fail for the missing parent).
            tmp.parent.mkdir(parents=True, exist_ok=True)
            try:
                task.starting_files.seed_into(tmp, task_id=task.id)
                os.replace(tmp, dest)
            except OSError:
                remove_tree(tmp)  # a full disk must not leave half a seed behind
                if not dest.is_dir():  # else another process won the race: same files
                    raise
            except BaseException:
                remove_tree(tmp)
                raise
    return dest


# -- one attempt ------------------------------------------------------------------------


def run_job(job: AttemptJob) -> AttemptRecord:
    """Execute ``job`` in its own run directory (what an executor calls)."""
    return execute_attempt(job, job.attempt_dir())


def job_outcome(job: AttemptJob) -> JobOutcome:
    """:func:`run_job`'s record with the pieces of its files the knowledge store's
    evidence holds (:mod:`ksi.attempt.evidence`), for an executor that carries them."""
    return _execute(job, job.attempt_dir())


def execute_attempt(job: AttemptJob, attempt_dir: Path) -> AttemptRecord:
    """Run one attempt into ``attempt_dir``; return its record (also in ``record.json``).

    A cancelled attempt (Ctrl-C on the driver) writes no ``record.json``: it
    is not a result, and a resume runs it again.
    """
    record = _execute(job, attempt_dir).record
    assert record is not None
    return record


def _execute(job: AttemptJob, attempt_dir: Path) -> JobOutcome:
    components = components_for(job)
    token = open_token(job.session_id)
    try:
        attempt = _Attempt(job, Path(attempt_dir), components, token)
        record = attempt.run()
    finally:
        close_token(job.session_id, token)
    if record.error_kind == ErrorKind.DISK_FULL:
        wipe_after_disk_full(Path(attempt_dir))  # the filler goes; the logs stay
    if not token.cancelled:
        # A copy of the journal line: a full disk costs the copy, never the attempt
        # (the driver hears of the full disk from the journal or the next attempt).
        save_unless_disk_full(
            Path(attempt_dir) / "record.json",
            to_data(record),
            durable=False,
            indent=None,
            parents=False,
        )
    return JobOutcome(job, record=record, evidence=attempt.evidence(record))


class _Attempt:
    """The steps of one attempt; an object only to keep their shared values in one place."""

    def __init__(
        self, job: AttemptJob, attempt_dir: Path, components: Components, token: CancelToken
    ) -> None:
        self.job = job
        self.dir = attempt_dir
        self.components = components
        self.token = token
        self.clock = AttemptClock()
        self.agent = AgentRunner(job, components.agent, token, self.clock)
        self.grader = Grader(job, attempt_dir, components, token, self.clock)
        #: The start of ``diff.patch`` as written (for the evidence: see :meth:`evidence`).
        self.diff_head = b""
        #: Whether the captured repo differs from the seed (None: capture never ran, or
        #: the evaluator grades the environment, not repo/).
        self.repo_changed: bool | None = None
        self.base: dict[str, Any] = {
            "task_id": job.task.id,
            "attempt": job.attempt,
            "try_number": job.try_number,
            "agent": component_name(components.agent),
            "evaluator": component_name(components.evaluator),
            "environment": component_name(components.environment),
            "model": job.settings.model,
            "attempt_dir": os.path.relpath(job.attempt_dir(), job.run_dir),
            "started_at": now(),
            "generation": job.generation,
            "knowledge": job.knowledge,
        }

    def run(self) -> AttemptRecord:
        job, cfg, attempt_dir = self.job, self.job.settings, self.dir
        components = self.components
        handle = None
        outcome = AgentOutcome()
        eval_result: EvalResult | None = None
        rounds: tuple[RoundResult, ...] = ()
        try:
            if attempt_dir.exists():  # left by a killed run (the driver kept finished ones aside)
                remove_tree(attempt_dir)
            workspace = attempt_dir / "workspace"
            repo = workspace / "repo"
            seed = self._seed_workspace(workspace)

            actx = AttemptContext(
                run_id=job.run_id,
                task=job.task,
                attempt=job.attempt,
                attempt_dir=attempt_dir,
                host_workspace=workspace,
                base_env=job.agent_env,
            )
            self.clock.step = f"starting environment {component_name(components.environment)!r}"
            handle = components.environment.start(actx)
            self.token.track(handle)
            ctx = self._agent_context(handle, workspace)
            outcome, result = self.agent.run(ctx, handle)
            if components.feedback is not None:
                outcome, result, rounds = self._feedback_rounds(
                    components.feedback, ctx, handle, seed, outcome, result
                )

            if components.grades_in == "environment":
                eval_result = self.grader.in_environment(repo, handle)

            # Nothing of the agent may run while its repo/ is read.
            self.clock.step = "capturing repo/"
            handle.halt()
            t = time.monotonic()
            captured = attempt_dir / "captured" / "repo"
            capture = capture_repo(
                repo,
                seed,
                captured,
                max_file_bytes=cfg.capture_max_file_bytes,
                protect=ProtectRule(cfg.protect).plus(job.task.eval.protect),
            )
            budget = cfg.evidence_budget_bytes
            diff = write_diff(
                seed,
                captured,
                attempt_dir / "diff.patch",
                keep_head=diff_bytes_needed(budget) if budget is not None else 0,
            )
            self.diff_head = diff.head
            changed = diff.files_changed > 0
            # Said only where repo/ is what gets graded: an evaluator that grades the
            # environment (a Harbor task's container) sees work repo/ never holds.
            self.repo_changed = changed if components.grades_in == "host" else None
            self.clock.add_time("capture", t)
            handle.stop()

            if eval_result is None:
                eval_result = self.grader.after_capture(repo, captured)
            if cfg.wipe_workspace:  # gone from the attempt now, deleted in the background
                discard_tree(workspace, job.trash_dir())
            return self._record(outcome, result, eval_result, capture, rounds)
        except Exception as exc:
            full = is_disk_full(exc)
            error = f"{type(exc).__name__}: {exc} (while {self.clock.step})"
            return error_record(
                disk_full_message(exc) if full else error,
                kind=ErrorKind.DISK_FULL if full else ErrorKind.NONE,
                **self.base,
                agent_status=outcome.status,
                timings=self.clock.timings(),
            )
        finally:
            if handle is not None:
                with contextlib.suppress(Exception):
                    handle.stop()
                self.token.untrack(handle)

    def evidence(self, record: AttemptRecord) -> DiffEvidence | None:
        """The pieces of its ``diff.patch`` a scored attempt's evidence holds, from the
        bytes it wrote (None: the run stores no evidence, or this attempt gives none)."""
        budget = self.job.settings.evidence_budget_bytes
        if budget is None or record.status != AttemptStatus.SCORED or record.score is None:
            return None
        return diff_evidence(self.diff_head, budget)

    def _seed_workspace(self, workspace: Path) -> Path:
        """``workspace/repo`` from the task's pristine seed (returned), and the context
        files (``KNOWLEDGE.md``...) beside it."""
        job, t = self.job, time.monotonic()
        seed = seed_dir(job.task, job.seed_dir())
        # Top down, one mkdir each: the task's directory may exist (an earlier attempt), the
        # attempt's was removed if it did (with parents=True, each missing level costs a
        # failed mkdir first).
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        self.dir.mkdir()
        workspace.mkdir()
        copy_tree(seed, workspace / "repo")
        for item in job.context_files:
            path = workspace / item.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(item.content, encoding="utf-8")
        tools = job.knowledge_tools
        if tools is not None and Path(tools.store).is_file():
            # start-up: the knowledge tools (their store, 15 ms) only for attempts that use them
            from ksi.knowledge.tools import WORKSPACE_COPY, visible_copy

            visible_copy(
                Path(tools.store),
                workspace / WORKSPACE_COPY,
                run_id=job.run_id,
                generation=job.generation + (1 if tools.sees_own_generation else 0),
                exclude_tasks=tools.exclude_tasks,
            )
        self.clock.add_time("seed", t)
        return seed

    def _agent_context(self, handle: EnvironmentHandle, workspace: Path) -> AgentContext:
        """What the agent is told, once the environment says where the workspace is (a
        context file's pointer names the file as the agent sees it); ``prompt.md``."""
        job = self.job
        ws_path = str(handle.workspace_path)
        prompt = attempt_prompt(job, ws_path)
        (self.dir / "prompt.md").write_text(prompt, encoding="utf-8")
        # Tasks that work in the image's own directory (Harbor's /app) say so.
        workdir = job.task.runtime.workdir
        return AgentContext(
            task=job.task,
            prompt=prompt,
            attempt=job.attempt,
            attempt_dir=self.dir,
            workspace_path=ws_path,
            repo_path=workdir if isinstance(workdir, str) else ws_path.rstrip("/") + "/repo",
            host_workspace=workspace,
            model=job.settings.model,
            isolated=agent_is_isolated(self.components.environment),
            mcp_servers=self._mcp_servers(workspace, ws_path),
        )

    def _mcp_servers(self, workspace: Path, ws_path: str) -> tuple[McpServer, ...]:
        """The knowledge tools' server over the attempt's copy of the store, run by this
        Python (the driver checked that the environment runs host programs); none when
        the store is not where the job runs (so there is no copy). A forum session's
        server serves the forum's tools too, where the environment runs this Python and
        the ``mcp`` extra is here (elsewhere the agent posts files, as every agent can);
        the round's live directory only where the agent's processes see the host's files."""
        job, environment = self.job, self.components.environment
        forum = job.forum_tools
        if job.knowledge_tools is None and forum is None:
            return ()
        # start-up: the knowledge tools (their store, 15 ms) only for attempts that use them
        from ksi.knowledge.tools import WORKSPACE_COPY, mcp_installed, server_for

        knowledge = job.knowledge_tools is not None and (workspace / WORKSPACE_COPY).is_file()
        # A class attribute of the environments that run host programs (as setup reads it).
        host_programs = bool(getattr(environment, "runs_host_programs", False))
        if forum is not None and not (host_programs and mcp_installed()):
            forum = None
        if not knowledge and forum is None:
            return ()
        live = None
        if forum is not None and forum.live_dir and not agent_is_isolated(environment):
            live = forum.live_dir
        return (
            server_for(
                sys.executable,
                ws_path,
                job.task.id,
                knowledge=knowledge,
                forum_participant=forum.participant if forum is not None else None,
                forum_live=live,
            ),
        )

    def _feedback_rounds(
        self,
        feedback: GivesFeedback,
        ctx: AgentContext,
        handle: EnvironmentHandle,
        seed: Path,
        outcome: AgentOutcome,
        result: ExecResult | None,
    ) -> tuple[AgentOutcome, ExecResult | None, tuple[RoundResult, ...]]:
        """Rounds 2..n (see :class:`ksi.interfaces.GivesFeedback`): grade the work so far,
        and while it falls short, run the agent again on the evaluator's feedback."""
        task = self.job.task
        earlier: list[RoundResult] = []
        usages = [outcome.usage]
        for number in range(2, feedback.rounds + 1):
            if outcome.status in AGENT_INFRA_STATUSES:
                break
            graded = self.grader.between_rounds(handle, seed, number - 1)
            if graded.native_score is None or graded.native_score >= 1.0:
                break  # the final grade, after capture, says the same
            text = feedback.feedback(task, graded)
            if not text:
                break
            earlier.append(
                RoundResult(number - 1, graded.native_score, graded.status, outcome.status)
            )
            round_dir = self.dir / "rounds" / str(number)
            round_dir.mkdir(parents=True, exist_ok=True)
            prompt = agent_prompt(attrs.evolve(task, prompt=text))
            (round_dir / "prompt.md").write_text(prompt, encoding="utf-8")
            ctx = attrs.evolve(ctx, prompt=prompt, attempt_dir=round_dir)
            outcome, result = self.agent.run(ctx, handle)
            usages.append(outcome.usage)
        return attrs.evolve(outcome, usage=total_usage(usages)), result, tuple(earlier)

    def _record(
        self,
        outcome: AgentOutcome,
        result: ExecResult | None,
        eval_result: EvalResult | None,
        capture: CaptureReport | None,
        rounds: tuple[RoundResult, ...] = (),
    ) -> AttemptRecord:
        if outcome.status in AGENT_INFRA_STATUSES:
            status, score = AttemptStatus.AGENT_ERROR, None
            retryable = outcome.status in RETRYABLE_AGENT_STATUSES
        elif eval_result is None or eval_result.native_score is None:
            status, score = AttemptStatus.UNSCORED, None
            retryable = eval_result is None or eval_result.status not in FINAL_EVAL_STATUSES
        else:
            status, score, retryable = AttemptStatus.SCORED, eval_result.native_score, False
        return AttemptRecord(
            **self.base,
            status=status,
            score=score,
            agent_status=outcome.status,
            agent_exit_code=result.exit_code if result else None,
            agent_timed_out=bool(result and result.timed_out),
            eval=eval_result,
            timings=self.clock.timings(),
            usage=outcome.usage,
            final_message=outcome.final_message,
            skipped_files=capture.skipped if capture else (),
            skipped_counts=capture.skipped_counts if capture else {},
            repo_changed=self.repo_changed,
            log_truncated=bool(result and result.output_truncated),
            error=outcome.error,
            finished_at=now(),
            retryable=retryable,
            rounds=rounds,
        )
