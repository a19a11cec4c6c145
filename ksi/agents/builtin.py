"""The built-in agents: ``command`` (any shell command), ``oracle`` and ``nop``.

``command`` is how any agent CLI can be used before it has its own plugin.
``oracle`` (apply the task's reference solution) and ``nop`` (do nothing)
check tasks rather than agents: a task ``oracle`` cannot solve, or one that
``nop`` passes, is a broken task (``ksi check``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.errors import UserInputError
from ksi.hookspecs import Register, hookimpl
from ksi.interfaces import AgentBase, AgentContext, AgentOutcome, Endpoint, ExecResult, Invocation
from ksi.models import AgentStatus, TaskSpec
from ksi.proc import read_tail
from ksi.relpaths import clean_relative_path
from ksi.trajectories import Trajectory, TrajectoryBuilder
from ksi.trajectories.writer import DEFAULT_LIMITS, read_log

#: Where ``command`` writes the prompt, relative to the workspace (outside repo/, never captured).
PROMPT_FILE = ".ksi/prompt.md"
#: Largest prompt (UTF-8 bytes) also passed as ``$KSI_PROMPT``; Linux refuses to start a
#: process with a single environment string over 128 KiB. Longer prompts: file and stdin only.
PROMPT_ENV_MAX_BYTES = 100_000
_TAIL_BYTES = 2000


def attempt_env(ctx: AgentContext) -> dict[str, str]:
    """The ``KSI_*`` variables every built-in agent's process gets (paths as it sees them)."""
    env = {
        "KSI_TASK_ID": ctx.task.id,
        "KSI_WORKSPACE": ctx.workspace_path,
        "KSI_REPO": ctx.repo_path,
        "KSI_ATTEMPT": str(ctx.attempt),
    }
    if ctx.model:
        env["KSI_MODEL"] = ctx.model
    return env


def write_prompt(ctx: AgentContext) -> None:
    """Write the prompt to :data:`PROMPT_FILE` (every agent, built-in or CLI, can read it)."""
    path = ctx.host_workspace / PROMPT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ctx.prompt, encoding="utf-8")


def prompt_path(ctx: AgentContext) -> str:
    """The prompt file as the agent's process sees it."""
    return f"{ctx.workspace_path.rstrip('/')}/{PROMPT_FILE}"


def outcome_from_exit(result: ExecResult | None) -> AgentOutcome:
    """Classify a finished process: 0 completed, timeout, nonzero crashed, no start error.

    The attempt is graded whatever this says; the status explains the score.
    """
    if result is None:
        return AgentOutcome(status=AgentStatus.COMPLETED)
    final = read_tail(result.stdout_path, _TAIL_BYTES) if result.stdout_path else ""
    if result.spawn_error is not None:
        return AgentOutcome(status=AgentStatus.ERROR, error=f"could not run: {result.spawn_error}")
    if result.timed_out:
        return AgentOutcome(
            status=AgentStatus.TIMEOUT,
            final_message=final,
            error=f"timed out after {result.duration_sec:.1f}s; every process it started "
            "was killed",
        )
    if result.exit_code == 0:
        return AgentOutcome(status=AgentStatus.COMPLETED, final_message=final)
    stderr = read_tail(result.stderr_path, 500).strip() if result.stderr_path else ""
    how = (
        f"killed by signal {-result.exit_code}"
        if result.exit_code is not None and result.exit_code < 0
        else f"exited with code {result.exit_code}"
    )
    return AgentOutcome(
        status=AgentStatus.CRASHED,
        final_message=final,
        error=how + (f"; stderr ends with: {stderr}" if stderr else ""),
    )


def command_trajectory(
    agent: str, ctx: AgentContext, result: ExecResult | None, command: str, *, before: str = ""
) -> Trajectory | None:
    """One step for a run of one shell command: the command, and its output and exit code.

    KSI knows nothing of what happened inside the command (a CLI wrapped in
    ``command`` may have made many model calls); the trajectory's notes say so.
    """
    if result is None:
        return None
    b = TrajectoryBuilder(agent, prompt=ctx.prompt, model=ctx.model, workspace=ctx.workspace_path)
    if before:
        b.system(before)
    b.agent_step()
    call = b.call("command", "shell", {"command": command})
    if result.spawn_error is not None:
        b.result(call, f"could not run: {result.spawn_error}", failed=True)
    else:
        # Both within one text's limit: stderr (the error, usually) gets a quarter of it.
        stderr = read_log(result.stderr_path, DEFAULT_LIMITS.text_bytes // 4)
        output = read_log(result.stdout_path, DEFAULT_LIMITS.text_bytes - len(stderr) - 64)
        if stderr.strip():
            output = f"{output}\n[stderr]\n{stderr}" if output.strip() else stderr
        timed_out = "timed out" if result.timed_out else None
        b.result(call, output, exit_code=result.exit_code, failed=True if timed_out else None)
        if timed_out:
            b.note(f"The command timed out after {result.duration_sec:.0f}s and was killed.")
    b.note(
        f"The {agent} agent's run is one step: the command it ran and what it printed "
        "(stdout, then stderr); what happened inside the command is not known to KSI."
    )
    return b.build()


def _need_cmd(instance: Any, attribute: Any, value: str | None) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            "option 'cmd' is required: the shell command to run in the workspace, e.g. "
            "--agent-option cmd='my-agent --prompt-file \"$KSI_PROMPT_FILE\"'"
        )


def parse_endpoints(value: str) -> tuple[Endpoint, ...]:
    """The ``endpoints`` option: comma-separated ``host:port`` pairs or ``http(s)://`` URLs."""
    found: list[Endpoint] = []
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        try:
            if "://" in item:
                found.append(Endpoint.from_url(item))
            else:
                host, _, port = item.rpartition(":")
                found.append(Endpoint(host, int(port)))
            if not found[-1].host:
                raise ValueError("no host")
        except ValueError as exc:
            raise ValueError(
                f"endpoints: {item!r} is not HOST:PORT or an http(s) URL ({exc}); "
                "e.g. endpoints=127.0.0.1:4000,api.example.com:443"
            ) from exc
    return tuple(found)


@attrs.define
class CommandAgent(AgentBase):
    """Runs ``/bin/sh -c CMD`` in the workspace with the prompt in env, a file and stdin.

    The cwd is the workspace, not repo/ (the prompt note, KNOWLEDGE.md and
    .ksi/ live beside repo/); ``$KSI_REPO`` names repo/ as the command sees
    it. An attempt that leaves repo/ as it was is flagged in the summary.
    """

    name: ClassVar[str] = "command"
    aliases: ClassVar[tuple[str, ...]] = ("shell",)
    description: ClassVar[str] = (
        "Runs a shell command (--agent-option cmd='...'). Its cwd is the workspace: the task's "
        "files, and what gets graded, are in repo/ ($KSI_REPO), so write there (cd repo, or "
        '"$KSI_REPO/x.py"). The prompt is in $KSI_PROMPT, in the file $KSI_PROMPT_FILE and '
        "on stdin."
    )
    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()

    #: The shell command to run (``/bin/sh -c``), with cwd the workspace (repo/ is inside).
    cmd: str | None = attrs.field(default=None, validator=_need_cmd)
    #: ``HOST:PORT[,HOST:PORT...]`` (or URLs) the command needs to reach: the only network
    #: it gets in the ``sandbox`` and ``docker`` environments (none when empty).
    endpoints: str = attrs.field(default="", validator=lambda _i, _a, v: parse_endpoints(v))

    def check_tasks(self, tasks: Sequence[TaskSpec]) -> list[str]:
        return []

    def setup(self, ctx: AgentContext) -> None:
        """Write the prompt to ``<workspace>/.ksi/prompt.md``."""
        write_prompt(ctx)

    def invocation(self, ctx: AgentContext) -> Invocation:
        env = {**attempt_env(ctx), "KSI_PROMPT_FILE": prompt_path(ctx)}
        if len(ctx.prompt.encode("utf-8")) <= PROMPT_ENV_MAX_BYTES:
            env["KSI_PROMPT"] = ctx.prompt
        assert self.cmd is not None  # the validator guarantees it
        return Invocation(
            argv=("/bin/sh", "-c", self.cmd),
            env=env,
            stdin=ctx.prompt,
            cwd=".",
            endpoints=parse_endpoints(self.endpoints),
        )

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        return outcome_from_exit(result)

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """One step: ``cmd`` and its output."""
        return command_trajectory(self.name, ctx, result, str(self.cmd))


def _solution(task: TaskSpec) -> tuple[Mapping[str, str] | None, str | None]:
    if task.solution is None:
        return None, None
    return task.solution.files, task.solution.command


def _solution_problems(task: TaskSpec) -> list[str]:
    if task.solution is None:
        return [
            f"task {task.id!r} has no `solution`; oracle cannot attempt it — add a solution "
            "{files|command} to its record"
        ]
    problems = []
    files, command = task.solution.files, task.solution.command
    if command is not None and not command.strip():
        problems.append(f"task {task.id!r}: solution.command must be a non-empty string")
    for rel in files or {}:
        why = clean_relative_path(rel)[1]
        if why:
            problems.append(f"task {task.id!r}: solution.files[{rel!r}]: {why}")
    if not problems and not files and not command:
        problems.append(
            f"task {task.id!r} has an empty `solution`; oracle cannot attempt it — give it "
            "`files` and/or a `command`"
        )
    return problems


@attrs.define
class OracleAgent(AgentBase):
    """Applies the task's reference solution, proving the task can be solved."""

    name: ClassVar[str] = "oracle"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Applies each task's reference solution (solution.files written into repo/, then "
        "solution.command run in repo/): proves a task is solvable. No API key."
    )
    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()

    def check_tasks(self, tasks: Sequence[TaskSpec]) -> list[str]:
        """One problem per task without a usable solution."""
        return [p for task in tasks for p in _solution_problems(task)]

    def setup(self, ctx: AgentContext) -> None:
        """Write ``solution.files`` into repo/ on the host, refusing any path out of repo/."""
        problems = _solution_problems(ctx.task)
        if problems:
            raise UserInputError("\n".join(problems))
        files, _ = _solution(ctx.task)
        repo = (ctx.host_workspace / "repo").resolve()
        for rel, content in (files or {}).items():
            dest = repo / rel
            # A symlink already in repo/ could point out of it; resolve before writing.
            real = dest.parent.resolve() / dest.name
            if not real.parent.is_relative_to(repo):
                raise UserInputError(
                    f"task {ctx.task.id!r}: solution.files path {rel!r} leads out of repo/ "
                    "(through a symlink); oracle refuses to write it"
                )
            real.parent.mkdir(parents=True, exist_ok=True)
            _write_text(real, content)

    def invocation(self, ctx: AgentContext) -> Invocation | None:
        """``solution.command`` in repo/, or None when the solution is files only."""
        _, command = _solution(ctx.task)
        if not command:
            return None
        return Invocation(argv=("/bin/sh", "-c", command), env=attempt_env(ctx), cwd="repo")

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        return outcome_from_exit(result)

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """One step: ``solution.command`` and its output (after the files it wrote)."""
        files, command = _solution(ctx.task)
        if not command:
            return None
        wrote = (
            "oracle wrote the task's solution files into repo/: " + ", ".join(sorted(files))
            if files
            else ""
        )
        return command_trajectory(self.name, ctx, result, command, before=wrote)


def _write_text(path: Path, content: str) -> None:
    if path.is_symlink():
        path.unlink()  # replace the link itself, never write through it
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(content)


@attrs.define
class NopAgent(AgentBase):
    """Does nothing: a task whose eval passes on the untouched workspace is broken."""

    name: ClassVar[str] = "nop"
    aliases: ClassVar[tuple[str, ...]] = ("noop",)
    description: ClassVar[str] = (
        "Does nothing. A task that passes with nop is broken (its eval accepts the "
        "untouched starting files)."
    )
    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()

    def check_tasks(self, tasks: Sequence[TaskSpec]) -> list[str]:
        return []

    def setup(self, ctx: AgentContext) -> None:
        """Nothing to prepare."""

    def invocation(self, ctx: AgentContext) -> Invocation | None:
        return None

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        return AgentOutcome(status=AgentStatus.COMPLETED)


@hookimpl(trylast=True)
def ksi_register_agents(register: Register) -> None:
    register(CommandAgent)
    register(OracleAgent)
    register(NopAgent)
