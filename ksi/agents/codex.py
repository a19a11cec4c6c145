"""OpenAI Codex CLI (``codex exec``) as a KSI agent.

Invocation follows the non-interactive documentation
(https://developers.openai.com/codex/noninteractive) as the tested CLI
(``ksi/agents/tested_versions.py``) really behaves: ``codex exec --json``
reads the prompt from stdin when it is given as ``-`` (no argument-length
limit) and prints one JSON event per line (``thread.started``,
``turn.started``, ``item.completed``, ``turn.completed`` with ``usage``,
``turn.failed``, ``error``). ``exec`` never asks for approval; ``--sandbox``
says what the commands Codex runs may touch (``--full-auto`` is gone: the
current CLI rejects it). ``--skip-git-repo-check`` because a task's workspace
need not be a git repository.

Credentials: ``codex exec`` reads ``CODEX_API_KEY`` or the login file
``$CODEX_HOME/auth.json`` (``codex login``); it ignores ``OPENAI_API_KEY`` and
``OPENAI_BASE_URL``. The ``base_url`` option therefore defines a model
provider of KSI's own with ``-c`` overrides (``model_providers.ksi``: that
URL, the ``CODEX_API_KEY`` key, the Responses API over plain HTTPS): a proxy
or local server gets no WebSocket attempts Codex would make (and retry five
times) at OpenAI's own endpoint.

Usage: ``turn.completed`` sums every model call of the turn (``input_tokens``
*including* ``cached_input_tokens`` and ``cache_write_input_tokens``), so
turns and a killed run's usage come from Codex's session log instead
(``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*-<thread id>.jsonl``): one
``token_usage_record`` per model response. KSI copies it into the attempt
directory as ``codex.rollout.jsonl``. Codex reports no cost.

Trajectory (:meth:`CodexAgent.trajectory`): from the session log, one agent
step per model response (its reasoning summary, messages and tool calls with
the arguments as the model sent them; the ``token_usage_record`` that ends
it gives its usage), each call's output from its ``function_call_output``
and its exit code from the command's ``item_completed`` event. Without a
session log (a CLI that kept none where KSI looks), the ``exec --json``
items instead: each command with its output and exit code, each message, but
no usage per call and no response boundaries (one step per item).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.agents.cli_base import (
    CliAgent,
    Parsed,
    as_dict,
    as_exit_code,
    as_int,
    base_url_field,
    choice_field,
    extra_args_field,
    json_lines,
)
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, ExecResult, McpServer, Usage
from ksi.proc import read_tail
from ksi.trajectories import Trajectory, TrajectoryBuilder, arguments, iso_time

#: ``sandbox`` option -> Codex flags. ``danger-full-access`` is for
#: environments that already isolate the agent (docker, sandbox) where Codex's
#: own Landlock/bubblewrap sandbox may not be available (inside KSI's bubblewrap
#: it cannot nest, and every command fails without a word). ``auto`` picks it
#: there, and ``workspace-write`` where the agent is not isolated (``local``).
SANDBOX_FLAGS = {
    "workspace-write": ["--sandbox", "workspace-write"],
    "read-only": ["--sandbox", "read-only"],
    "danger-full-access": ["--dangerously-bypass-approvals-and-sandbox"],
}
REASONING_EFFORTS = ("", "minimal", "low", "medium", "high", "xhigh")
#: The model provider id the ``base_url`` option defines.
PROVIDER_ID = "ksi"
#: How long Codex waits for an MCP server to start before its first turn.
MCP_STARTUP_SEC = 60
#: The session log KSI copies into the attempt directory.
ROLLOUT_COPY = "codex.rollout.jsonl"
#: How a tool's output in the session log states the command's exit status.
_EXITED = re.compile(r"(?:Process exited with code|Exit code:?) (-?\d+)")
#: The tools that run a command or edit files (through Codex's sandbox, when it has one).
COMMAND_TOOLS = frozenset(
    {"exec_command", "shell", "shell_command", "local_shell", "container.exec", "apply_patch"}
)
#: What a command's output says when Codex's own sandbox could not start it: bubblewrap's
#: own errors ("bwrap: execvp codex-linux-sandbox: No such file or directory" when the
#: helper is missing, "bwrap: setting up uid map: ..." inside another sandbox), or
#: Codex's sandbox helper and Landlock failing.
SANDBOX_FAILED = re.compile(
    r"^bwrap: .*$|^.*codex-linux-sandbox.*$|^.*(?:LandlockRestrict|error running landlock).*$",
    re.MULTILINE,
)
#: What Codex prints when its home is under the temp dir (and so it makes no helpers).
HELPERS_REFUSED = "Refusing to create helper binaries under temporary dir"
#: The temp dir KSI gives Codex in that case, in the workspace (``.ksi/``, never graded).
OWN_TMPDIR = ".ksi/tmp"


def provider_overrides(base_url: str) -> list[str]:
    """``-c`` overrides for a Responses API endpoint at ``base_url`` keyed by ``CODEX_API_KEY``."""
    table = (
        f"{{name={json.dumps('KSI base_url')}, base_url={json.dumps(base_url)}, "
        'env_key="CODEX_API_KEY", wire_api="responses", supports_websockets=false}'
    )
    return ["-c", f"model_providers.{PROVIDER_ID}={table}", "-c", f"model_provider={PROVIDER_ID}"]


def mcp_overrides(server: McpServer) -> list[str]:
    """``-c`` overrides that give this invocation alone an MCP server (``mcp_servers.<name>``
    of config.toml): the user's ``$CODEX_HOME`` is never written."""
    key = f"mcp_servers.{server.name}"
    return [
        "-c",
        f"{key}.command={json.dumps(server.command)}",
        "-c",
        f"{key}.args=[{', '.join(json.dumps(a) for a in server.args)}]",
        # Codex's first model call otherwise need not wait for the server, whose tools
        # are then missing from it (a loaded machine is enough): "catalog" waits until its
        # tools are listed, for up to the timeout (the default 10 s is short for Python).
        "-c",
        f'{key}.startup_readiness="catalog"',
        "-c",
        f"{key}.startup_timeout_sec={MCP_STARTUP_SEC}",
    ]


def codex_homes(ctx: AgentContext, host_env: Mapping[str, str]) -> Iterator[Path]:
    """Where this attempt's Codex may have kept its sessions, as host paths.

    The sandbox and docker environments give the agent ``<workspace>/.ksi/home``
    as HOME; the local one the host's own HOME (or ``CODEX_HOME``).
    """
    yield ctx.host_workspace / ".ksi" / "home" / ".codex"
    if host_env.get("CODEX_HOME"):
        yield Path(host_env["CODEX_HOME"])
    if host_env.get("HOME"):
        yield Path(host_env["HOME"]) / ".codex"


def home_under_temp(env: Mapping[str, str]) -> bool:
    """Whether Codex, started with ``env``, would find its home under the temp dir.

    Codex keeps its helper binaries (``codex-linux-sandbox``, the launcher of
    its own sandbox, and ``apply_patch``) in its home, and refuses to make them
    when that home (``$CODEX_HOME``, else ``$HOME/.codex``) is under the temp dir
    (``$TMPDIR``, else ``/tmp``), as it is wherever HOME is under /tmp (CI,
    containers run as a user without a home): every command its sandbox runs
    then fails.
    """
    home = env.get("CODEX_HOME") or (env["HOME"] + "/.codex" if env.get("HOME") else "")
    if not home:
        return False
    temp = env.get("TMPDIR") or "/tmp"
    pairs = ((Path(home), Path(temp)), (Path(os.path.realpath(home)), Path(os.path.realpath(temp))))
    return any(h.is_relative_to(t) for h, t in pairs)


def command_outputs(stdout: Path | str, rollout: Path | None) -> list[str]:
    """What each command or edit the model asked for printed: from the session log (every
    tool call, with its output), else from ``--json``'s ``command_execution`` items."""
    if rollout is None:
        return [
            str(item.get("aggregated_output") or "")
            for item in (as_dict(e.get("item")) for e in json_lines(stdout))
            if item.get("type") == "command_execution" and item.get("status") != "in_progress"
        ]
    names: dict[str, str] = {}
    outputs: list[str] = []
    for record in json_lines(rollout):
        payload = as_dict(record.get("payload"))
        kind = payload.get("type")
        if kind in ("function_call", "custom_tool_call"):
            names[str(payload.get("call_id"))] = str(payload.get("name") or "")
        elif kind in ("function_call_output", "custom_tool_call_output"):
            if names.get(str(payload.get("call_id"))) not in COMMAND_TOOLS:
                continue
            outputs.append(_output_text(payload.get("output")))
    return outputs


def sandbox_refusal(outputs: list[str]) -> str:
    """The first sandbox failure when every command's output is one ("" otherwise)."""
    found = [SANDBOX_FAILED.search(o) for o in outputs]
    if not found or not all(found):
        return ""
    first = found[0]
    assert first is not None
    return first.group(0).strip()


def find_rollout(homes: Iterator[Path], thread_id: str) -> Path | None:
    """The session log of ``thread_id`` (``sessions/YYYY/MM/DD/rollout-*-<id>.jsonl``)."""
    if not thread_id or "/" in thread_id:
        return None
    for home in homes:
        for found in sorted((home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl")):
            return found
    return None


@attrs.frozen
class _Calls:
    """Usage summed over a session log's model responses."""

    usage: Usage
    calls: int


def rollout_usage(path: Path) -> _Calls:
    """One ``token_usage_record`` per model response: summed, and counted as turns."""
    inp = cached = written = out = 0
    responses: set[str] = set()
    for record in json_lines(path):
        if record.get("type") != "token_usage_record":
            continue
        payload = as_dict(record.get("payload"))
        usage = as_dict(payload.get("usage"))
        responses.add(str(payload.get("response_id") or len(responses)))
        inp += as_int(usage.get("input_tokens"))
        cached += as_int(usage.get("cached_input_tokens"))
        written += as_int(usage.get("cache_write_input_tokens"))
        out += as_int(usage.get("output_tokens"))
    return _Calls(_uncached(inp, cached, written, out, len(responses)), len(responses))


def _texts(content: Any) -> str:
    """The text of a session-log message's content parts (or of a reasoning summary)."""
    if isinstance(content, str):
        return content
    return "".join(
        str(p.get("text") or "") for p in content or [] if isinstance(p, dict) and p.get("text")
    )


def _output_text(output: Any) -> str:
    """A ``function_call_output``'s text: a string, or ``{"content": ...}``."""
    if isinstance(output, dict):
        output = output.get("content", output)
    return output if isinstance(output, str) else _texts(output) or json.dumps(output)


def rollout_steps(b: TrajectoryBuilder, path: Path) -> None:
    """The session log's model responses as steps (see the module docstring)."""
    exit_codes: dict[str, int] = {}
    step: int | None = None  # the response being read; None between responses
    started = False  # the prompt and Codex's own context come before the first response
    for record in json_lines(path):
        kind = record.get("type")
        payload = as_dict(record.get("payload"))
        when = iso_time(record.get("timestamp"))
        ptype = payload.get("type")
        if kind == "session_meta":
            b.session_id = str(payload.get("id") or "") or None
            b.agent_version = str(payload.get("cli_version") or "") or None
        elif kind == "event_msg" and ptype == "item_completed":
            item = as_dict(payload.get("item"))
            code = as_exit_code(item.get("exit_code"))
            if code is not None:
                exit_codes[str(item.get("id"))] = code
        elif kind == "token_usage_record":
            usage = as_dict(payload.get("usage"))
            if step is not None:
                b.set_usage(
                    _uncached(
                        as_int(usage.get("input_tokens")),
                        as_int(usage.get("cached_input_tokens")),
                        as_int(usage.get("cache_write_input_tokens")),
                        as_int(usage.get("output_tokens")),
                        1,
                    ),
                    step,
                )
            step = None
        elif kind != "response_item":
            continue
        elif ptype == "message" and payload.get("role") != "assistant":
            if started and payload.get("role") == "user":
                b.user(_texts(payload.get("content")), timestamp=when)
        elif ptype in ("function_call_output", "custom_tool_call_output"):
            call_id = str(payload.get("call_id") or "")
            text = _output_text(payload.get("output"))
            code = exit_codes.get(call_id)
            if code is None and (said := _EXITED.search(text)):
                code = int(said.group(1))
            b.result(call_id, text, exit_code=code)
        elif ptype in ("message", "reasoning", "function_call", "custom_tool_call"):
            started = True
            if step is None:
                step = b.agent_step(timestamp=when)
            if ptype == "message":
                b.say(_texts(payload.get("content")))
            elif ptype == "reasoning":
                b.think(_texts(payload.get("summary")))
            else:
                args = payload.get("arguments", payload.get("input"))
                b.call(
                    str(payload.get("call_id") or ""),
                    str(payload.get("name") or ""),
                    arguments(args) if ptype == "function_call" else {"input": args},
                )


def event_steps(b: TrajectoryBuilder, path: Path | str) -> None:
    """``codex exec --json``'s items as steps, one each (no session log to read)."""
    for event in json_lines(path):
        if event.get("type") == "thread.started":
            b.session_id = str(event.get("thread_id") or "") or None
        if event.get("type") != "item.completed":
            continue
        item = as_dict(event.get("item"))
        kind, item_id = item.get("type"), str(item.get("id") or "")
        if kind == "agent_message":
            b.agent_step(str(item.get("text") or ""))
        elif kind == "reasoning":
            b.agent_step(reasoning=str(item.get("text") or ""))
        elif kind == "command_execution":
            b.agent_step()
            b.call(item_id, "command_execution", {"command": str(item.get("command") or "")})
            b.result(
                item_id,
                str(item.get("aggregated_output") or ""),
                exit_code=as_exit_code(item.get("exit_code")),
                failed=True if item.get("status") == "failed" else None,
            )
        elif kind in ("file_change", "mcp_tool_call", "web_search"):
            b.agent_step()
            args = {k: v for k, v in item.items() if k not in ("id", "type", "status", "result")}
            b.call(item_id, str(kind), args)
            if kind == "mcp_tool_call":
                b.result(item_id, json.dumps(item.get("result") or item.get("error")))
        elif kind == "error":
            b.system(str(item.get("message") or ""))


def _uncached(inp: int, cached: int, written: int, out: int, turns: int) -> Usage:
    """Codex's ``input_tokens`` include cache reads and writes; KSI's are the rest."""
    return Usage(
        input_tokens=max(inp - cached - written, 0),
        output_tokens=out,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        turns=turns or None,
    )


@attrs.define(frozen=True)
class CodexAgent(CliAgent):
    """OpenAI's Codex CLI in exec mode."""

    name: ClassVar[str] = "codex"
    aliases: ClassVar[tuple[str, ...]] = ("codex-cli",)
    description: ClassVar[str] = "OpenAI Codex CLI (codex exec --json)"
    binary: ClassVar[str] = "codex"
    #: Where its model calls go without a ``base_url`` (the sandbox lets it reach this).
    api_host: ClassVar[str] = "api.openai.com"
    speaks_mcp: ClassVar[bool] = True
    install_command: ClassVar[str] = "npm install -g @openai/codex"
    docs_url: ClassVar[str] = "https://developers.openai.com/codex/noninteractive"
    credential_env: ClassVar[tuple[str, ...]] = ("CODEX_API_KEY",)
    login_files: ClassVar[tuple[str, ...]] = (".codex/auth.json",)
    login_hint: ClassVar[str] = "run `codex login`; codex exec ignores OPENAI_API_KEY"
    extra_env: ClassVar[tuple[str, ...]] = ("CODEX_HOME",)

    #: ``-c model_reasoning_effort=...``; empty: the model's default.
    reasoning_effort: str = choice_field("", REASONING_EFFORTS)
    #: What the commands Codex runs may touch: auto (default: danger-full-access in an
    #: environment that isolates the agent, sandbox or docker, else workspace-write),
    #: workspace-write, read-only, or danger-full-access (no Codex sandbox).
    sandbox: str = choice_field("auto", ("auto", *SANDBOX_FLAGS))
    #: ``--profile NAME``: layers ``$CODEX_HOME/NAME.config.toml`` over config.toml.
    profile: str = ""
    #: The Responses API endpoint (a proxy, gateway or local server), keyed by CODEX_API_KEY.
    base_url: str = base_url_field()
    #: More flags, shell-quoted, appended verbatim.
    extra_args: str = extra_args_field()

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        argv = [
            self.binary,
            "exec",
            "--json",
            "--skip-git-repo-check",
            *SANDBOX_FLAGS[self.sandbox_mode(ctx)],
            *self.model_flag(ctx, "--model"),
        ]
        if self.reasoning_effort:
            argv += ["-c", f"model_reasoning_effort={self.reasoning_effort}"]
        if self.base_url:
            argv += provider_overrides(self.base_url)
        if self.profile:
            argv += ["--profile", self.profile]
        for server in self.mcp_servers(ctx):
            argv += mcp_overrides(server)
        return argv, ctx.prompt

    def sandbox_mode(self, ctx: AgentContext) -> str:
        """The ``sandbox`` option, with ``auto`` decided by where the agent runs."""
        if self.sandbox != "auto":
            return self.sandbox
        return "danger-full-access" if ctx.isolated else "workspace-write"

    def tail_args(self, ctx: AgentContext) -> list[str]:
        # "-" as the prompt argument: read the prompt from stdin.
        return ["-"]

    def own_tmpdir(self, ctx: AgentContext) -> bool:
        """Whether Codex gets a temp dir of the attempt's own (:data:`OWN_TMPDIR`).

        Only where its own sandbox runs (it needs the helper binaries) and KSI
        does not isolate it (the process then sees the host's HOME and TMPDIR),
        and only when its home is under the temp dir (:func:`home_under_temp`):
        a temp dir in the workspace is outside that home, so Codex makes its
        helpers; elsewhere TMPDIR stays the user's.
        """
        return (
            self.sandbox_mode(ctx) != "danger-full-access"
            and not ctx.isolated
            and home_under_temp(os.environ)
        )

    def setup(self, ctx: AgentContext) -> None:
        super().setup(ctx)
        if self.own_tmpdir(ctx):
            (ctx.host_workspace / OWN_TMPDIR).mkdir(parents=True, exist_ok=True)

    def process_env(self, ctx: AgentContext) -> dict[str, str]:
        if self.own_tmpdir(ctx):
            return {"TMPDIR": ctx.workspace_path.rstrip("/") + "/" + OWN_TMPDIR}
        return {}

    def refusal_fix(self, ctx: AgentContext, result: ExecResult, refusal: str) -> str:
        stderr = read_tail(result.stderr_path, 16_384) if result.stderr_path else ""
        if "execvp codex-linux-sandbox" in refusal and HELPERS_REFUSED in stderr:
            return (
                "Codex made no helper binaries (its sandbox's launcher among them) because its "
                "home ($CODEX_HOME, else $HOME/.codex) is under the temp dir: set CODEX_HOME to "
                "a directory outside the temp dir, or run it in --environment sandbox or docker"
            )
        if ctx.isolated:
            return (
                "Codex's own sandbox cannot start inside the environment's isolation: leave "
                "--agent-option sandbox=auto (the default), which turns it off there"
            )
        return (
            "Codex's own sandbox (bubblewrap, user namespaces) cannot start on this machine: "
            "run it in --environment sandbox or docker, where KSI isolates it and sandbox=auto "
            "turns Codex's own off, or give --agent-option sandbox=danger-full-access"
        )

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        inp = cached = written = out = turns = 0
        message = ""
        error = ""
        thread_id = ""
        finished = False
        for event in json_lines(result.stdout_path):
            kind = event.get("type")
            if kind == "thread.started":
                thread_id = str(event.get("thread_id") or "")
            elif kind == "turn.completed":
                counts = as_dict(event.get("usage"))
                inp += as_int(counts.get("input_tokens"))
                cached += as_int(counts.get("cached_input_tokens"))
                written += as_int(counts.get("cache_write_input_tokens"))
                out += as_int(counts.get("output_tokens"))
                turns += 1
                finished = True
                error = ""
            elif kind == "item.completed":
                item = as_dict(event.get("item"))
                if item.get("type") == "agent_message":
                    message = str(item.get("text") or "")
            elif kind == "turn.failed":
                err = event.get("error") or {}
                error = str(err.get("message") if isinstance(err, dict) else err)
                finished = False
            elif kind == "error":
                error = str(event.get("message") or event)
        usage = _uncached(inp, cached, written, out, turns)
        rollout = find_rollout(codex_homes(ctx, os.environ), thread_id)
        if rollout is not None:
            ctx.attempt_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(rollout, ctx.attempt_dir / ROLLOUT_COPY)
            calls = rollout_usage(rollout)
            if calls.calls:
                usage = calls.usage
        outputs = command_outputs(result.stdout_path, rollout)
        return Parsed(
            usage=usage,
            final_message=message,
            error=error,
            succeeded=finished,
            tool_calls=len(outputs),
            refusal=sandbox_refusal(outputs),
        )

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """The session log's responses as steps, else the exec events' items."""
        if result is None or result.spawn_error or not result.stdout_path:
            return None
        b = TrajectoryBuilder(
            self.name, prompt=ctx.prompt, model=ctx.model, workspace=ctx.workspace_path
        )
        rollout = ctx.attempt_dir / ROLLOUT_COPY
        if rollout.is_file():
            rollout_steps(b, rollout)
        else:
            event_steps(b, result.stdout_path)
            b.note(
                "Read from codex exec --json (Codex's session log was not found): one step "
                "per item, no usage per model call, commands as Codex ran them."
            )
        return b.build()


@hookimpl(trylast=True)
def ksi_register_agents(register: Any) -> None:
    register(CodexAgent)
