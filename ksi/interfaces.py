"""The protocols a component must follow for each extension seam.

Plugins register *classes* through the ``ksi_register_*`` hooks
(:mod:`ksi.hookspecs`); KSI instantiates them with the user's options as
keyword arguments (see :func:`ksi.options.create_component`). Every class
carries ``name``, ``aliases`` and ``description`` class attributes, used for
lookup and listings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeVar, runtime_checkable

import attrs

from ksi.models import EvalResult, Problem, TaskSpec

T = TypeVar("T")


class Component(Protocol):
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]


@runtime_checkable
class TaskSource(Protocol):
    """Turns a path (file or directory) into tasks."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]
    #: Evaluator used when the user names none.
    default_evaluator: ClassVar[str]

    def load(self, path: Path) -> list[TaskSpec]:
        """Every task in ``path``; raise :class:`ksi.errors.TaskLoadError` on any problem."""
        ...

    def validate(self, path: Path) -> list[Problem]:
        """Every problem in ``path`` (empty when it loads cleanly); never raises for bad input."""
        ...


@attrs.frozen
class Invocation:
    """A process to start in an environment.

    ``argv`` is executed directly (wrap a shell string as
    ``("/bin/sh", "-c", cmd)``). ``env`` is added to the scrubbed base
    environment; ``cwd`` is relative to the workspace as the process sees it.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = attrs.field(factory=dict)
    stdin: str | None = None
    cwd: str = "."


@attrs.frozen
class ExecResult:
    """How a process started by an environment ended."""

    exit_code: int | None
    duration_sec: float
    timed_out: bool = False
    spawn_error: str | None = None
    stdout_path: str = ""
    stderr_path: str = ""
    #: True when a log reached its size cap and later output was discarded.
    output_truncated: bool = False
    #: Processes found and killed after the main process ended or timed out.
    stragglers_killed: int = 0


class EnvironmentHandle(Protocol):
    """One started environment for one attempt."""

    #: The attempt workspace on the host (holds ``repo/``).
    host_workspace: Path
    #: The same directory as the agent's processes see it.
    workspace_path: str

    def exec(
        self,
        invocation: Invocation,
        *,
        timeout: float | None,
        stdout_path: Path,
        stderr_path: Path,
        log_cap_bytes: int,
    ) -> ExecResult:
        """Run a process to completion (or timeout); kill everything it started."""
        ...

    def copy_in(self, host_src: Path, env_dest: str) -> None:
        """Copy a host file or directory to ``env_dest`` as the environment's processes see it.

        Graders that run inside the environment use this to put tests in
        place that the agent never saw.
        """
        ...

    def copy_out(self, env_src: str, host_dest: Path) -> bool:
        """Copy a path from the environment to the host; False when it does not exist."""
        ...

    def halt(self) -> None:
        """End every process of the environment: after this returns, none started in it can run.

        The runner calls it before capturing ``repo/`` (after grading, for an
        evaluator that grades inside the environment), so nothing the agent
        left running (a background process that escaped the kill after its
        exec) can change or swap the tree while it is read. The workspace
        stays on the host; :meth:`stop` still tears the rest down. Idempotent.
        """
        ...

    def stop(self) -> None:
        """Tear down; idempotent; leaves no process or container behind."""
        ...


@attrs.frozen
class AttemptContext:
    """What an environment needs to start an attempt."""

    run_id: str
    task: TaskSpec
    attempt: int
    attempt_dir: Path
    host_workspace: Path
    #: The scrubbed environment variables every process of the attempt gets.
    base_env: Mapping[str, str]


class Environment(Protocol):
    """Where agent processes run.

    Optional: ``isolates_agent: ClassVar[bool]`` (taken as True when absent)
    says whether the agent is kept off the host; when it is, ``ksi run``
    isolates host grading too (``--eval-isolation auto``). An environment
    that does not isolate may define ``credential_warning(agent, names) -> str``,
    printed when an agent with credentials runs there (``local`` does).
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]

    def prepare(self, tasks: Sequence[TaskSpec]) -> None:
        """Once per run before any attempt: build or check images, probe tools."""
        ...

    def start(self, ctx: AttemptContext) -> EnvironmentHandle:
        """Start an environment for one attempt."""
        ...

    def cleanup(self, run_id: str | None) -> int:
        """Remove leftovers of a run (all runs when ``None``); return how many."""
        ...


@attrs.frozen
class AgentContext:
    """What an agent is told about the attempt it is about to run."""

    task: TaskSpec
    #: The prompt as given to the agent (the task prompt plus KSI's repo/ note).
    prompt: str
    attempt: int
    #: The attempt directory on the host, for trajectories and logs.
    attempt_dir: Path
    #: The workspace and repo directories as the agent's process sees them.
    workspace_path: str
    repo_path: str
    #: The workspace on the host, for agents that set files up before running.
    host_workspace: Path
    model: str | None = None


@attrs.frozen
class Usage:
    """Tokens and money an agent reports having spent on one attempt."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    turns: int | None = None


#: Agent outcome statuses the runner understands.
AgentStatus = Literal[
    "completed",
    "timeout",
    "crashed",
    "auth_error",
    "rate_limited",
    "context_exceeded",
    "budget_exceeded",
    "error",
]
RETRYABLE_AGENT_STATUSES: frozenset[str] = frozenset({"rate_limited"})


@attrs.frozen
class AgentOutcome:
    """What the agent did, read from its exit status and its own output."""

    status: str = "completed"
    usage: Usage = attrs.field(factory=Usage)
    final_message: str = ""
    error: str = ""


class Agent(Protocol):
    """A coding agent: how to invoke it and how to read what it reports."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]
    #: Host variables the agent cannot run without (checked before a run starts).
    required_env: ClassVar[tuple[str, ...]]
    #: Host variables passed through when set (base URLs, optional keys). An
    #: agent may also define ``optional_env_for(host_env, model) -> tuple[str, ...]``
    #: to pass a provider mode's keys only while that mode is on (see
    #: :func:`ksi.environments.envscrub.agent_optional_env`).
    optional_env: ClassVar[tuple[str, ...]]

    def check_tasks(self, tasks: Sequence[TaskSpec]) -> list[str]:
        """Problems that make this agent unable to attempt some tasks, before any run starts.

        E.g. ``oracle`` on a task without a solution. Empty when all is well.
        """
        ...

    def setup(self, ctx: AgentContext) -> None:
        """Prepare the workspace on the host before the agent process starts."""
        ...

    def invocation(self, ctx: AgentContext) -> Invocation | None:
        """The process to run, or ``None`` when the agent needs no process."""
        ...

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        """Classify the run and read usage from the agent's logs."""
        ...


@runtime_checkable
class Evaluator(Protocol):
    """Grades one finished attempt."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]
    #: ``"host"``: grade a host copy of the captured repo (given as ``workdir``).
    #: ``"environment"``: grade inside the attempt's environment before teardown
    #: (``env`` is the attempt's handle, ``workdir`` the live host workspace repo).
    grades_in: ClassVar[Literal["host", "environment"]]

    def grade(
        self,
        task: TaskSpec,
        workdir: Path,
        *,
        env: EnvironmentHandle | None = None,
        log_dir: Path | None = None,
    ) -> EvalResult:
        """Grade ``workdir``; write full eval output into ``log_dir`` when given.

        Never raises for a problem with the attempt: an ungradeable attempt
        is an :class:`EvalResult` with ``native_score=None`` and a status.
        """
        ...


class Executor(Protocol):
    """Schedules attempts: runs callables with bounded concurrency."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]

    def map_unordered(
        self, fn: Callable[[T], Any], items: Iterable[T], concurrency: int
    ) -> Iterator[Any]:
        """Yield ``fn(item)`` for every item, as each finishes."""
        ...

    def shutdown(self) -> None:
        """Stop scheduling; called on completion and on Ctrl-C."""
        ...
