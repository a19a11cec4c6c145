"""The built-in ``command`` evaluator: a task's eval command decides the score.

It runs the task's eval command (``task.eval.command``) with a shell, on the host, in the
directory it is given (a copy of the attempt's ``repo/``), and scores it by
the contract in :mod:`ksi.eval.scoring`. An attempt that cannot be judged
(timeout, no workspace, a shell that cannot start, no eval command) is
*unscored* (``native_score=None``) with a ``status`` that says why, never
0.0: a broken grader must not look like a wrong answer.

The command runs with the privileges of whoever runs KSI (a tasks file is
code) but not with their environment: it gets the scrubbed environment an
agent gets, the variables named in ``pass_env`` (``--eval-env``), and
``KSI_TASK_ID`` and ``KSI_EVAL_WORKDIR``. With ``isolation=sandbox`` (what a
run picks when its agent ran isolated) it runs in a bubblewrap sandbox whose
only writable path is the graded directory: see :mod:`ksi.eval.host_safety`.

Given an environment handle (``ksi run --eval-in environment``: a fresh
container of the task's image on a copy of the captured repo), the command
runs *through that handle* instead, for tests that need the image's
toolchain. The contract does not change: the stale ``score.json`` is deleted
and the new one read on the host side of the workspace the handle mounts,
and a timeout or a shell that cannot start is unscored.
"""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import attrs

from ksi.choices import EvalIsolation
from ksi.compat.original import evaluate as evaluate_original
from ksi.eval.host_safety import (
    ISOLATIONS,
    check_pass_env,
    eval_argv,
    eval_process_env,
    require_isolation,
)
from ksi.eval.scoring import (
    read_score_file,
    remove_stale_score_file,
    score_conflict,
    score_from_exit_code,
)
from ksi.hookspecs import Register, hookimpl
from ksi.interfaces import EnvironmentHandle, EvaluatorBase, Invocation
from ksi.limits import timeout_problem
from ksi.models import EvalResult, EvalStatus, TaskSpec
from ksi.proc import read_tail, run_process

#: Why a score.json the command wrote did not count, with ``score_json=false``.
SCORE_JSON_OFF_NOTE = "score.json ignored: only the tests' exit status counts"
STDOUT_LOG = "eval.stdout.log"
STDERR_LOG = "eval.stderr.log"

_EXIT_HINTS = {
    126: "exit code 126: the shell found the command but could not execute it "
    "(permission or format problem?)",
    127: "exit code 127: the shell could not find the command (or the command itself "
    "exited 127); check the task's eval command and the files it needs",
}


def _timeout_or_none(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (problem := timeout_problem(value)):
        raise ValueError(f"{attribute.name} {problem}")


def _positive_int(_inst: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value!r}")


def _isolation(_inst: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in ISOLATIONS:
        raise ValueError(f"{attribute.name} must be one of {', '.join(ISOLATIONS)}, got {value!r}")


@attrs.frozen
class CommandEvaluator(EvaluatorBase):
    """Run the task's eval command in the workspace; exit code or score.json is the score.

    Options (``--evaluator-option KEY=VALUE``):

    * ``shell``: the shell that runs the command as ``<shell> -c <command>``.
    * ``timeout_sec``: overrides every task's ``eval.timeout_sec``.
    * ``tail_bytes``: how much of the end of stdout and stderr the result keeps.
    * ``log_cap_bytes``: the most of each stream written to the eval logs.
    * ``keep_workdir``: for :meth:`evaluate` only; keep the fresh copy of the
      task's starting files it grades when no workspace is given.
    * ``isolation``: ``none`` (a plain host process) or ``sandbox`` (bubblewrap:
      the graded directory is the only writable path, no network, no home);
      ``ksi run --eval-isolation`` sets it for the run.
    * ``pass_env``: host variables the eval command gets besides the scrubbed
      environment (``ksi run --eval-env NAME`` sets it).
    * ``bwrap_binary``: the bubblewrap executable for ``isolation=sandbox``.
    * ``score_json``: whether a ``score.json`` the command wrote overrides the
      exit code (the spec's contract, the default). ``false``: the exit code
      alone decides, so code the command runs cannot raise the score by
      writing that file (see :func:`ksi.eval.scoring.score_conflict`).
    """

    name: ClassVar[str] = "command"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Run the task's eval command in the workspace (on the host; in a fresh environment "
        "with --eval-in environment): exit 0 -> 1.0, nonzero -> 0.0, a score.json "
        '{"score": x} written by it overrides.'
    )
    grades_in: ClassVar[Literal["host", "environment"]] = "host"

    shell: str = "/bin/sh"
    timeout_sec: float | None = attrs.field(default=None, validator=_timeout_or_none)
    tail_bytes: int = attrs.field(default=4096, validator=_positive_int)
    log_cap_bytes: int = attrs.field(default=10 * 1024 * 1024, validator=_positive_int)
    keep_workdir: bool = False
    isolation: str = attrs.field(default=EvalIsolation.NONE, validator=_isolation)
    pass_env: tuple[str, ...] = ()
    bwrap_binary: str = "bwrap"
    score_json: bool = True

    # -- how a run grades on the host ------------------------------------------
    def for_host_grading(self, *, isolation: str, pass_env: Sequence[str]) -> CommandEvaluator:
        """This evaluator with the run's isolation and ``--eval-env`` names, both checked.

        Called before a run starts, so a missing bubblewrap or an unset
        variable stops it with a clear error instead of failing every grade.
        """
        check_pass_env(pass_env)
        binary = self.bwrap_binary
        if isolation == EvalIsolation.SANDBOX:
            binary = require_isolation(binary)
        return attrs.evolve(
            self, isolation=isolation, pass_env=tuple(pass_env), bwrap_binary=binary
        )

    def _host_process(
        self, task: TaskSpec, command: str, workdir: Path
    ) -> tuple[list[str], dict[str, str]]:
        """``(argv, env)`` of the eval command as a host process (see ``host_safety``)."""
        argv = eval_argv(
            [self.shell, "-c", command],
            workdir,
            isolation=self.isolation,
            binary=self.bwrap_binary,
        )
        env = eval_process_env(task.id, workdir, pass_env=self.pass_env, isolation=self.isolation)
        return argv, env

    # -- the Evaluator protocol ----------------------------------------------
    def grade(
        self,
        task: TaskSpec,
        workdir: Path,
        *,
        env: EnvironmentHandle | None = None,
        log_dir: Path | None = None,
    ) -> EvalResult:
        """Grade ``workdir`` in place (callers hand it a copy); never raises for the attempt.

        Without ``env`` the command runs on the host in ``workdir``. With
        ``env`` it runs through the handle, in ``workdir`` as the handle's
        processes see it (``workdir`` must be inside ``env.host_workspace``).
        With ``log_dir``, the full (capped) stdout and stderr are kept there
        as ``eval.stdout.log`` and ``eval.stderr.log``.
        """
        command = task.eval.command.strip()
        workdir = Path(workdir).absolute()
        base: dict[str, Any] = {"eval_workdir": str(workdir)}
        if not command:
            return EvalResult(
                EvalStatus.NO_EVAL,
                None,
                notes=(f"task {task.id!r} has no eval command; nothing to grade",),
                details={"command": ""},
                **base,
            )
        timeout = self._timeout_for(task)
        details: dict[str, Any] = {"command": command, "timeout_sec": timeout}
        if not workdir.is_dir():
            what = "is not a directory" if workdir.exists() else "does not exist"
            return EvalResult(
                EvalStatus.MISSING_WORKSPACE,
                None,
                notes=(f"workspace {str(workdir)!r} {what}; unscored",),
                details=details,
                **base,
            )
        env_cwd: str | None = None
        if env is not None:
            env_cwd = _relative_in(workdir, Path(env.host_workspace))
            if env_cwd is None:
                return EvalResult(
                    EvalStatus.EVAL_ERROR,
                    None,
                    notes=(
                        f"workspace {str(workdir)!r} is not inside the environment's workspace "
                        f"{str(env.host_workspace)!r}, so the environment cannot see it; unscored",
                    ),
                    details=details,
                    **base,
                )
            details["eval_in"] = "environment"
            details["eval_env_workdir"] = posixpath.join(env.workspace_path, env_cwd)
        notes: list[str] = []
        try:
            stale = remove_stale_score_file(workdir)
        except OSError as exc:
            return EvalResult(
                EvalStatus.EVAL_ERROR,
                None,
                notes=(f"could not delete the stale score.json in the workspace: {exc}",),
                details=details,
                **base,
            )
        if stale:
            notes.append(stale)
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            return self._run(task, command, timeout, workdir, log_dir, notes, details, env)
        with tempfile.TemporaryDirectory(prefix="ksi-eval-logs-") as tmp:
            result = self._run(task, command, timeout, workdir, Path(tmp), notes, details, env)
        return attrs.evolve(
            result,
            details={k: v for k, v in result.details.items() if not k.endswith("_log")},
        )

    # -- the original KSI's API ------------------------------------------------
    def evaluate(
        self,
        task: TaskSpec,
        model_output: str = "",
        runtime_meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Grade a task the way the original KSI did: :func:`ksi.compat.original.evaluate`.

        The result is :meth:`EvalResult.as_dict` with the original's status
        word (``evaluated``, ``eval_timeout``, ``eval_spawn_failed``,
        ``no_workspace``, ``no_eval_command``); :meth:`grade` and KSI's records
        keep KSI's own. ``runtime_meta["host_workspace_repo_dir"]`` is graded in
        place; without it a fresh copy of the starting files is (kept with
        ``keep_workdir``). ``model_output`` is accepted and ignored.
        """
        del model_output
        return evaluate_original(self, task, runtime_meta, keep_workdir=self.keep_workdir)

    # -- internals -------------------------------------------------------------
    def _timeout_for(self, task: TaskSpec) -> float:
        if self.timeout_sec is not None:
            return float(self.timeout_sec)
        return task.eval.timeout_sec

    def _run(
        self,
        task: TaskSpec,
        command: str,
        timeout: float,
        workdir: Path,
        log_dir: Path,
        notes: list[str],
        details: dict[str, Any],
        handle: EnvironmentHandle | None = None,
    ) -> EvalResult:
        stdout_log, stderr_log = log_dir / STDOUT_LOG, log_dir / STDERR_LOG
        if handle is None:
            argv, env = self._host_process(task, command, workdir)
            details = {
                **details,
                "isolation": str(self.isolation),  # a plain word in the details
                "env_passed": sorted(n for n in self.pass_env if n in env),
            }
            proc: _Ran = run_process(
                argv,
                cwd=workdir,
                env=env,
                timeout=timeout,
                stdout_path=stdout_log,
                stderr_path=stderr_log,
                log_cap_bytes=self.log_cap_bytes,
            )
        else:
            env_workdir = str(details["eval_env_workdir"])
            proc = handle.exec(
                Invocation(
                    argv=(self.shell, "-c", command),
                    env={"KSI_TASK_ID": task.id, "KSI_EVAL_WORKDIR": env_workdir},
                    cwd=env_workdir,
                ),
                timeout=timeout,
                stdout_path=stdout_log,
                stderr_path=stderr_log,
                log_cap_bytes=self.log_cap_bytes,
            )
        details = {
            **details,
            "stdout_log": str(stdout_log),
            "stderr_log": str(stderr_log),
            "output_truncated": proc.output_truncated,
            "stragglers_killed": proc.stragglers_killed,
        }
        common: dict[str, Any] = {
            "exit_code": proc.exit_code,
            "stdout_tail": read_tail(stdout_log, self.tail_bytes),
            "stderr_tail": read_tail(stderr_log, self.tail_bytes),
            "eval_workdir": str(workdir),
            "duration_sec": proc.duration_sec,
        }
        if proc.output_truncated:
            notes.append(f"eval output was cut at {self.log_cap_bytes} bytes per stream")
        if proc.stragglers_killed and not proc.timed_out:
            notes.append(
                f"killed processes the eval command left running ({proc.stragglers_killed} "
                "signalled)"
            )
        if proc.spawn_error is not None:
            notes.append(
                f"could not start the eval command with shell {self.shell!r}: {proc.spawn_error}"
            )
            return EvalResult(
                EvalStatus.SPAWN_FAILED, None, notes=tuple(notes), details=details, **common
            )
        if proc.timed_out or proc.exit_code is None:
            notes.append(
                f"eval command did not finish within {timeout:g}s; it and every process it "
                "started were killed; unscored"
            )
            return EvalResult(
                EvalStatus.TIMEOUT, None, notes=tuple(notes), details=details, **common
            )
        score = score_from_exit_code(proc.exit_code)
        details["score_source"] = "exit_code"
        if proc.exit_code in _EXIT_HINTS:
            notes.append(_EXIT_HINTS[proc.exit_code])
        elif proc.exit_code < 0:
            notes.append(f"eval command was killed by signal {-proc.exit_code}")
        found = read_score_file(workdir)
        if found.problem is not None:
            notes.append(found.problem)
        elif found.score is not None and not self.score_json:
            notes.append(SCORE_JSON_OFF_NOTE)
        elif found.score is not None:
            score = found.score
            details["score_source"] = "score.json"
            conflict = score_conflict(proc.exit_code, score)
            if conflict is not None:
                details["score_conflict"] = True
                notes.insert(0, conflict)
        return EvalResult(EvalStatus.SCORED, score, notes=tuple(notes), details=details, **common)


class _Ran(Protocol):
    """What both a host run (:class:`ksi.proc.ProcResult`) and an ``exec`` report."""

    @property
    def exit_code(self) -> int | None: ...
    @property
    def duration_sec(self) -> float: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def spawn_error(self) -> str | None: ...
    @property
    def output_truncated(self) -> bool: ...
    @property
    def stragglers_killed(self) -> int: ...


def _relative_in(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` as a POSIX path (``.`` for root itself), or None if outside."""
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    return rel.as_posix() or "."


@hookimpl(trylast=True)
def ksi_register_evaluators(register: Register) -> None:
    """Register the built-in ``command`` evaluator."""
    register(CommandEvaluator)
