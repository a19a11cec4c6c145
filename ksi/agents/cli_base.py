"""What every coding-agent CLI plugin shares.

A CLI agent is an attrs class (its fields are the user's ``--agent-option``
keys) that subclasses :class:`CliAgent` and supplies four things: the argv
its CLI documents for a non-interactive run, the credentials it accepts,
a parser for its machine-readable output, and install/doc metadata for
``ksi agents`` and ``ksi doctor``. The base class does the rest the same way
for every CLI: the prompt file, the long-prompt fallback, the credential
check before a run, and turning an exit status plus parsed output into an
:class:`~ksi.interfaces.AgentOutcome`.

Usage convention (one meaning for every agent, so totals add up):
``input_tokens`` are *uncached* input tokens; ``cache_read_tokens`` and
``cache_write_tokens`` are the cached ones; total input is their sum.
``output_tokens`` include reasoning/thinking tokens. ``cost_usd`` is only
set when the CLI reports it; a parser never guesses one. When it is missing,
KSI prices the tokens after the parser (:mod:`ksi.pricing`, marked
``cost_estimated``), and a reported cost is never replaced. ``turns`` is the
number of model calls/steps the CLI reports.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.agents.builtin import PROMPT_ENV_MAX_BYTES, prompt_path, write_prompt
from ksi.agents.errors import classify_text, first_line
from ksi.agents.tested_versions import version_in
from ksi.connection import connection_failure
from ksi.interfaces import (
    AgentBase,
    AgentContext,
    AgentOutcome,
    Endpoint,
    ExecResult,
    Invocation,
    McpServer,
    Usage,
)
from ksi.models import AgentStatus, TaskSpec
from ksi.proc import read_tail

#: Linux refuses a single argv string longer than MAX_ARG_STRLEN (128 KiB);
#: prompts above this many bytes go through stdin or the prompt file instead.
PROMPT_ARG_LIMIT = PROMPT_ENV_MAX_BYTES

#: What an agent's Amazon Bedrock mode needs from the host (claude-code, opencode): passed
#: only while that mode is on (see each agent's ``mode_env`` / ``model_env``).
AWS_BEDROCK_ENV = (
    "AWS_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
)

#: For CLIs built on litellm (mini-swe-agent, aider): litellm otherwise downloads its model
#: price list from GitHub (raw.githubusercontent.com) each time it is imported, an extra
#: start-up call to a host nobody configured, which fails (after a timeout) where only the
#: provider is reachable. Its own switch makes it read the copy bundled with the package.
LITELLM_OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}

#: The API host of each provider a ``provider/model`` name (litellm's, OpenCode's) may name.
PROVIDER_API_HOSTS = {
    "anthropic": "api.anthropic.com",
    "openai": "api.openai.com",
    "gemini": "generativelanguage.googleapis.com",
    "google": "generativelanguage.googleapis.com",
    "openrouter": "openrouter.ai",
    "groq": "api.groq.com",
    "mistral": "api.mistral.ai",
    "deepseek": "api.deepseek.com",
    "xai": "api.x.ai",
}
#: A bare model name's provider, by the name's start (as litellm guesses it).
_MODEL_FAMILIES = (
    ("claude", "anthropic"),
    ("gpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("codex", "openai"),
    ("gemini", "gemini"),
)


def model_api_host(model: str | None) -> str:
    """The provider API host a ``provider/model`` (or a well-known bare) name is served from.

    Empty when the name says nothing KSI knows (a sandboxed agent then
    declares no endpoint; its ``base_url`` option or ``network=host`` helps).
    """
    if not model:
        return ""
    provider, slash, _ = model.partition("/")
    if slash:
        return PROVIDER_API_HOSTS.get(provider.lower(), "")
    return next(
        (PROVIDER_API_HOSTS[p] for start, p in _MODEL_FAMILIES if model.lower().startswith(start)),
        "",
    )


#: HTTP statuses a CLI may retry until KSI's timeout, and what such an attempt is.
_RETRIED_STATUS = {
    401: AgentStatus.AUTH_ERROR,
    403: AgentStatus.AUTH_ERROR,
    429: AgentStatus.RATE_LIMITED,
    503: AgentStatus.RATE_LIMITED,
    529: AgentStatus.RATE_LIMITED,
}

#: How much of each log the outcome reads for error text.
_TAIL_BYTES = 16_384
#: Largest stdout a parser reads whole (JSON outputs); bigger logs are read
#: line by line, which every JSONL parser here supports.
_MAX_JSON_BYTES = 64 * 1024 * 1024


@attrs.frozen
class Parsed:
    """What an agent's own output says about the run."""

    usage: Usage = attrs.field(factory=Usage)
    final_message: str = ""
    #: The error the CLI reported in its output (empty when none).
    error: str = ""
    #: A status the output states outright (e.g. a turn limit reached);
    #: ``None`` leaves it to the exit code and the error text.
    status: str | None = None
    #: True when the output says the run succeeded (overrides a stray error line).
    succeeded: bool = False
    #: The HTTP status of the last failed API call the CLI was retrying, when its
    #: output shows one: a run cut off by KSI's timeout while the CLI retried a 401
    #: or a 429 failed for that reason, not for being slow.
    retrying_status: int | None = None
    #: How many tool calls (commands, edits) the agent made, and, when its own sandbox
    #: or permission layer refused every one of them, that refusal in the CLI's words
    #: ("" when it made none or one ran): such an agent never worked on the task, and
    #: its score would only say that its tools were off.
    tool_calls: int = 0
    refusal: str = ""


@attrs.frozen
class CredentialCheck:
    """Whether an agent can authenticate, for ``ksi agents`` and ``ksi doctor``."""

    ok: bool
    #: The variables that are set (names only, never values).
    found: tuple[str, ...]
    #: A login file that satisfies the CLI instead of a variable, when found.
    login_file: str | None
    #: What to do when not ok.
    hint: str


def split_args(value: str) -> list[str]:
    """``extra_args`` option: shell-style words (quotes respected)."""
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise ValueError(f"extra_args {value!r} is not valid shell quoting: {exc}") from exc


def _check_extra_args(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    split_args(value)


def extra_args_field() -> Any:
    """The ``extra_args`` option every CLI agent has: flags appended verbatim."""
    return attrs.field(default="", validator=[attrs.validators.instance_of(str), _check_extra_args])


def _check_base_url(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a string")
    if value and not value.startswith(("http://", "https://")):
        raise ValueError(
            f"{attribute.name} {value!r} is not an http(s) URL; "
            "give the provider endpoint, e.g. base_url=http://127.0.0.1:4000"
        )


def base_url_field() -> Any:
    """The ``base_url`` option: the provider endpoint (a gateway, proxy or local model server).

    Each agent maps it to its CLI's own mechanism (a variable, a ``-c``
    override, a settings file); empty means the CLI's default endpoint.
    """
    return attrs.field(default="", validator=_check_base_url)


def choice_field(default: str, choices: Sequence[str]) -> Any:
    """A string option restricted to ``choices`` (``""`` meaning "CLI default" when listed)."""
    return attrs.field(default=default, validator=attrs.validators.in_(tuple(choices)))


def positive_int_or_none() -> Any:
    return attrs.field(
        default=None,
        validator=attrs.validators.optional(
            [attrs.validators.instance_of(int), attrs.validators.gt(0)]
        ),
    )


def json_lines(path: Path | str) -> Iterator[dict[str, Any]]:
    """Every JSON object line of a log; other lines (banners, warnings) are skipped."""
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 (generator)
    except OSError:
        return
    with fh:
        for line in fh:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                yield obj


def read_text(path: Path | str, limit: int = _MAX_JSON_BYTES) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


def as_int(value: Any) -> int:
    """A token count from JSON; anything that is not a number counts as 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float):
        return max(int(value), 0)
    return 0


def as_exit_code(value: Any) -> int | None:
    """An exit status from JSON (negative for a signal), or ``None`` when it is not an int."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_dict(value: Any) -> dict[str, Any]:
    """A JSON object from untrusted output, or ``{}`` when it is anything else."""
    return value if isinstance(value, dict) else {}


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def switch_is_on(value: str | None) -> bool:
    """Whether a mode switch variable is on: set, and not empty/0/false/no/off."""
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


class CliAgent(AgentBase):
    """Base of the built-in coding-agent CLI plugins (see the module docstring)."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str]
    #: The executable KSI runs.
    binary: ClassVar[str]
    #: The command that installs ``binary``.
    install_command: ClassVar[str]
    #: What makes ``binary`` print its version (``ksi doctor``, ``ksi agents``).
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    #: The documentation the invocation follows.
    docs_url: ClassVar[str]
    #: Variables that must all be set (rare: most CLIs accept one of several).
    required_env: ClassVar[tuple[str, ...]] = ()
    #: Any one of these authenticates the CLI.
    credential_env: ClassVar[tuple[str, ...]] = ()
    #: Files under ``$HOME`` left by the CLI's own login command; any one of
    #: them authenticates it too (works where the agent sees the host's home).
    login_files: ClassVar[tuple[str, ...]] = ()
    #: How to log in without a variable, for messages.
    login_hint: ClassVar[str] = ""
    #: Further variables passed through when set (base URLs, provider switches).
    extra_env: ClassVar[tuple[str, ...]] = ()
    #: Variables only a provider *mode* uses, keyed by the variable that switches
    #: the mode on (Claude Code's ``CLAUDE_CODE_USE_BEDROCK``: the AWS keys). They
    #: are passed only while their switch is on, so a cloud key exported for
    #: something else never reaches an agent that will not use it.
    mode_env: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: The same, keyed by a ``--model`` prefix (OpenCode's ``amazon-bedrock/``).
    model_env: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: The provider API host (port 443) the CLI talks to without a ``base_url``;
    #: empty when the ``--model`` name says (:meth:`endpoints`).
    api_host: ClassVar[str] = ""
    #: A trajectory file the CLI writes under ``<workspace>/.ksi/``, copied into
    #: the attempt directory by :meth:`outcome` (empty: stdout is the trajectory).
    trajectory_file: ClassVar[str] = ""
    #: Whether the CLI can start the attempt's MCP servers (:attr:`AgentContext.mcp_servers`,
    #: the knowledge tools); one that can writes them into its own per-attempt configuration.
    speaks_mcp: ClassVar[bool] = False

    # attrs subclasses define: extra_args: str

    # -- the environment -------------------------------------------------
    @classmethod
    def env_names(cls) -> tuple[str, ...]:
        """Every variable this agent may receive from the host."""
        names = [*cls.required_env, *cls.credential_env, *cls.extra_env]
        for gated in (*cls.mode_env.values(), *cls.model_env.values()):
            names.extend(gated)
        return tuple(dict.fromkeys(names))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The scrubbed environment passes required_env and optional_env only;
        # credentials are "one of", so they travel as optional and are checked
        # by missing_credentials() before the run.
        if "optional_env" not in cls.__dict__:
            cls.optional_env = tuple(n for n in cls.env_names() if n not in cls.required_env)

    optional_env: ClassVar[tuple[str, ...]] = ()

    def optional_env_for(self, host_env: Mapping[str, str], model: str | None) -> tuple[str, ...]:
        """The ``optional_env`` names to pass for this host and model: a mode's only when on."""
        gated = {n for names in (*self.mode_env.values(), *self.model_env.values()) for n in names}
        on: set[str] = set()
        for switch, names in self.mode_env.items():
            if switch_is_on(host_env.get(switch)):
                on.update(names)
        for prefix, names in self.model_env.items():
            if model and model.startswith(prefix):
                on.update(names)
        return tuple(n for n in self.optional_env if n not in gated or n in on)

    @classmethod
    def check_credentials(cls, env: Mapping[str, str], home: Path | None = None) -> CredentialCheck:
        """Which credentials are available in ``env`` (and the login files under ``home``)."""
        found = tuple(n for n in cls.credential_env if env.get(n, "").strip())
        missing_required = [n for n in cls.required_env if not env.get(n, "").strip()]
        login = None
        if home is None:
            home_var = env.get("HOME")
            home = Path(home_var) if home_var else None
        if home is not None:
            for rel in cls.login_files:
                if (home / rel).is_file():
                    login = str(home / rel)
                    break
        has_cred = not cls.credential_env or bool(found) or login is not None
        ok = has_cred and not missing_required
        hints = []
        if missing_required:
            hints.append("set " + " and ".join(missing_required))
        if not has_cred:
            choices = " or ".join(cls.credential_env)
            hint = f"set {choices}" if len(cls.credential_env) < 2 else f"set one of {choices}"
            if cls.login_hint:
                hint += f" (or {cls.login_hint})"
            hints.append(hint)
        return CredentialCheck(ok, found, login, "; ".join(hints))

    def missing_credentials(self, env: Mapping[str, str], home: Path | None = None) -> list[str]:
        """Problems that stop this agent from authenticating; empty when it can.

        The runner calls this with the host environment (``os.environ``) before
        the first attempt and stops with a :class:`ksi.errors.UserInputError`
        listing the problems when any is returned.
        """
        check = self.check_credentials(env, home)
        if check.ok:
            return []
        return [f"agent {self.name!r} has no credentials: {check.hint}"]

    # -- the Agent protocol ----------------------------------------------
    def check_tasks(self, tasks: Sequence[TaskSpec]) -> list[str]:
        return []

    def setup(self, ctx: AgentContext) -> None:
        """Write the prompt file (every CLI can fall back to it); drop a stale trajectory."""
        write_prompt(ctx)
        if self.trajectory_file:
            (ctx.host_workspace / ".ksi" / self.trajectory_file).unlink(missing_ok=True)

    def invocation(self, ctx: AgentContext) -> Invocation | None:
        argv, stdin = self.command(ctx)
        extra = split_args(str(getattr(self, "extra_args", "")))
        argv = [*argv, *extra, *self.tail_args(ctx)]
        return Invocation(
            argv=tuple(argv),
            env=self.process_env(ctx),
            stdin=stdin,
            cwd=".",
            endpoints=self.endpoints(ctx),
            programs=tuple(s.command for s in self.mcp_servers(ctx)),
        )

    def mcp_servers(self, ctx: AgentContext) -> tuple[McpServer, ...]:
        """The attempt's MCP servers this CLI is configured with (none unless it speaks MCP)."""
        return ctx.mcp_servers if self.speaks_mcp else ()

    def endpoints(self, ctx: AgentContext) -> tuple[Endpoint, ...]:
        """Where the CLI's model calls go: ``base_url``, else its provider's API on port 443.

        The one place a CLI agent declares its network needs; the ``sandbox``
        and ``docker`` environments let it reach these and nothing else.
        """
        base_url = str(getattr(self, "base_url", "") or "")
        if base_url:
            return (Endpoint.from_url(base_url),)
        host = self.api_host or model_api_host(ctx.model)
        return (Endpoint(host, 443),) if host else ()

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        """The argv (without ``extra_args``) and the stdin text for this attempt."""
        raise NotImplementedError

    def tail_args(self, ctx: AgentContext) -> list[str]:
        """Arguments that must come after ``extra_args`` (a positional prompt, ``-``)."""
        return []

    def process_env(self, ctx: AgentContext) -> dict[str, str]:
        """Variables the CLI needs set for a non-interactive run (no credentials)."""
        return {}

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        """Read usage, final message and reported errors from the CLI's output."""
        raise NotImplementedError

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        """Classify the run: timeout, spawn failure, reported errors, exit code."""
        if result is None:
            return AgentOutcome(
                status=AgentStatus.CRASHED, error=f"{self.name}: the agent process never ran"
            )
        self._keep_trajectory(ctx)
        if result.spawn_error:
            return AgentOutcome(
                status=AgentStatus.CRASHED,
                error=f"could not start {self.binary!r}: {result.spawn_error}; "
                f"install it with: {self.install_command}",
            )
        try:
            parsed = self.parse(ctx, result)
        except Exception as exc:  # a parser bug must not lose the attempt
            parsed = Parsed(error=f"KSI could not parse {self.name} output: {exc}")
        fix = self.refusal_fix(ctx, result, parsed.refusal) if parsed.refusal else ""
        return parsed_outcome(
            self.name,
            self.binary,
            result,
            parsed,
            endpoint=self.endpoint_text(ctx),
            refusal_fix=fix,
        )

    def endpoint_text(self, ctx: AgentContext) -> str:
        """Where the CLI's model calls go, as a connection error names it."""
        base_url = str(getattr(self, "base_url", "") or "")
        if base_url:
            return f"{base_url} (its base_url)"
        return ", ".join(f"{e.host}:{e.port}" for e in self.endpoints(ctx))

    def refusal_fix(self, ctx: AgentContext, result: ExecResult, refusal: str) -> str:
        """How to let the agent's tools run, for a ``tools_refused`` attempt ("" : unknown)."""
        return ""

    def _keep_trajectory(self, ctx: AgentContext) -> None:
        if self.trajectory_file:
            keep_ksi_file(ctx, self.trajectory_file)

    # -- helpers for subclasses -----------------------------------------
    #: The prompt file as the agent's process sees it.
    prompt_path = staticmethod(prompt_path)

    @staticmethod
    def fits_argv(prompt: str) -> bool:
        return len(prompt.encode("utf-8")) <= PROMPT_ARG_LIMIT

    def trajectory_path(self, ctx: AgentContext) -> str:
        return ctx.workspace_path.rstrip("/") + "/.ksi/" + self.trajectory_file

    @staticmethod
    def model_flag(ctx: AgentContext, flag: str) -> list[str]:
        return [flag, ctx.model] if ctx.model else []


def keep_ksi_file(ctx: AgentContext, name: str) -> None:
    """Copy ``<workspace>/.ksi/NAME``, a log the agent wrote, into the attempt directory.

    The workspace is wiped after capture; the attempt directory is what stays.
    """
    src = ctx.host_workspace / ".ksi" / name
    if src.is_file():
        ctx.attempt_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, ctx.attempt_dir / name)


def parsed_outcome(
    name: str,
    binary: str,
    result: ExecResult,
    parsed: Parsed,
    *,
    endpoint: str = "",
    refusal_fix: str = "",
) -> AgentOutcome:
    """How a process that ran ended, from its exit status and what its output said.

    Shared by every agent that reads its process's output into a :class:`Parsed`
    (the CLI agents, ``acp``), so a timeout, a retried HTTP status, a reported
    error and an exit code mean the same for all of them. ``endpoint`` (where its
    model calls go) is named by a connection error; ``refusal_fix`` (how to let its
    tools run) by a ``tools_refused`` one: every tool call refused is no score of
    the work, whatever the process said after.
    """
    stderr_tail = read_tail(result.stderr_path, _TAIL_BYTES) if result.stderr_path else ""
    if parsed.refusal:
        error = (
            f"{name}'s own sandbox or permission layer refused every tool call it made "
            f"({parsed.tool_calls}): {first_line(parsed.refusal, 200)}"
        )
        return AgentOutcome(
            AgentStatus.TOOLS_REFUSED,
            parsed.usage,
            parsed.final_message,
            f"{error}; {refusal_fix}" if refusal_fix else error,
        )
    if result.timed_out:
        error = f"{name} timed out after {result.duration_sec:.0f}s"
        why = _RETRIED_STATUS.get(parsed.retrying_status or 0)
        if why is not None:
            error += f" while retrying HTTP {parsed.retrying_status} ({why})"
        elif classify_text([parsed.error]) == AgentStatus.CONNECTION_ERROR:
            # Still retrying a connection at the time limit: it never reached its model.
            why = AgentStatus.CONNECTION_ERROR
            error = unreachable(endpoint, f"{error} while retrying: {parsed.error}")
        return AgentOutcome(
            why or AgentStatus.TIMEOUT, parsed.usage, parsed.final_message, first_line(error)
        )
    failed = result.exit_code != 0 or bool(parsed.error) or parsed.status is not None
    if parsed.succeeded and result.exit_code == 0 and parsed.status is None:
        failed = False
    if not failed:
        return AgentOutcome(AgentStatus.COMPLETED, parsed.usage, parsed.final_message, "")
    status = parsed.status or classify_text([parsed.error, stderr_tail]) or AgentStatus.CRASHED
    error = parsed.error or stderr_tail.strip() or (f"{binary} exited with code {result.exit_code}")
    if result.exit_code not in (0, None):
        error = f"exit code {result.exit_code}: {error}"
    if status == AgentStatus.CONNECTION_ERROR:
        error = unreachable(endpoint, error)
    return AgentOutcome(status, parsed.usage, parsed.final_message, first_line(error))


def unreachable(endpoint: str, error: str) -> str:
    """``error`` saying first where the agent could not connect, and what failed."""
    what = connection_failure(error) or "the connection failed"
    return f"could not connect to {endpoint or 'its model endpoint'}: {what}; {error}"


def binary_version(
    binary: str, timeout: float = 30.0, args: Sequence[str] = ("--version",)
) -> tuple[str | None, str | None]:
    """(path on PATH, first line of ``binary args`` that names a version); ``None`` when unknown."""
    path = shutil.which(binary)
    if path is None:
        return None, None
    try:
        proc = subprocess.run(
            [path, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return path, None
    lines = [ln.strip() for ln in (proc.stdout + "\n" + proc.stderr).splitlines() if ln.strip()]
    with_version = [ln for ln in lines if version_in(ln)]
    first = (with_version or lines)[:1]
    return path, (first[0] if first else None)
