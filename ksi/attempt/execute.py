"""Executing one attempt job: the lifecycle in docs/running.md, with no shared state.

:func:`execute_attempt` seeds ``workspace/repo`` from the task's pristine
seed, starts the environment, lets the agent work, grades (inside the
environment for evaluators that ask for it; otherwise on the host, on a copy
of the captured repo), writes the attempt's files and returns its record. Any
failure of KSI or of the environment becomes an ``error`` record, never an
exception. It never touches the journal: the driver does that.

It runs in a thread of the driver's process, in another process, or on
another machine: components are resolved from the job's specs once per
process and session (the driver's own, already prepared instances when it
runs in the driver's process), and the environment handles it starts are
registered with :mod:`ksi.attempt.cancel` so the driver can stop them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from ksi.attempt.cancel import Cancelled, CancelToken, close_token, open_token
from ksi.attempt.capture import CaptureReport, capture_repo, copy_tree, remove_tree
from ksi.attempt.components import Components, component_name, resolve_components
from ksi.attempt.diff import write_diff
from ksi.attempt.diskfull import (
    DISK_FULL,
    is_disk_full,
    mark_disk_full,
    save_unless_disk_full,
    wipe_after_disk_full,
)
from ksi.attempt.job import AttemptJob
from ksi.attempt.safety import agent_is_isolated
from ksi.interfaces import (
    AgentContext,
    AgentOutcome,
    AttemptContext,
    EnvironmentHandle,
    ExecResult,
    GivesFeedback,
)
from ksi.models import EvalResult, TaskSpec, total_usage
from ksi.protected_files import ProtectRule
from ksi.records import AttemptRecord, RoundResult, Timings, now
from ksi.serialization import to_data

#: Agent statuses meaning the agent never really worked on the task.
AGENT_INFRA_STATUSES = frozenset(
    {"auth_error", "rate_limited", "overloaded", "budget_exceeded", "error"}
)
#: Agent statuses worth another try after a pause (the driver backs off on them).
RETRYABLE_AGENT_STATUSES = frozenset({"rate_limited", "overloaded"})
#: Eval statuses that are deterministic: retrying cannot change them.
FINAL_EVAL_STATUSES = frozenset({"no_eval"})
DEFAULT_AGENT_TIMEOUT_SEC = 1800.0


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
            tmp.mkdir(parents=True)
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


def execute_attempt(job: AttemptJob, attempt_dir: Path) -> AttemptRecord:
    """Run one attempt into ``attempt_dir``; return its record (also in ``record.json``).

    A cancelled attempt (Ctrl-C on the driver) writes no ``record.json``: it
    is not a result, and a resume runs it again.
    """
    parts = components_for(job)
    token = open_token(job.session_id)
    try:
        record = _Attempt(job, Path(attempt_dir), parts, token).run()
    finally:
        close_token(job.session_id, token)
    if record.error_kind == DISK_FULL:
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
    return record


def _agent_timeout(job: AttemptJob) -> float:
    if job.settings.timeout_sec is not None:
        return job.settings.timeout_sec
    value = job.task.runtime.agent_timeout_sec
    return value if value is not None else DEFAULT_AGENT_TIMEOUT_SEC


def _prompt(job: AttemptJob, workspace_path: str) -> str:
    """The task's prompt, plus one line per context file that asks to be pointed at."""
    from ksi.tasks.prompts import agent_prompt

    prompt = agent_prompt(job.task)
    pointers = [
        item.prompt_pointer.replace("{path}", f"{workspace_path.rstrip('/')}/{item.path}")
        for item in job.context_files
        if item.prompt_pointer
    ]
    return "\n\n".join([prompt, *pointers]) if pointers else prompt


class _Attempt:
    """The steps of one attempt; an object only to keep their shared values in one place."""

    def __init__(
        self, job: AttemptJob, attempt_dir: Path, parts: Components, token: CancelToken
    ) -> None:
        self.job = job
        self.dir = attempt_dir
        self.parts = parts
        self.token = token
        self.times: dict[str, float] = {}
        #: Whether the captured repo differs from the seed (None: capture never ran).
        self.repo_changed: bool | None = None
        #: The step running now, named in an error record ("while grading...").
        self.step = "seeding the workspace"
        self.started = time.monotonic()
        self.base: dict[str, Any] = {
            "task_id": job.task.id,
            "attempt": job.attempt,
            "try_number": job.try_number,
            "agent": component_name(parts.agent),
            "evaluator": component_name(parts.evaluator),
            "environment": component_name(parts.environment),
            "model": job.settings.model,
            "attempt_dir": os.path.relpath(job.attempt_dir(), job.run_dir),
            "started_at": now(),
            "generation": job.generation,
            "knowledge": job.knowledge,
        }

    def run(self) -> AttemptRecord:
        job, cfg, attempt_dir = self.job, self.job.settings, self.dir
        parts = self.parts
        handle = None
        result: ExecResult | None = None
        outcome = AgentOutcome()
        eval_result: EvalResult | None = None
        capture: CaptureReport | None = None
        rounds: tuple[RoundResult, ...] = ()
        try:
            if attempt_dir.exists():  # left by a killed run (the driver kept finished ones aside)
                remove_tree(attempt_dir)
            workspace = attempt_dir / "workspace"
            repo = workspace / "repo"
            t = time.monotonic()
            seed = seed_dir(job.task, job.seed_dir())
            workspace.mkdir(parents=True)
            copy_tree(seed, repo)
            for item in job.context_files:
                path = workspace / item.path
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(item.content, encoding="utf-8")
            self.times["seed"] = time.monotonic() - t

            actx = AttemptContext(
                run_id=job.run_id,
                task=job.task,
                attempt=job.attempt,
                attempt_dir=attempt_dir,
                host_workspace=workspace,
                base_env=job.agent_env,
            )
            self.step = f"starting environment {component_name(parts.environment)!r}"
            handle = parts.environment.start(actx)
            self.token.track(handle)
            ws_path = str(handle.workspace_path)
            # Written once the environment says where the workspace is: a context
            # file's pointer names the file as the agent sees it.
            prompt = _prompt(job, ws_path)
            (attempt_dir / "prompt.md").write_text(prompt, encoding="utf-8")
            # Tasks that work in the image's own directory (Harbor's /app) say so.
            workdir = job.task.runtime.workdir
            ctx = AgentContext(
                task=job.task,
                prompt=prompt,
                attempt=job.attempt,
                attempt_dir=attempt_dir,
                workspace_path=ws_path,
                repo_path=workdir if isinstance(workdir, str) else ws_path.rstrip("/") + "/repo",
                host_workspace=workspace,
                model=cfg.model,
                isolated=agent_is_isolated(parts.environment),
            )
            outcome, result = self._run_agent(ctx, handle)
            if parts.feedback is not None:
                outcome, result, rounds = self._feedback_rounds(
                    parts.feedback, ctx, handle, seed, outcome, result
                )

            if parts.grades_in == "environment":
                t = time.monotonic()
                self.step = f"grading with evaluator {component_name(parts.evaluator)!r}"
                eval_result = parts.evaluator.grade(
                    job.task, repo, env=handle, log_dir=attempt_dir / "eval"
                )
                self._add_time("eval", t)

            # Nothing of the agent may run while its repo/ is read.
            self.step = "capturing repo/"
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
            self.repo_changed = (
                write_diff(seed, captured, attempt_dir / "diff.patch").files_changed > 0
            )
            self.times["capture"] = time.monotonic() - t
            handle.stop()

            if eval_result is None:
                t = time.monotonic()
                self.step = f"grading with evaluator {component_name(parts.evaluator)!r}"
                eval_result = self._grade_after_capture(repo, captured)
                self._add_time("eval", t)
            if cfg.wipe_workspace:
                remove_tree(workspace)
            return self._record(outcome, result, eval_result, capture, rounds)
        except Exception as exc:
            record = AttemptRecord(
                **self.base,
                status="error",
                score=None,
                agent_status=outcome.status,
                error=f"{type(exc).__name__}: {exc} (while {self.step})",
                timings=Timings(**self.times, total=time.monotonic() - self.started),
                finished_at=now(),
                retryable=True,
            )
            return mark_disk_full(record, exc) if is_disk_full(exc) else record
        finally:
            if handle is not None:
                with contextlib.suppress(Exception):
                    handle.stop()
                self.token.untrack(handle)

    def _add_time(self, phase: str, started: float) -> None:
        self.times[phase] = self.times.get(phase, 0.0) + time.monotonic() - started

    def _run_agent(
        self, ctx: AgentContext, handle: EnvironmentHandle
    ) -> tuple[AgentOutcome, ExecResult | None]:
        """One agent process on ``ctx.prompt``; its logs go to ``ctx.attempt_dir``."""
        agent, t = self.parts.agent, time.monotonic()
        self.step = f"running agent {component_name(agent)!r}"
        agent.setup(ctx)
        invocation = agent.invocation(ctx)
        # Tasks that work in the image's own directory (Harbor's /app) say so.
        workdir = self.job.task.runtime.workdir
        if invocation is not None and isinstance(workdir, str) and invocation.cwd == ".":
            invocation = attrs.evolve(invocation, cwd=workdir)
        result: ExecResult | None = None
        if invocation is not None:
            result = handle.exec(
                invocation,
                timeout=_agent_timeout(self.job),
                stdout_path=ctx.attempt_dir / "agent.stdout.log",
                stderr_path=ctx.attempt_dir / "agent.stderr.log",
                log_cap_bytes=self.job.settings.log_cap_bytes,
            )
        outcome = agent.outcome(ctx, result)
        self._add_time("agent", t)
        if self.token.cancelled:
            raise Cancelled("the agent was killed by the run's teardown")
        return outcome, result

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
        from ksi.tasks.prompts import agent_prompt

        task = self.job.task
        earlier: list[RoundResult] = []
        usages = [outcome.usage]
        for number in range(2, feedback.rounds + 1):
            if outcome.status in AGENT_INFRA_STATUSES:
                break
            graded = self._grade_round(handle, seed, number - 1)
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
            outcome, result = self._run_agent(ctx, handle)
            usages.append(outcome.usage)
        return attrs.evolve(outcome, usage=total_usage(usages)), result, tuple(earlier)

    def _grade_round(self, handle: EnvironmentHandle, seed: Path, number: int) -> EvalResult:
        """Grade the live ``repo/`` between rounds: captured under the capture rules into
        ``rounds/<n>/captured/repo``, then graded as the attempt's final grade would be
        (a host copy, or through the live environment when grading happens there)."""
        job, cfg, t = self.job, self.job.settings, time.monotonic()
        self.step = (
            f"grading round {number} with evaluator {component_name(self.parts.evaluator)!r}"
        )
        repo = Path(handle.host_workspace) / "repo"
        round_dir = self.dir / "rounds" / str(number)
        log_dir = round_dir / "eval"
        captured = round_dir / "captured" / "repo"
        try:
            capture_repo(
                repo,
                seed,
                captured,
                max_file_bytes=cfg.capture_max_file_bytes,
                protect=ProtectRule(cfg.protect).plus(job.task.eval.protect),
            )
            if self.parts.grades_in == "environment":
                return self.parts.evaluator.grade(job.task, repo, env=handle, log_dir=log_dir)
            env = handle if cfg.eval_in == "environment" else None
            # Inside the environment's workspace when the environment runs the grade.
            work = (repo.parent / f".ksi-round-{number}" if env else log_dir) / "repo"
            remove_tree(work)
            work.parent.mkdir(parents=True, exist_ok=True)
            copy_tree(captured, work)
            try:
                return self.parts.evaluator.grade(job.task, work, env=env, log_dir=log_dir)
            finally:
                remove_tree(work.parent if env else work)
        finally:
            self._add_time("eval", t)

    def _grade_after_capture(self, live_repo: Path, captured: Path) -> EvalResult:
        """Grade once the agent's environment is gone: a fresh copy of the captured repo on
        the host (or in a fresh environment with ``--eval-in environment``), or the live
        repo when the workspace is kept."""
        job, evaluator = self.job, self.parts.evaluator
        log_dir = self.dir / "eval"
        if job.settings.eval_in == "environment":
            return self._grade_in_fresh_environment(captured)
        if not job.settings.wipe_workspace:
            return evaluator.grade(job.task, live_repo, log_dir=log_dir)
        workdir = self.dir / "eval" / "repo"
        remove_tree(workdir)
        workdir.parent.mkdir(parents=True, exist_ok=True)
        copy_tree(captured, workdir)
        try:
            result = evaluator.grade(job.task, workdir, log_dir=log_dir)
        finally:
            remove_tree(workdir)
        return _graded_copy_removed(result, str(workdir), str(captured))

    def _grade_in_fresh_environment(self, captured: Path) -> EvalResult:
        """``--eval-in environment``: grade a copy of the captured repo in a new environment.

        For tasks whose tests need the image's toolchain. The agent's own
        environment is already gone, so nothing it left running can touch
        the grading; the evaluator runs its command through the new handle.
        """
        job = self.job
        workspace = self.dir / "eval" / "workspace"
        remove_tree(workspace)
        workspace.mkdir(parents=True)
        copy_tree(captured, workspace / "repo")
        ctx = AttemptContext(
            run_id=job.run_id,
            task=job.task,
            # The attempt's own number: its agent container is gone by now, and
            # concurrent attempts of one task must not share a grading container.
            attempt=job.attempt,
            attempt_dir=self.dir / "eval",
            host_workspace=workspace,
            base_env=job.eval_env,
        )
        handle = self.parts.environment.start(ctx)
        try:
            self.token.track(handle)
            return self.parts.evaluator.grade(
                job.task, workspace / "repo", env=handle, log_dir=self.dir / "eval"
            )
        finally:
            handle.stop()
            self.token.untrack(handle)
            remove_tree(workspace)

    def _record(
        self,
        outcome: AgentOutcome,
        result: ExecResult | None,
        eval_result: EvalResult | None,
        capture: CaptureReport | None,
        rounds: tuple[RoundResult, ...] = (),
    ) -> AttemptRecord:
        if outcome.status in AGENT_INFRA_STATUSES:
            status, score = "agent_error", None
            retryable = outcome.status in RETRYABLE_AGENT_STATUSES
        elif eval_result is None or eval_result.native_score is None:
            status, score = "unscored", None
            retryable = eval_result is None or eval_result.status not in FINAL_EVAL_STATUSES
        else:
            status, score, retryable = "scored", eval_result.native_score, False
        return AttemptRecord(
            **self.base,
            status=status,
            score=score,
            agent_status=outcome.status,
            agent_exit_code=result.exit_code if result else None,
            agent_timed_out=bool(result and result.timed_out),
            eval=eval_result,
            timings=Timings(**self.times, total=time.monotonic() - self.started),
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


def _graded_copy_removed(result: EvalResult, workdir: str, captured: str) -> EvalResult:
    """``result`` saying that its ``eval_workdir`` is gone, and where the graded files are.

    The copy graded on the host is removed once graded; ``captured/repo``
    holds the files it was made from. Said the way ``ksi grade`` and
    ``CommandEvaluator.evaluate`` say it: ``details["eval_workdir_removed"]``.
    """
    if result.eval_workdir != workdir:
        return result
    note = f"{workdir} (a copy of {captured}) was removed after grading"
    details = {**result.details, "eval_workdir_removed": True}
    return attrs.evolve(result, notes=(*result.notes, note), details=details)
