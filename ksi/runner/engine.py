"""Running every attempt of a run: the lifecycle in DESIGN.md, made durable.

Per attempt: seed ``workspace/repo`` from the task's pristine seed, start the
environment, let the agent work, grade (inside the environment for
evaluators that ask for it; otherwise on the host, on a copy of the captured
repo), journal one record, wipe. Any failure of KSI or of the environment
becomes an ``error`` record for that attempt, never the end of the run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import random
import shutil
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi._version import __version__
from ksi.environments.envscrub import agent_optional_env, missing_required, scrubbed_env
from ksi.errors import KsiError, KsiWarning, RunError, UserInputError
from ksi.interfaces import AgentContext, AgentOutcome, AttemptContext, ExecResult
from ksi.models import EvalResult, TaskSpec
from ksi.plugins import get_plugins
from ksi.runner.capture import CaptureReport, capture_repo, copy_tree, remove_tree
from ksi.runner.components import component_name, grades_on_host, resolve
from ksi.runner.config import RunConfig, resume_mismatches, task_set_fingerprint
from ksi.runner.diff import write_diff
from ksi.runner.diskfull import (
    DISK_FULL,
    DiskFullError,
    DiskFullWatch,
    disk_full_as_error,
    is_disk_full,
    mark_disk_full,
    raise_if_capture_hit_full_disk,
    reruns_on_resume,
    save_unless_disk_full,
    wipe_after_disk_full,
)
from ksi.runner.journal import (
    Journal,
    journal_warnings,
    latest_by_attempt,
    read_journal,
    read_records,
    spending_records,
)
from ksi.runner.layout import RunLayout, clear_attempt_dir
from ksi.runner.models import AttemptRecord, RunInfo, RunSummary, Timings
from ksi.runner.progress import NullProgress, Progress
from ksi.runner.safety import configure_host_grading, credential_warning, decide_eval_isolation
from ksi.runner.summary import summarize
from ksi.serialization import to_data, write_json_atomic

#: Agent statuses meaning the agent never really worked on the task.
AGENT_INFRA_STATUSES = frozenset(
    {"auth_error", "rate_limited", "overloaded", "budget_exceeded", "error"}
)
RETRYABLE_AGENT_STATUSES = frozenset({"rate_limited", "overloaded"})
#: Eval statuses that are deterministic: retrying cannot change them.
FINAL_EVAL_STATUSES = frozenset({"no_eval"})
DEFAULT_AGENT_TIMEOUT_SEC = 1800.0
BACKOFF_BASE_SEC = 2.0
BACKOFF_MAX_SEC = 120.0


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


@attrs.frozen
class PlannedAttempt:
    task: TaskSpec
    attempt: int
    try_number: int = 0


class RunInterrupted(KsiError):
    """The user stopped the run; the journal holds every finished attempt."""

    exit_code = 130


class _Abandoned(Exception):
    """The runner is killing its attempts: what this one produced is not a result."""


class Runner:
    """One invocation of ``ksi run`` (a new run, or a resume of an existing one)."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        *,
        tasks: Sequence[TaskSpec] | None = None,
        agent: Any = None,
        evaluator: Any = None,
        environment: Any = None,
        progress: Progress | None = None,
    ) -> None:
        self.config = config
        self.layout = RunLayout(Path(run_dir).resolve())
        self._given_tasks = tasks
        self._agent_spec = agent if agent is not None else config.agent
        self._evaluator_spec = evaluator
        self._environment_spec = environment if environment is not None else config.environment
        self.progress = progress or NullProgress()
        self._stop = threading.Event()
        self._stop_reason = ""
        self._interrupted = False
        #: Set (before any kill) when the run is being torn down: attempts
        #: killed by the runner are not results, so they are never journalled.
        self._abandon = False
        #: Attempts (with their retries) running now; a teardown waits for them.
        self._inflight = 0
        self._inflight_cond = threading.Condition()
        self._spent_usd = 0.0
        self._spend_lock = threading.Lock()
        self._seed_locks: dict[str, threading.Lock] = {}
        self._seed_locks_guard = threading.Lock()
        self._active: dict[int, Any] = {}
        self._active_lock = threading.Lock()
        self.observer_errors: list[str] = []
        #: A full disk seen by any attempt: the run stops launching and ends with its error.
        self._disk = DiskFullWatch(self.layout.root)
        #: What this session did that the user must hear (an attempt directory kept aside...).
        self._warnings: list[str] = []

    # -- setup ----------------------------------------------------------------
    def _load_tasks(self) -> tuple[list[TaskSpec], Any]:
        from ksi.tasks.loaders import get_task_source

        source = None
        if self._given_tasks is not None:
            tasks = list(self._given_tasks)
        else:
            if not self.config.tasks_path:
                raise UserInputError("no tasks: give a tasks path (ksi run TASKS_PATH ...)")
            source = get_task_source(self.config.task_source)
            tasks = source.load(Path(self.config.tasks_path))
        ids = [t.id for t in tasks]
        dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) != len(ids) else []
        if dupes:
            raise UserInputError(f"duplicate task ids: {', '.join(dupes)}")
        if self.config.task_ids:
            known = set(ids)
            unknown = [i for i in self.config.task_ids if i not in known]
            if unknown:
                raise UserInputError(
                    f"--task-ids: unknown task id(s) {', '.join(map(repr, unknown))}; "
                    "`ksi tasks list` shows the ids"
                )
            wanted = set(self.config.task_ids)
            tasks = [t for t in tasks if t.id in wanted]
        if self.config.max_tasks is not None:
            tasks = tasks[: self.config.max_tasks]
        if not tasks:
            raise UserInputError("no tasks to run after applying --task-ids/--max-tasks")
        return tasks, source

    def _resolve_components(self, source: Any) -> None:
        cfg = self.config
        self.agent, self.agent_plugin = resolve("agent", self._agent_spec, cfg.agent_options)
        self.environment, self.environment_plugin = resolve(
            "environment", self._environment_spec, cfg.environment_options
        )
        evaluator_spec = self._evaluator_spec or cfg.evaluator
        if evaluator_spec is None:
            evaluator_spec = getattr(source, "default_evaluator", None) or "command"
        self.evaluator, self.evaluator_plugin = resolve(
            "evaluator", evaluator_spec, cfg.evaluator_options
        )
        self.executor, _ = resolve("executor", cfg.executor)
        self.grades_in = "host" if grades_on_host(self.evaluator) else "environment"
        isolation = decide_eval_isolation(cfg.eval_isolation, self.environment, eval_in=cfg.eval_in)
        self.evaluator = configure_host_grading(
            self.evaluator, isolation=isolation, pass_env=cfg.eval_env
        )

    def _preflight(self, tasks: list[TaskSpec]) -> None:
        problems: list[str] = []
        check = getattr(self.agent, "check_tasks", None)
        if callable(check):
            problems.extend(check(tasks))
        problems.extend(
            missing_required(
                component_name(self.agent),
                getattr(self.agent, "required_env", ()),
                passthrough=self.config.agent_env,
            )
        )
        # "One of these keys, or a login file" rules live with the agent.
        missing = getattr(self.agent, "missing_credentials", None)
        if callable(missing):
            problems.extend(missing(os.environ))
        if problems:
            raise UserInputError("\n".join(problems))
        exposed = credential_warning(
            self.environment,
            self.agent,
            model=self.config.model,
            agent_env=self.config.agent_env,
            host_env=os.environ,
        )
        if exposed:
            warnings.warn(exposed, KsiWarning, stacklevel=2)

    def _open_run_dir(self, tasks: list[TaskSpec]) -> tuple[dict[str, Any], bool]:
        layout = self.layout
        fingerprints = task_set_fingerprint(tasks)
        resumed = layout.run_json.exists()
        if not resumed:
            layout.check_new_run_dir()
        if resumed:
            stored = layout.read_run_json()
            problems = resume_mismatches(stored, self.config, fingerprints)
            if problems:
                raise RunError(
                    f"{layout.root} holds a different run; refusing to resume it:\n"
                    + "\n".join(f"  {p}" for p in problems)
                    + "\nUse a new --run-dir, or the original options."
                )
            stored.setdefault("sessions", []).append({"started_at": _now(), "finished_at": None})
            # Until this session ends, the run is going again (a kill -9 leaves it so).
            stored["run_complete"] = False
            stored["stopped_reason"] = ""
            # Key options matched; the rest (concurrency, retries, report path...)
            # may change between sessions and the newest values are recorded.
            stored["config"].update(attrs.asdict(self.config))
        else:
            stored = {
                "run_id": uuid.uuid4().hex[:12],
                "config": attrs.asdict(self.config),
                "tasks": fingerprints,
                "task_ids": [t.id for t in tasks],
                "sessions": [{"started_at": _now(), "finished_at": None}],
                "run_complete": False,
            }
        stored["versions"] = self._versions()
        with disk_full_as_error(layout.root, "writing run.json"):
            write_json_atomic(layout.run_json, stored)
        return stored, resumed

    def _versions(self) -> dict[str, Any]:
        state = get_plugins()
        used = {self.agent_plugin, self.environment_plugin, self.evaluator_plugin}
        plugins = {}
        for name in sorted(used):
            info = state.infos.get(name)
            if info is not None:
                plugins[name] = {"distribution": info.distribution, "version": info.version}
            else:
                plugins[name] = {"distribution": name, "version": ""}
        return {"ksi": __version__, "python": platform.python_version(), "plugins": plugins}

    # -- planning -------------------------------------------------------------
    def _is_retryable(self, rec: AttemptRecord) -> bool:
        return rec.retryable and rec.try_number < self.config.retries

    def _plan(self, tasks: list[TaskSpec], records: list[AttemptRecord]) -> list[PlannedAttempt]:
        latest = latest_by_attempt(records)
        plan = []
        for task in tasks:
            for n in range(1, self.config.attempts + 1):
                rec = latest.get((task.id, n))
                if rec is None:
                    plan.append(PlannedAttempt(task, n, 0))
                elif self._is_retryable(rec) or reruns_on_resume(rec):
                    plan.append(PlannedAttempt(task, n, rec.try_number + 1))
        return plan

    # -- the run --------------------------------------------------------------
    def run(self) -> RunSummary:
        problems = self.config.problems()
        if problems:
            raise UserInputError("run configuration:\n" + "\n".join(f"  {p}" for p in problems))
        tasks, source = self._load_tasks()
        # Before anything is created: ids this run directory cannot hold apart, seeds
        # that would copy the run into itself.
        self.layout.check_tasks(tasks, self.config.tasks_path or "tasks")
        self._resolve_components(source)
        self._preflight(tasks)
        # Images are checked or built before the run directory exists: a run that
        # cannot start leaves nothing behind.
        self.environment.prepare(tasks)
        # Released when this call ends, even when an exception (Ctrl-C) outlives it.
        with self.layout.lock_exclusive():
            return self._run_locked(tasks)

    def _run_locked(self, tasks: list[TaskSpec]) -> RunSummary:
        stored, resumed = self._open_run_dir(tasks)
        self.run_id: str = stored["run_id"]
        self.journal = Journal(self.layout.journal)
        records = list(self.journal.contents.records)
        self._spent_usd = sum(
            float(r.usage.get("cost_usd") or 0.0) for r in spending_records(records)
        )
        plan = self._plan(tasks, records)
        self.info = RunInfo(
            run_id=self.run_id,
            run_dir=self.layout.root,
            config=stored["config"],
            task_ids=tuple(t.id for t in tasks),
            attempts_per_task=self.config.attempts,
        )
        total = len(tasks) * self.config.attempts
        try:
            if resumed:
                self.environment.cleanup(self.run_id)
            self._observe("ksi_run_started", run=self.info)
            self.progress.start(total, total - len(plan))
            if self._over_budget():
                plan = []  # resumed at or past --max-cost: launch nothing
            self._execute(plan)
        except KeyboardInterrupt:
            self._interrupted = True
            self._stop_reason = "interrupted"
        except DiskFullError:
            pass  # the journal could not be written (noted by _record): the error comes below
        finally:
            self.progress.close()
            self.journal.close()
            with contextlib.suppress(Exception):
                self.environment.cleanup(self.run_id)
        summary = self._finish(stored, tasks)
        if self._disk.happened:
            raise self._disk.error(f"ksi run --resume --run-dir {self.layout.root}")
        if self._interrupted:
            raise RunInterrupted(
                f"run interrupted; {summary.n_attempts}/{total} attempts are in the journal. "
                f"Resume with the same command (or: ksi run --resume --run-dir {self.layout.root})"
            )
        return summary

    def _finish(self, stored: dict[str, Any], tasks: list[TaskSpec]) -> RunSummary:
        # Complete when a resume would have nothing to do (a budget reached by
        # the last attempt stopped nothing).
        remaining = self._plan(tasks, read_records(self.layout.journal))
        complete = not self._interrupted and not remaining
        stored["sessions"][-1]["finished_at"] = _now()
        stored["run_complete"] = complete
        stored["stopped_reason"] = "" if complete else self._stop_reason
        if not save_unless_disk_full(self.layout.run_json, stored):
            self._note_full_disk()
        summary = summarize_run(self.layout.root)
        summary = attrs.evolve(summary, warnings=(*summary.warnings, *self._warnings))
        self._observe("ksi_run_finished", run=self.info, summary=summary)
        return summary

    def _execute(self, plan: list[PlannedAttempt]) -> None:
        def items() -> Iterator[PlannedAttempt]:
            for item in plan:
                if self._stop.is_set():
                    return
                yield item

        try:
            for _ in self.executor.map_unordered(
                self._run_with_retries, items(), self.config.concurrency
            ):
                pass
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                self._interrupted = True
            with self._active_lock:
                self._abandon = True  # before the kill: killed attempts are not journalled
            self._stop.set()
            with contextlib.suppress(Exception):
                self.executor.shutdown()
            self._kill_active()
            # No attempt may outlive the run: one still starting would launch its agent
            # after the kill, and one finishing would write to a closed journal.
            with self._inflight_cond:
                self._inflight_cond.wait_for(lambda: self._inflight == 0)
            raise

    def _kill_active(self) -> None:
        """Stop every running attempt at once (each stop may wait out a grace period)."""
        with self._active_lock:
            handles = list(self._active.values())

        def stop(handle: Any) -> None:
            with contextlib.suppress(Exception):
                handle.stop()

        threads = [threading.Thread(target=stop, args=(h,), daemon=True) for h in handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    @contextlib.contextmanager
    def _counted_inflight(self) -> Iterator[None]:
        with self._inflight_cond:
            self._inflight += 1
        try:
            yield
        finally:
            with self._inflight_cond:
                self._inflight -= 1
                self._inflight_cond.notify_all()

    def _run_with_retries(self, item: PlannedAttempt) -> None:
        """One (task, attempt) and its retries: one step of the progress bar."""
        with self._counted_inflight():
            if self._stop.is_set():
                return
            self.progress.attempt_started()
            try_number = item.try_number
            while True:
                self.journal.check_present()  # a deleted run directory stops the run
                record = self._run_attempt(item.task, item.attempt, try_number)
                if self._abandon:
                    return  # an attempt killed by the runner is not a result; resume re-runs it
                self._record(record)
                if not self._is_retryable(record) or self._stop.is_set():
                    break
                if record.agent_status in RETRYABLE_AGENT_STATUSES:
                    delay = min(BACKOFF_MAX_SEC, BACKOFF_BASE_SEC * 2**try_number)
                    if self._stop.wait(delay * (0.5 + random.random())):
                        break
                try_number += 1
            solved = record.score is not None and record.score >= self.config.solved_threshold
            self.progress.attempt_finished(record, solved)

    def _track(self, handle: Any) -> None:
        """Make ``handle`` stoppable by a teardown; refuse once the run is being torn down."""
        with self._active_lock:
            if not self._abandon:
                self._active[id(handle)] = handle
                return
        with contextlib.suppress(Exception):
            handle.stop()
        raise _Abandoned("the run was stopped while this attempt started")

    def _untrack(self, handle: Any) -> None:
        with self._active_lock:
            self._active.pop(id(handle), None)

    def _record(self, record: AttemptRecord) -> None:
        try:
            self.journal.append(record)
        except DiskFullError as exc:  # noted before the teardown, which then wipes workspaces
            self._note_full_disk(exc.__cause__, journal_failed=True)
            raise
        self._observe("ksi_attempt_finished", run=self.info, record=record)
        cost = record.usage.get("cost_usd")
        if isinstance(cost, (int, float)):
            with self._spend_lock:
                self._spent_usd += float(cost)
            self._over_budget()

    def _over_budget(self) -> bool:
        """Stop launching attempts once the reported spend reaches ``--max-cost``."""
        limit = self.config.max_cost_usd
        with self._spend_lock:
            if limit is None or self._spent_usd < limit:
                return False
            if not self._stop.is_set():
                self._stop_reason = (
                    f"max_cost: reported spend ${self._spent_usd:.4f} reached "
                    f"--max-cost ${limit:.4f}; no new attempts launched"
                )
                self._stop.set()
            return True

    def _note_full_disk(
        self,
        exc: BaseException | None = None,
        *,
        stopped: bool = False,
        journal_failed: bool = False,
    ) -> None:
        """The disk is full: launch nothing more; the run ends with the disk-full error."""
        self._disk.note(exc, attempt_stopped=stopped, journal_failed=journal_failed)
        with self._spend_lock:
            self._stop_reason = self._disk.stop_reason()
            self._stop.set()

    def _observe(self, hook: str, **kwargs: Any) -> None:
        self.observer_errors.extend(get_plugins().call_observers(hook, **kwargs))

    # -- one attempt ----------------------------------------------------------
    def _seed(self, task: TaskSpec) -> Path:
        """The task's pristine starting files, materialized once per run."""
        from ksi.tasks.seed import seed_repo

        dest = self.layout.seed_repo(task.id)
        with self._seed_locks_guard:
            lock = self._seed_locks.setdefault(task.id, threading.Lock())
        with lock:
            if not dest.is_dir():
                tmp = dest.with_name(f"repo.tmp-{os.getpid()}-{threading.get_ident()}")
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir(parents=True)
                try:
                    seed_repo(task, tmp)
                    os.replace(tmp, dest)
                except BaseException:
                    remove_tree(tmp)  # a full disk must not leave half a seed behind
                    raise
        return dest

    def _agent_timeout(self, task: TaskSpec) -> float:
        if self.config.timeout_sec is not None:
            return self.config.timeout_sec
        value = task.runtime.agent_timeout_sec
        return value if value is not None else DEFAULT_AGENT_TIMEOUT_SEC

    def _run_attempt(self, task: TaskSpec, attempt: int, try_number: int) -> AttemptRecord:
        from ksi.tasks.prompts import agent_prompt

        cfg = self.config
        attempt_dir = self.layout.attempt_dir(task.id, attempt, try_number)
        rel_dir = str(attempt_dir.relative_to(self.layout.root))
        base: dict[str, Any] = {
            "task_id": task.id,
            "attempt": attempt,
            "try_number": try_number,
            "agent": component_name(self.agent),
            "evaluator": component_name(self.evaluator),
            "environment": component_name(self.environment),
            "model": cfg.model,
            "attempt_dir": rel_dir,
            "started_at": _now(),
        }
        times: dict[str, float] = {}
        started = time.monotonic()
        handle = None
        result: ExecResult | None = None
        outcome = AgentOutcome()
        eval_result: EvalResult | None = None
        capture: CaptureReport | None = None
        try:
            if (kept_aside := clear_attempt_dir(attempt_dir)) is not None:
                self._warnings.append(kept_aside)
            workspace = attempt_dir / "workspace"
            repo = workspace / "repo"
            t = time.monotonic()
            seed = self._seed(task)
            workspace.mkdir(parents=True)
            copy_tree(seed, repo)
            prompt = agent_prompt(task)
            (attempt_dir / "prompt.md").write_text(prompt, encoding="utf-8")
            times["seed"] = time.monotonic() - t

            env_vars = scrubbed_env(
                required=getattr(self.agent, "required_env", ()),
                optional=agent_optional_env(self.agent, cfg.model),
                passthrough=cfg.agent_env,
            )
            # Lets the environment find this run's processes after a crash (cleanup).
            env_vars = {**env_vars, "KSI_RUN_ID": self.run_id}
            actx = AttemptContext(
                run_id=self.run_id,
                task=task,
                attempt=attempt,
                attempt_dir=attempt_dir,
                host_workspace=workspace,
                base_env=env_vars,
            )
            handle = self.environment.start(actx)
            self._track(handle)
            ws_path = str(handle.workspace_path)
            # Tasks that work in the image's own directory (Harbor's /app) say so.
            workdir = task.runtime.workdir
            ctx = AgentContext(
                task=task,
                prompt=prompt,
                attempt=attempt,
                attempt_dir=attempt_dir,
                workspace_path=ws_path,
                repo_path=workdir if isinstance(workdir, str) else ws_path.rstrip("/") + "/repo",
                host_workspace=workspace,
                model=cfg.model,
            )
            t = time.monotonic()
            self.agent.setup(ctx)
            invocation = self.agent.invocation(ctx)
            if invocation is not None and isinstance(workdir, str) and invocation.cwd == ".":
                invocation = attrs.evolve(invocation, cwd=workdir)
            if invocation is not None:
                result = handle.exec(
                    invocation,
                    timeout=self._agent_timeout(task),
                    stdout_path=attempt_dir / "agent.stdout.log",
                    stderr_path=attempt_dir / "agent.stderr.log",
                    log_cap_bytes=cfg.log_cap_bytes,
                )
            outcome = self.agent.outcome(ctx, result)
            times["agent"] = time.monotonic() - t
            if self._abandon:
                raise _Abandoned("the agent was killed by the run's teardown")

            if self.grades_in == "environment":
                t = time.monotonic()
                eval_result = self.evaluator.grade(
                    task, repo, env=handle, log_dir=attempt_dir / "eval"
                )
                times["eval"] = time.monotonic() - t

            # Nothing of the agent may run while its repo/ is read (an older handle: stop()).
            getattr(handle, "halt", handle.stop)()
            t = time.monotonic()
            captured = attempt_dir / "captured" / "repo"
            capture = capture_repo(repo, seed, captured, max_file_bytes=cfg.capture_max_file_bytes)
            raise_if_capture_hit_full_disk(capture.skipped)
            write_diff(seed, captured, attempt_dir / "diff.patch")
            times["capture"] = time.monotonic() - t
            handle.stop()

            if eval_result is None:
                t = time.monotonic()
                eval_result = self._grade_after_capture(task, attempt, repo, captured, attempt_dir)
                times["eval"] = time.monotonic() - t
            if cfg.wipe_workspace:
                remove_tree(workspace)
            record = self._make_record(base, outcome, result, eval_result, capture, times, started)
        except Exception as exc:
            record = AttemptRecord(
                **base,
                status="error",
                score=None,
                agent_status=outcome.status,
                error=f"{type(exc).__name__}: {exc}",
                timings=Timings(**times, total=time.monotonic() - started),
                finished_at=_now(),
                retryable=True,
            )
            if is_disk_full(exc):
                self._note_full_disk(exc, stopped=True)
                record = mark_disk_full(record, exc)
        finally:
            if handle is not None:
                with contextlib.suppress(Exception):
                    handle.stop()
                self._untrack(handle)
        if record.error_kind == DISK_FULL or (self._abandon and self._disk.happened):
            wipe_after_disk_full(attempt_dir)  # the filler goes; the logs stay
        if not self._abandon and not save_unless_disk_full(
            attempt_dir / "record.json", to_data(record), durable=False, indent=None, parents=False
        ):
            self._note_full_disk()
        return record

    def _grade_after_capture(
        self, task: TaskSpec, attempt: int, live_repo: Path, captured: Path, attempt_dir: Path
    ) -> EvalResult:
        """Grade once the agent's environment is gone: a fresh copy of the captured repo on
        the host (or in a fresh environment with ``--eval-in environment``), or the live
        repo when the workspace is kept."""
        log_dir = attempt_dir / "eval"
        if self.config.eval_in == "environment":
            return self._grade_in_fresh_environment(task, attempt, captured, attempt_dir)
        if not self.config.wipe_workspace:
            return self.evaluator.grade(task, live_repo, log_dir=log_dir)  # type: ignore[no-any-return]
        workdir = attempt_dir / "eval" / "repo"
        remove_tree(workdir)
        workdir.parent.mkdir(parents=True, exist_ok=True)
        copy_tree(captured, workdir)
        try:
            return self.evaluator.grade(task, workdir, log_dir=log_dir)  # type: ignore[no-any-return]
        finally:
            remove_tree(workdir)

    def _grade_in_fresh_environment(
        self, task: TaskSpec, attempt: int, captured: Path, attempt_dir: Path
    ) -> EvalResult:
        """``--eval-in environment``: grade a copy of the captured repo in a new environment.

        For tasks whose tests need the image's toolchain. The agent's own
        environment is already gone, so nothing it left running can touch
        the grading; the evaluator runs its command through the new handle.
        """
        workspace = attempt_dir / "eval" / "workspace"
        remove_tree(workspace)
        workspace.mkdir(parents=True)
        copy_tree(captured, workspace / "repo")
        ctx = AttemptContext(
            run_id=self.run_id,
            task=task,
            # The attempt's own number: its agent container is gone by now, and
            # concurrent attempts of one task must not share a grading container.
            attempt=attempt,
            attempt_dir=attempt_dir / "eval",
            host_workspace=workspace,
            base_env={
                **scrubbed_env(required=(), optional=(), passthrough=self.config.eval_env),
                "KSI_RUN_ID": self.run_id,
            },
        )
        handle = self.environment.start(ctx)
        try:
            self._track(handle)
            return self.evaluator.grade(  # type: ignore[no-any-return]
                task, workspace / "repo", env=handle, log_dir=attempt_dir / "eval"
            )
        finally:
            handle.stop()
            self._untrack(handle)
            remove_tree(workspace)

    def _make_record(
        self,
        base: dict[str, Any],
        outcome: AgentOutcome,
        result: ExecResult | None,
        eval_result: EvalResult | None,
        capture: CaptureReport | None,
        times: dict[str, float],
        started: float,
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
            **base,
            status=status,
            score=score,
            agent_status=outcome.status,
            agent_exit_code=result.exit_code if result else None,
            agent_timed_out=bool(result and result.timed_out),
            eval=eval_result.as_dict() if eval_result is not None else None,
            timings=Timings(**times, total=time.monotonic() - started),
            usage=to_data(outcome.usage),
            final_message=outcome.final_message,
            skipped_files=capture.skipped if capture else (),
            skipped_counts=capture.skipped_counts if capture else {},
            log_truncated=bool(result and result.output_truncated),
            error=outcome.error,
            finished_at=_now(),
            retryable=retryable,
        )


def summarize_run(run_dir: Path, *, solved_threshold: float | None = None) -> RunSummary:
    """The summary of a run directory, from its journal and run.json alone."""
    layout = RunLayout(Path(run_dir).resolve())
    stored = layout.read_run_json()
    config = stored.get("config", {})
    sessions = stored.get("sessions", [])
    wall = 0.0
    for s in sessions:
        if s.get("started_at") and s.get("finished_at"):
            a = dt.datetime.fromisoformat(s["started_at"])
            b = dt.datetime.fromisoformat(s["finished_at"])
            wall += (b - a).total_seconds()
    threshold = (
        solved_threshold if solved_threshold is not None else config.get("solved_threshold", 1.0)
    )
    journal = read_journal(layout.journal)
    return summarize(
        journal.records,
        run_id=stored.get("run_id", layout.root.name),
        run_dir=str(layout.root),
        task_ids=stored.get("task_ids", []),
        attempts_per_task=int(config.get("attempts", 1)),
        solved_threshold=float(threshold),
        wall_time_sec=wall if sessions and sessions[-1].get("finished_at") else None,
        run_complete=bool(stored.get("run_complete")),
        stopped_reason=stored.get("stopped_reason", ""),
        warnings=journal_warnings(layout.journal, journal),
    )
