"""The protocols a component must follow for each extension seam.

Plugins register *classes* through the ``ksi_register_*`` hooks
(:mod:`ksi.hookspecs`); KSI instantiates them with the user's options as
keyword arguments (see :func:`ksi.options.create_component`). Every class
carries ``name``, ``aliases`` and ``description`` class attributes, used for
lookup and listings.

A protocol declares every member KSI reads, the optional ones included. Their
defaults live in one small base class per kind (:class:`AgentBase`,
:class:`EnvironmentBase`...), which a component may subclass; one that does
not, and leaves a member out, is completed with the base class's default when
it is resolved (:func:`ksi.attempt.components.resolve`), so the runner reads
every member as typed and never asks an object what it can do.
:mod:`ksi.kinds` ties each kind to its protocol and base class.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, Self, runtime_checkable

import attrs

from ksi.errors import UserInputError
from ksi.models import EvalResult, Problem, TaskSpec, Usage
from ksi.proc import ProcResult

if TYPE_CHECKING:
    # The job values themselves (ksi.jobs, the contract executors import, also holds
    # run_job, which uses these protocols: naming it here would be a circle).
    from ksi.attempt.job import AttemptJob, JobOutcome
    from ksi.knowledge.models import DistillRequest, DistillResult, PlanRequest
    from ksi.trajectories.models import Trajectory

#: How a process started by an environment ended: the one process-result type
#: (:class:`ksi.proc.ProcResult`), under the name environment and agent plugins use.
ExecResult = ProcResult

__all__ = [
    "Agent",
    "AgentBase",
    "AgentContext",
    "AgentOutcome",
    "AttemptContext",
    "Distiller",
    "DistillerBase",
    "Endpoint",
    "Environment",
    "EnvironmentBase",
    "EnvironmentHandle",
    "Evaluator",
    "EvaluatorBase",
    "ExecResult",
    "Executor",
    "ExecutorBase",
    "GivesFeedback",
    "Invocation",
    "Strategy",
    "StrategyBase",
    "TaskSource",
    "TaskSourceBase",
    "Usage",
]


@runtime_checkable
class TaskSource(Protocol):
    """Turns a path (file or directory) into tasks."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]
    #: Evaluator used when the user names none.
    default_evaluator: ClassVar[str]
    #: Optional: the suffixes of the files it reads (``(".csv",)``); ``ksi run x.csv``
    #: with another source then names this one.
    file_suffixes: ClassVar[tuple[str, ...]]
    #: Optional: whether ``load`` takes a directory (a benchmark checkout, a folder of
    #: task directories); ``ksi run some/dir`` with another source then names this one.
    reads_directories: ClassVar[bool]

    def load(self, path: Path) -> list[TaskSpec]:
        """Every task in ``path``; raise :class:`ksi.errors.TaskLoadError` on any problem."""
        ...

    def validate(self, path: Path) -> list[Problem]:
        """Every problem in ``path`` (empty when it loads cleanly); never raises for bad input."""
        ...


#: Ports ``Endpoint.from_url`` assumes for a URL that names none.
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _check_port(_inst: object, _attr: object, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
        raise ValueError(f"endpoint port {value!r} is not a TCP port (1-65535)")


def _host(value: object) -> str:
    """A host as compared: lower case, an IPv6 address without its brackets."""
    return str(value).strip("[]").lower()


@attrs.frozen
class Endpoint:
    """A TCP endpoint a process needs to reach: its model provider's API, a gateway.

    An environment that isolates the network (``sandbox``, ``docker`` by
    default) lets the process reach these and nothing else.
    """

    host: str = attrs.field(converter=_host)
    port: int = attrs.field(validator=_check_port)

    @classmethod
    def from_url(cls, url: str) -> Endpoint:
        """The endpoint of an ``http(s)://host[:port]/...`` URL (port 80/443 when unnamed)."""
        # start-up: only when an endpoint is checked
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL with a host")
        return cls(parts.hostname, parts.port or _DEFAULT_PORTS[parts.scheme])

    @property
    def is_loopback(self) -> bool:
        """Whether the host is a loopback IP address (a name, even ``localhost``, is not)."""
        # start-up: only when an endpoint is checked
        import ipaddress

        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        return host_port(self.host, self.port)


def host_port(host: str, port: int) -> str:
    """``host:port``, an IPv6 address in brackets: how endpoints are written to users."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@attrs.frozen
class Invocation:
    """A process to start in an environment.

    ``argv`` is executed directly (wrap a shell string as
    ``("/bin/sh", "-c", cmd)``). ``env`` is added to the scrubbed base
    environment; ``cwd`` is relative to the workspace as the process sees it.
    ``endpoints`` are the network endpoints the process needs (an agent's
    model API); an environment that isolates the network lets it reach those
    only, and a process that declares none (a grading command) gets no network.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = attrs.field(factory=dict)
    stdin: str | None = None
    cwd: str = "."
    endpoints: tuple[Endpoint, ...] = ()
    #: Host programs the process starts by path besides its own (an MCP server's
    #: interpreter): an environment that shows the host selectively shows these too.
    programs: tuple[str, ...] = ()


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
        """Run a process to completion (or timeout); kill everything it started.

        Its output goes to ``stdout_path`` and ``stderr_path``, each capped at
        ``log_cap_bytes``; a log is created at its stream's first byte, so a
        process that prints nothing to one leaves no file there (readers treat
        a missing log as empty: :func:`ksi.proc.read_tail` does).
        """
        ...

    def copy_in(self, host_src: Path, env_dest: str) -> None:
        """Copy a host file or directory to ``env_dest`` as the environment's processes see it.

        Graders that run inside the environment use this to put tests in
        place that the agent never saw.
        """
        ...

    def copy_out(self, env_src: str, host_dest: Path) -> bool:
        """Copy a path from the environment to the host; False when it does not exist.

        Symlinks are copied as links, never followed: a link the environment's
        processes made names a path that, on the host, is someone's file.
        """
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
    """Where agent processes run."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]
    #: Whether the agent is kept off the host (a container, a sandbox). When it
    #: is, ``ksi run`` isolates host grading too (``--eval-isolation auto``) and
    #: agents learn it from :attr:`AgentContext.isolated` (Codex then runs
    #: without a sandbox of its own). None (an environment that does not say)
    #: gets the safe side of each: the agent is taken as *not* isolated (it keeps
    #: its own sandbox, credentials given to it are warned about) and host
    #: grading is still isolated.
    isolates_agent: ClassVar[bool | None]

    def prepare(self, tasks: Sequence[TaskSpec]) -> None:
        """Once per run before any attempt: build or check images, probe tools."""
        ...

    def start(self, ctx: AttemptContext) -> EnvironmentHandle:
        """Start an environment for one attempt."""
        ...

    def cleanup(self, run_id: str | None) -> int:
        """Remove leftovers of a run (all runs when ``None``); return how many."""
        ...

    def credential_warning(self, agent: str, names: Sequence[str]) -> str | None:
        """Optional: what a user must know when agent ``agent`` gets credentials ``names`` here.

        Asked only when the environment does not isolate (``local`` answers:
        any process the agent starts can read KSI's own environment); printed
        as a warning before the first attempt.
        """
        ...

    def endpoint_warning(self, agent: str, url: str) -> str | None:
        """Optional: why the agent's ``base_url`` ``url`` is out of reach from here, or ``None``.

        A container on docker's ``bridge`` network has a loopback of its own,
        so ``http://127.0.0.1:4000`` there is not the host's port 4000.
        Asked before the first attempt, when the agent has a ``base_url``.
        """
        ...


@attrs.frozen
class McpServer:
    """A stdio MCP server an agent's CLI starts for the attempt (the knowledge tools).

    Paths are as the agent's process sees them. Each CLI agent that speaks MCP
    writes it into that CLI's own configuration for this attempt alone (a file
    in the workspace, or flags), never the user's.
    """

    #: The server's name in the CLI's configuration (tools appear as ``mcp__<name>__<tool>``
    #: in Claude Code).
    name: str
    command: str
    args: tuple[str, ...] = ()
    #: The tools it serves (a CLI that must allow tools by name allows these).
    tools: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return [self.command, *self.args]


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
    #: Whether the environment already keeps the agent off the host (its
    #: ``isolates_agent``): an agent may then skip a sandbox of its own, which
    #: could not nest inside the environment's (Codex's ``sandbox=auto``).
    isolated: bool = False
    #: MCP servers the agent's CLI should start (empty unless ``--knowledge-tools on``);
    #: a CLI that cannot speak MCP ignores them.
    mcp_servers: tuple[McpServer, ...] = ()


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
    #: Host variables passed through when set (base URLs, optional keys); see
    #: :meth:`optional_env_for`.
    optional_env: ClassVar[tuple[str, ...]]
    #: Variables any one of which authenticates the agent: an authentication
    #: failure tells the user to check them.
    credential_env: ClassVar[tuple[str, ...]]
    #: The model endpoint the user set (a gateway, a local server), ``""`` for the
    #: provider's own: an environment that cannot reach it warns before the run.
    base_url: str

    def check_tasks(self, tasks: Sequence[TaskSpec]) -> list[str]:
        """Problems that make this agent unable to attempt some tasks, before any run starts.

        E.g. ``oracle`` on a task without a solution. Empty when all is well.
        """
        ...

    def optional_env_for(self, host_env: Mapping[str, str], model: str | None) -> tuple[str, ...]:
        """The :attr:`optional_env` names to pass on this host with this model.

        Narrows the list to the provider mode in use (Claude Code passes the
        AWS keys only with ``CLAUDE_CODE_USE_BEDROCK`` on).
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

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """Optional: what the agent did, step by step, read from its logs; ``None``: unknown.

        Asked after :meth:`outcome`, with the same arguments. KSI sets the
        totals to the outcome's usage, bounds it and writes it as the
        attempt's ``trajectory.json`` (ATIF); build it with
        :class:`ksi.trajectories.TrajectoryBuilder`. A plugin that raises
        here costs the trajectory its steps (the file then holds the prompt
        and the error), never the attempt.
        """
        ...

    def missing_credentials(self, env: Mapping[str, str]) -> list[str]:
        """What keeps the agent from authenticating ("one of these keys, or a login file").

        Checked with the host environment before a run starts; empty when all is well.
        """
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

    def for_host_grading(self, *, isolation: str, pass_env: Sequence[str]) -> Self:
        """This evaluator set up to grade on the host with ``isolation`` and ``pass_env``.

        ``isolation`` is ``"none"`` or ``"sandbox"`` (``--eval-isolation``, decided
        once per run); ``pass_env`` the host variables the grading command may
        see (``--eval-env``). Called before a run starts, so a problem with
        either stops it then (the ``command`` evaluator's does).
        """
        ...


@runtime_checkable
class GivesFeedback(Protocol):
    """Optional for an evaluator: more than one round of work per attempt, with feedback.

    Aider's benchmark gives the agent a second try after showing it the failing
    tests' output; an evaluator with ``rounds > 1`` asks KSI's runner for the
    same. After each round but the last, while the attempt's environment is
    still up (the agent's processes have ended), the runner captures
    ``repo/`` and grades that capture as it grades any attempt; a round that
    earns full marks, or cannot be scored, ends the attempt early. Otherwise
    :meth:`feedback` writes the next round's prompt and the agent runs again
    in the same workspace (a new agent process: a CLI agent starts a new
    session). The last round's grade is the attempt's score; the earlier
    rounds are in the record's ``rounds``, their files under
    ``<attempt>/rounds/<n>/``.
    """

    @property
    def rounds(self) -> int:
        """How many times the agent may work on one attempt (1: once, as usual)."""
        ...

    def feedback(self, task: TaskSpec, result: EvalResult) -> str | None:
        """The next round's prompt after a round graded ``result``; ``None`` ends the attempt."""
        ...


class Executor(Protocol):
    """Moves attempt jobs to where they run, and their outcomes back.

    The driver (:mod:`ksi.runs.driver`) calls :meth:`start` once, then
    :meth:`submit` at most ``concurrency`` jobs at a time (it keeps the
    in-flight window itself, so a 10,000-task run never holds 10,000 jobs),
    reads :meth:`as_completed`, submits more, and finally :meth:`shutdown`.
    A job is a frozen, picklable :class:`ksi.attempt.job.AttemptJob`; running
    it is :func:`ksi.attempt.execute.run_job` (which calls
    :func:`ksi.attempt.execute.execute_attempt`), in any process or on any
    machine. An executor never writes the journal and never retries. It
    hands back the record the job returned, unchanged, unless it ran the job
    outside the run directory (ksi-ray on another node runs it in the node's
    scratch directory): it then puts the attempt's files in the run directory
    and moves the record's paths there, so the record reads as a local one.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]

    def start(self, concurrency: int) -> None:
        """Get ready to run up to ``concurrency`` jobs at once (threads, workers...)."""
        ...

    def submit(self, job: AttemptJob) -> None:
        """Start ``job`` (or queue it); return at once."""
        ...

    def as_completed(self, timeout: float | None = None) -> Iterator[JobOutcome]:
        """Yield the outcome of each submitted job as it finishes.

        Returns when no submitted job is outstanding, or when ``timeout``
        seconds pass with none finishing (the driver then starts a retry that
        has waited out its backoff). Calling it again continues with the jobs
        still outstanding. A job whose execution raised, or whose worker died,
        is an outcome with ``error`` set, never an exception here.
        """
        ...

    def cancel(self) -> None:
        """Ctrl-C: start nothing new and stop every running job, wherever it runs.

        In this process that is :func:`ksi.attempt.cancel.cancel_session` for
        the jobs' ``session_id``; a remote executor must make the same call in
        every process that runs the session's jobs. Outcomes of cancelled jobs
        still arrive through :meth:`as_completed` (the driver discards them).
        """
        ...

    def shutdown(self) -> None:
        """Release threads, processes or connections; called once, after the last outcome."""
        ...


class Strategy(Protocol):
    """Plans each generation of a run: which tasks it runs, or that the run stops.

    Hold-out tasks (``--holdout-task-ids``) are never in the request: they run
    in every generation a strategy plans. See docs/generations.md.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]

    def plan(self, request: PlanRequest) -> Sequence[str]:
        """The ids of the tasks generation ``request.generation`` runs (``--attempts`` each).

        An empty answer stops the run before that generation. Called once per
        generation: a resume reads the recorded plan, never asks again.
        """
        ...


class Distiller(Protocol):
    """Turns a generation's scored attempts into notes for the next generation.

    It gets evidence KSI built from **scored** attempts only (never unscored
    ones, never hold-out tasks) and the notes before it, and returns notes
    that each cite the attempt ids they came from. If it raises, or returns
    notes KSI cannot use, the generation falls back to the ``evidence``
    distiller's notes and the run says so.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    description: ClassVar[str]

    def distill(self, request: DistillRequest) -> DistillResult:
        """The notes for generation ``request.generation + 1`` onwards."""
        ...

    def preflight(self) -> list[str]:
        """What keeps it from distilling, checked before a run's first attempt (optional).

        Called once per session of a run that distils (not for ``--dry-run``, nor
        for a run of one generation or ``--knowledge none``); each problem stops
        the run before anything starts (exit code 2): a missing key, an endpoint
        that refuses it. Empty when ready.
        """
        ...


# -- the defaults of the optional members --------------------------------------
#
# One small base class per kind. A component may subclass it (the built-ins
# do) and then only writes what differs; ``ksi.kinds`` reads the optional
# members off these classes, so adding a default here makes that member
# optional everywhere.


class _Listed:
    """What every kind's listings read besides the required ``name``."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""


class TaskSourceBase(_Listed):
    """Defaults of :class:`TaskSource`'s optional members: no file suffixes, no directories."""

    file_suffixes: ClassVar[tuple[str, ...]] = ()
    reads_directories: ClassVar[bool] = False


class EvaluatorBase(_Listed):
    """Defaults of :class:`Evaluator`'s optional members: grades on the host, as it is."""

    grades_in: ClassVar[Literal["host", "environment"]] = "host"

    def for_host_grading(self, *, isolation: str, pass_env: Sequence[str]) -> Self:
        """Itself: an evaluator that runs no command of KSI's takes no host variables."""
        if pass_env:
            raise UserInputError(
                f"--eval-env: evaluator {self.name!r} does not take host variables from KSI; "
                "drop --eval-env (or see that evaluator's own options)"
            )
        return self


class AgentBase(_Listed):
    """Defaults of :class:`Agent`'s optional members: an agent that needs nothing of the host."""

    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()
    credential_env: ClassVar[tuple[str, ...]] = ()
    base_url: str = ""

    def check_tasks(self, tasks: Sequence[TaskSpec]) -> list[str]:
        """No task it cannot attempt."""
        return []

    def missing_credentials(self, env: Mapping[str, str]) -> list[str]:
        """Nothing missing (its ``required_env`` is checked apart)."""
        return []

    def optional_env_for(self, host_env: Mapping[str, str], model: str | None) -> tuple[str, ...]:
        """The whole :attr:`optional_env`, whatever the host and model."""
        return tuple(self.optional_env)

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """None: the agent's logs say nothing KSI can read step by step."""
        return None


class EnvironmentBase(_Listed):
    """Defaults of :class:`Environment`'s optional members: not said to isolate.

    An environment that does not say whether it keeps the agent off the host
    is not trusted to: taking it as isolating would switch protections off
    (an agent's own sandbox, the credential warning) on a word never given.
    """

    isolates_agent: ClassVar[bool | None] = None
    #: Whether the agent's processes can run the host's programs (KSI's own Python among
    #: them), as ``local`` and ``sandbox`` can and a container cannot: the knowledge
    #: tools' MCP server is KSI's Python, started by the agent's CLI.
    runs_host_programs: ClassVar[bool] = False

    def credential_warning(self, agent: str, names: Sequence[str]) -> str | None:
        """The warning of an environment that does not say it isolates (``local`` words
        its own; one that isolates is never asked)."""
        name = getattr(self, "name", type(self).__name__)
        return (
            f"environment {name!r} does not say it keeps agent {agent!r} off the host "
            f"(isolates_agent), so KSI takes it as not isolating: the {', '.join(names)} "
            "it is given may be within reach of anything the agent runs; use --environment "
            "sandbox or docker to keep them out of its reach"
        )

    def endpoint_warning(self, agent: str, url: str) -> str | None:
        """No warning: every URL the host reaches is reachable."""
        return None


class ExecutorBase(_Listed):
    """Defaults of :class:`Executor`'s optional members (its listing's)."""


class StrategyBase(_Listed):
    """Defaults of :class:`Strategy`'s optional members (its listing's)."""


class DistillerBase(_Listed):
    """Defaults of :class:`Distiller`'s optional members: nothing to check before a run."""

    def preflight(self) -> list[str]:
        """Ready: a distiller that needs nothing outside the run."""
        return []
