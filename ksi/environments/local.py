"""The ``local`` environment: the agent runs as a plain child process on this machine.

There is no isolation: the agent can read and write anything the user running
KSI can. What KSI does guarantee on ``local``:

* the process starts with cwd in the attempt's workspace, in its own session
  and process group, with the scrubbed environment
  (:mod:`ksi.attempt.envscrub`) plus what the agent adds;
* stdout and stderr stream to log files, each capped in size;
* when the process ends, times out or the handle is stopped, every process it
  started is terminated, then killed: its cgroup's (where KSI can create
  cgroups, see :mod:`ksi.cgroups`: nothing escapes it), its process group,
  and every process carrying its ``KSI_PROC_TAG`` (which catches ``setsid``
  and double forks).

The limit, without a cgroup: a process that both leaves the process group
and scrubs its own environment (``setsid env -i ...``) cannot be found and
may outlive the attempt (KSI does not wait for it). Use ``sandbox`` or
``docker`` (a PID namespace) when that matters.

The scrub does not keep secrets on ``local`` either: the agent runs as the
same user as KSI, so it can read KSI's whole environment (every API key in
the shell that started ``ksi run``) from ``/proc/$PPID/environ``. A run warns
when an agent with credentials runs here (:meth:`LocalEnvironment.credential_warning`).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import attrs

from ksi import cgroups
from ksi.errors import EnvironmentFailure
from ksi.fstree import copy_tree
from ksi.hookspecs import Register, hookimpl
from ksi.interfaces import AttemptContext, EnvironmentBase, ExecResult, Invocation
from ksi.models import TaskSpec
from ksi.proc import kill_tree, new_tag, run_process

#: How long :meth:`LocalHandle.stop` waits for a running ``exec`` to kill its own tree.
_STOP_WAIT_SEC = 10.0


@attrs.define
class LocalHandle:
    """One attempt's processes on this machine; env paths are host paths."""

    host_workspace: Path
    workspace_path: str
    base_env: Mapping[str, str]
    #: The run the attempt belongs to: its processes' cgroups are named after it.
    run_id: str | None = None
    _cancel: threading.Event = attrs.field(factory=threading.Event, init=False)
    _lock: threading.Condition = attrs.field(factory=threading.Condition, init=False)
    _running: set[str] = attrs.field(factory=set, init=False)

    def exec(
        self,
        invocation: Invocation,
        *,
        timeout: float | None,
        stdout_path: Path,
        stderr_path: Path,
        log_cap_bytes: int,
    ) -> ExecResult:
        """Run ``invocation`` to completion or timeout; kill every process it started."""
        with self._prepared(invocation) as (argv, cwd, env):
            return self._run(
                argv, cwd, env, invocation.stdin, timeout, stdout_path, stderr_path, log_cap_bytes
            )

    def _run(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        stdin: str | None,
        timeout: float | None,
        stdout_path: Path,
        stderr_path: Path,
        log_cap_bytes: int,
    ) -> ExecResult:
        tag = new_tag()
        with self._lock:
            if self._cancel.is_set():
                return ExecResult(
                    exit_code=None,
                    duration_sec=0.0,
                    spawn_error="the environment was stopped before the process started",
                    stdout_path=str(stdout_path),
                    stderr_path=str(stderr_path),
                )
            self._running.add(tag)
        try:
            proc = run_process(
                argv,
                cwd=cwd,
                env=env,
                stdin=stdin,
                timeout=timeout,
                stdout_path=stdout_path,
                stderr_path=stderr_path,
                log_cap_bytes=log_cap_bytes,
                tag=tag,
                cancel=self._cancel,
                cgroup_label=self.run_id,
            )
        finally:
            with self._lock:
                self._running.discard(tag)
                self._lock.notify_all()
        if proc.cancelled and proc.spawn_error is None:
            return attrs.evolve(
                proc, spawn_error="killed: the environment was stopped while the process ran"
            )
        return proc

    @contextlib.contextmanager
    def _prepared(self, invocation: Invocation) -> Iterator[tuple[list[str], Path, dict[str, str]]]:
        """``(argv, cwd, env)`` of the host process, with whatever it needs while it runs.

        The ``sandbox`` environment starts its network relay here, for the
        length of the exec.
        """
        yield self._process(invocation)

    def _process(self, invocation: Invocation) -> tuple[list[str], Path, dict[str, str]]:
        """``(argv, cwd, env)`` of the host process that runs ``invocation``.

        The one place an environment built on host processes differs: the
        ``sandbox`` environment wraps the same process in bubblewrap.
        """
        cwd = self.host_workspace / invocation.cwd  # an absolute cwd replaces the workspace
        return list(invocation.argv), cwd, {**self.base_env, **invocation.env}

    def _host_path(self, env_path: str) -> Path:
        """On local an environment path is a host path; a relative one is under the workspace."""
        return self.host_workspace / env_path  # an absolute env_path replaces the workspace

    def copy_in(self, host_src: Path, env_dest: str) -> None:
        """Copy a host file or directory to ``env_dest`` (symlinks copied as links)."""
        dest = self._host_path(env_dest)
        if not host_src.exists():
            raise EnvironmentFailure(f"copy_in: {host_src} does not exist on the host")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if host_src.is_dir():
            copy_tree(host_src.resolve(), dest, merge=True)
        else:
            shutil.copy2(host_src, dest)

    def copy_out(self, env_src: str, host_dest: Path) -> bool:
        """Copy ``env_src`` to the host; False when it does not exist. Links are not followed."""
        src = self._host_path(env_src)
        if not src.exists() and not src.is_symlink():
            return False
        host_dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not src.is_symlink():
            copy_tree(src, host_dest, merge=True)
        else:
            shutil.copy2(src, host_dest, follow_symlinks=False)
        return True

    def halt(self) -> None:
        """End every process this handle started; later execs are refused.

        On local, halting is stopping: an exec that returned has already
        killed its tree (its cgroup, process group and tagged processes), and
        :meth:`stop` kills whatever a still-running exec started. (Without a
        cgroup, a process that left the process group *and* cleared its
        environment cannot be found; see the module docstring.)
        """
        self.stop()

    def stop(self) -> None:
        """Kill every process this handle started, including one still running; idempotent.

        Safe to call from another thread while :meth:`exec` waits (Ctrl-C):
        the running ``exec`` kills its tree and returns with ``spawn_error``
        saying the environment was stopped.
        """
        with self._lock:
            self._cancel.set()
            self._lock.wait_for(lambda: not self._running, timeout=_STOP_WAIT_SEC)
            # An exec that returned has already killed its whole tree; only one
            # still stuck after the wait needs killing from here.
            stuck = list(self._running)
        for tag in stuck:
            kill_tree(None, tag)


@attrs.define
class LocalEnvironment(EnvironmentBase):
    """Runs the agent as a child process on this machine."""

    name: ClassVar[str] = "local"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Runs the agent as a child process on this machine with NO isolation: it can read "
        "and write anything your user can. Scrubbed environment, own process session, "
        "every process it starts is killed when the attempt ends."
    )

    #: The agent runs as a plain host process (grading need not be isolated from it).
    isolates_agent: ClassVar[bool] = False
    #: The agent's processes run the host's programs (the knowledge tools' server).
    runs_host_programs: ClassVar[bool] = True

    def prepare(self, tasks: Sequence[TaskSpec]) -> None:
        """Nothing to build or check on local."""

    def credential_warning(self, agent: str, names: Sequence[str]) -> str:
        """What a user must know before an agent with credentials runs here."""
        return (
            f"environment 'local' does not isolate agent {agent!r}: besides the "
            f"{', '.join(names)} it is given, any process it starts can read KSI's own "
            "environment from /proc/$PPID/environ (the scrub cannot help), which holds every "
            "variable of the shell that started ksi, API keys and tokens included; use "
            "--environment sandbox or docker to keep them out of its reach"
        )

    def start(self, ctx: AttemptContext) -> LocalHandle:
        """A handle running processes in ``ctx.host_workspace``."""
        if not ctx.host_workspace.is_dir():
            raise EnvironmentFailure(
                f"attempt workspace {ctx.host_workspace} does not exist; the runner must "
                "create and seed it before starting the environment"
            )
        return LocalHandle(
            host_workspace=ctx.host_workspace,
            workspace_path=str(ctx.host_workspace),
            base_env=dict(ctx.base_env),
            run_id=ctx.run_id,
        )

    def cleanup(self, run_id: str | None) -> int:
        """Kill processes left by a killed ``ksi run`` of ``run_id``; return how many.

        An attempt's processes carry ``KSI_RUN_ID`` in their environment; when
        ``ksi run`` itself is killed (``kill -9``) they live on, and a resume
        or ``ksi cleanup`` ends them. With ``run_id=None`` nothing is done:
        processes of runs still going are not leftovers.
        """
        if run_id is None:
            return 0
        killed = kill_tree(None, run_id, tag_var="KSI_RUN_ID")
        for group in cgroups.find(run_id):  # what hid from the tag, in its attempt's cgroup
            killed += len(group.pids())
            group.remove()
        return killed


@hookimpl(trylast=True)
def ksi_register_environments(register: Register) -> None:
    register(LocalEnvironment)
