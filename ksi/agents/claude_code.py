"""Claude Code (``claude``) as a KSI agent.

Invocation follows the headless-mode documentation
(https://docs.claude.com/en/docs/claude-code/headless and the CLI reference
https://docs.claude.com/en/docs/claude-code/cli-reference): ``claude -p``
with the prompt on stdin (no argument-length limit), ``--output-format
stream-json`` (which requires ``--verbose`` with ``-p``) so the attempt keeps
every message as JSON lines, and a permission mode that lets it edit files
and run commands without asking. The last line is the ``result`` message:
``subtype`` (``success``, ``error_max_turns``, ``error_during_execution``...),
``is_error``, ``num_turns``, ``result`` (the final text), ``total_cost_usd``
and cumulative ``usage`` (``input_tokens``, ``output_tokens``,
``cache_read_input_tokens``, ``cache_creation_input_tokens``).

An attempt cut short (timeout) has no ``result`` line. Its ``assistant`` lines
carry each message's usage as of its *start* (output 1), so KSI also passes
``--include-partial-messages``: the API's own ``message_start`` /
``message_delta`` events then appear as ``stream_event`` lines, and their
final numbers are what a timed-out attempt reports (no cost: only the
``result`` line has one).

As root (CI, containers) Claude Code refuses ``bypassPermissions`` unless
``IS_SANDBOX=1`` says it runs in a sandbox; KSI sets it with that mode, since
an attempt always runs in a workspace of its own (use the ``sandbox`` or
``docker`` environment to make that true of the rest of the machine too).
``base_url`` becomes ``ANTHROPIC_BASE_URL``.

Trajectory (:meth:`ClaudeCodeAgent.trajectory`): one agent step per API
message (its ``assistant`` lines: text, thinking, ``tool_use`` blocks with
their input), each tool's output from the ``tool_result`` block of the
``user`` line that answers it (``is_error``; a failed Bash result starts
``Exit code N``), each message's usage as its stream events end it, the CLI
version and session from the ``init`` line. Claude Code prices the run only
in the ``result`` line, so steps carry no cost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.agents.cli_base import (
    AWS_BEDROCK_ENV,
    CliAgent,
    Parsed,
    as_dict,
    as_float,
    as_int,
    base_url_field,
    choice_field,
    extra_args_field,
    json_lines,
    positive_int_or_none,
)
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, ExecResult, Usage
from ksi.models import AgentStatus
from ksi.trajectories import Trajectory, TrajectoryBuilder, arguments, iso_time

#: The attempt's MCP configuration (``--mcp-config``), relative to its workspace.
MCP_CONFIG = ".ksi/claude-mcp.json"
PERMISSION_MODES = ("bypassPermissions", "acceptEdits", "default", "plan")
#: Result subtypes that mean a limit the user set was reached.
_LIMIT_SUBTYPES = {"error_max_turns": "turn limit", "error_max_budget_usd": "budget limit"}
#: How a failed Bash result starts.
_EXIT_CODE = re.compile(r"^Exit code (-?\d+)")


def _block_text(content: Any) -> str:
    """A message's or tool result's text: a string, or its ``text`` blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "")
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _usage(raw: Any, *, cost: float | None = None, turns: int | None = None) -> Usage:
    u = raw if isinstance(raw, dict) else {}
    return Usage(
        input_tokens=as_int(u.get("input_tokens")),
        output_tokens=as_int(u.get("output_tokens")),
        cache_read_tokens=as_int(u.get("cache_read_input_tokens")),
        cache_write_tokens=as_int(u.get("cache_creation_input_tokens")),
        cost_usd=cost,
        turns=turns,
    )


def _positive_usd(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{attribute.name} must be a positive amount of USD, got {value!r}")


def _track_stream(event: dict[str, Any], current: str, per_message: dict[str, Any]) -> str:
    """Fold one raw API stream event into ``per_message``; return the current message id.

    ``message_start`` holds the input and cache counts; ``message_delta`` the
    running totals (output at least), which replace the start values.
    """
    kind = event.get("type")
    if kind == "message_start":
        message = as_dict(event.get("message"))
        current = str(message.get("id") or f"#{len(per_message)}")
        per_message[current] = dict(as_dict(message.get("usage")))
    elif kind == "message_delta" and current in per_message:
        per_message[current].update(
            {k: v for k, v in as_dict(event.get("usage")).items() if v is not None}
        )
    return current


@attrs.define(frozen=True)
class ClaudeCodeAgent(CliAgent):
    """Anthropic's Claude Code CLI in headless mode."""

    name: ClassVar[str] = "claude-code"
    aliases: ClassVar[tuple[str, ...]] = ("claude",)
    description: ClassVar[str] = "Claude Code CLI (claude -p, stream-json output)"
    binary: ClassVar[str] = "claude"
    #: Where its model calls go without a ``base_url`` (the sandbox lets it reach this).
    api_host: ClassVar[str] = "api.anthropic.com"
    speaks_mcp: ClassVar[bool] = True
    install_command: ClassVar[str] = "npm install -g @anthropic-ai/claude-code"
    docs_url: ClassVar[str] = "https://docs.claude.com/en/docs/claude-code/headless"
    credential_env: ClassVar[tuple[str, ...]] = (
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
    )
    login_files: ClassVar[tuple[str, ...]] = (".claude/.credentials.json",)
    login_hint: ClassVar[str] = "run `claude setup-token` and set CLAUDE_CODE_OAUTH_TOKEN"
    extra_env: ClassVar[tuple[str, ...]] = (
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
    )
    #: https://docs.claude.com/en/docs/claude-code/amazon-bedrock and .../google-vertex-ai
    mode_env: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "CLAUDE_CODE_USE_BEDROCK": AWS_BEDROCK_ENV,
        "CLAUDE_CODE_USE_VERTEX": (
            "ANTHROPIC_VERTEX_PROJECT_ID",
            "CLOUD_ML_REGION",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ),
    }

    #: Stop after this many agentic turns (``--max-turns``).
    max_turns: int | None = positive_int_or_none()
    #: ``--permission-mode``; ``bypassPermissions`` never asks (Claude Code
    #: refuses it when run as root outside a sandbox; use ``acceptEdits`` then).
    permission_mode: str = choice_field("bypassPermissions", PERMISSION_MODES)
    #: ``--allowedTools`` (e.g. ``"Bash,Edit,Read"``); empty: the CLI's default.
    allowed_tools: str = ""
    #: ``--disallowedTools``.
    disallowed_tools: str = ""
    #: ``--append-system-prompt``.
    append_system_prompt: str = ""
    #: Stop once the CLI's own cost estimate reaches this many USD (``--max-budget-usd``).
    max_budget_usd: float | None = attrs.field(default=None, validator=_positive_usd)
    #: ``CLAUDE_CODE_MAX_RETRIES``: how often the CLI retries a failed API call (its
    #: default, 10 with backoff, spends about 3 minutes on a bad key before it gives up).
    max_retries: int | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(
            [attrs.validators.instance_of(int), attrs.validators.ge(0)]
        ),
    )
    #: The Anthropic API endpoint (a gateway, LiteLLM proxy, local server): ``ANTHROPIC_BASE_URL``.
    base_url: str = base_url_field()
    #: More flags, shell-quoted, appended verbatim.
    extra_args: str = extra_args_field()

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        argv = [
            self.binary,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--permission-mode",
            self.permission_mode,
            *self.model_flag(ctx, "--model"),
        ]
        if self.max_turns is not None:
            argv += ["--max-turns", str(self.max_turns)]
        if self.max_budget_usd is not None:
            argv += ["--max-budget-usd", str(self.max_budget_usd)]
        servers = self.mcp_servers(ctx)
        if servers:
            # This attempt's servers only (--strict-mcp-config: none of the user's), their
            # tools allowed whatever the permission mode.
            argv += ["--mcp-config", self._mcp_config_path(ctx.workspace_path)]
            argv += ["--strict-mcp-config"]
        allowed = [self.allowed_tools] if self.allowed_tools else []
        allowed += [f"mcp__{s.name}__{tool}" for s in servers for tool in s.tools]
        if allowed:
            argv += ["--allowedTools", ",".join(allowed)]
        if self.disallowed_tools:
            argv += ["--disallowedTools", self.disallowed_tools]
        if self.append_system_prompt:
            argv += ["--append-system-prompt", self.append_system_prompt]
        return argv, ctx.prompt

    def setup(self, ctx: AgentContext) -> None:
        super().setup(ctx)
        servers = self.mcp_servers(ctx)
        if servers:
            config = {
                "mcpServers": {
                    s.name: {"type": "stdio", "command": s.command, "args": list(s.args)}
                    for s in servers
                }
            }
            path = Path(self._mcp_config_path(str(ctx.host_workspace)))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    @staticmethod
    def _mcp_config_path(workspace: str) -> str:
        """The attempt's ``--mcp-config`` file under ``workspace`` (the host's or the agent's)."""
        return workspace.rstrip("/") + "/" + MCP_CONFIG

    def process_env(self, ctx: AgentContext) -> dict[str, str]:
        # No auto-update or telemetry traffic in the middle of an attempt.
        env = {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        if self.permission_mode == "bypassPermissions":
            env["IS_SANDBOX"] = "1"  # else refused as root (see the module docstring)
        if self.base_url:
            env["ANTHROPIC_BASE_URL"] = self.base_url
        if self.max_retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(self.max_retries)
        return env

    def refusal_fix(self, ctx: AgentContext, result: ExecResult, refusal: str) -> str:
        return (
            f"its permission mode {self.permission_mode!r} asks before it runs a command or "
            "edits a file, and nobody can answer in a run: leave --agent-option "
            "permission_mode=bypassPermissions (the default), or name the tools it may use "
            "with --agent-option allowed_tools=..."
        )

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        final: dict[str, Any] | None = None
        last_text = ""
        #: Each API message's usage, by message id, in arrival order.
        per_message: dict[str, dict[str, Any]] = {}
        streamed: set[str] = set()
        current = ""
        retrying: int | None = None
        #: Each tool call's id, and what its result said.
        tool_results: dict[str, str] = {}
        for event in json_lines(result.stdout_path):
            kind = event.get("type")
            if kind == "result":
                final = event
            elif kind == "user":
                for block in as_dict(event.get("message")).get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        tool_results[str(block.get("tool_use_id"))] = _text(block.get("content"))
            elif kind == "system" and event.get("subtype") == "api_retry":
                retrying = as_int(event.get("error_status")) or None
            elif kind == "stream_event":
                current = _track_stream(as_dict(event.get("event")), current, per_message)
                if current:
                    streamed.add(current)
            elif kind == "assistant":
                msg = as_dict(event.get("message"))
                texts = [
                    b.get("text", "")
                    for b in msg.get("content") or []
                    if isinstance(b, dict) and b.get("type") == "text"
                ]
                if any(texts):
                    last_text = "".join(texts)
                for block in msg.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        tool_results.setdefault(str(block.get("id")), "")
                msg_id = str(msg.get("id") or f"#{len(per_message)}")
                if msg_id not in streamed:
                    # Every content block of one API message repeats its (start) usage.
                    per_message[msg_id] = as_dict(msg.get("usage"))
        if final is None:
            # Interrupted run (timeout, crash): add up what the messages said.
            total = Usage(turns=len(per_message) or None)
            for raw in per_message.values():
                u = _usage(raw)
                total = attrs.evolve(
                    total,
                    input_tokens=total.input_tokens + u.input_tokens,
                    output_tokens=total.output_tokens + u.output_tokens,
                    cache_read_tokens=total.cache_read_tokens + u.cache_read_tokens,
                    cache_write_tokens=total.cache_write_tokens + u.cache_write_tokens,
                )
            return Parsed(usage=total, final_message=last_text, retrying_status=retrying)
        turns = final.get("num_turns")
        usage = _usage(
            final.get("usage"),
            cost=as_float(final.get("total_cost_usd", final.get("cost_usd"))),
            turns=as_int(turns) if turns is not None else None,
        )
        text = final.get("result")
        message = text if isinstance(text, str) else last_text
        subtype = str(final.get("subtype") or "")
        denied = [
            str(d.get("tool_use_id"))
            for d in final.get("permission_denials") or []
            if isinstance(d, dict)
        ]
        refusal = ""
        if tool_results and set(tool_results) <= set(denied):
            refusal = tool_results[denied[0]] or f"{len(denied)} tool call(s) denied"
        if subtype == "success" and not final.get("is_error"):
            return Parsed(
                usage=usage,
                final_message=message,
                succeeded=True,
                tool_calls=len(tool_results),
                refusal=refusal,
            )
        if subtype in _LIMIT_SUBTYPES:
            return Parsed(
                usage=usage,
                final_message=last_text,
                error=f"Claude Code stopped: {_LIMIT_SUBTYPES[subtype]} reached ({subtype})",
                status=AgentStatus.BUDGET_EXCEEDED,
            )
        errors = final.get("errors")
        detail = message or ("; ".join(str(e) for e in errors) if isinstance(errors, list) else "")
        return Parsed(
            usage=usage,
            final_message=last_text if message == detail else message,
            error=detail if subtype == "success" else f"{subtype or 'error'}: {detail}".strip(": "),
        )

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """The stream-json lines as steps (see the module docstring)."""
        if result is None or result.spawn_error or not result.stdout_path:
            return None
        b = TrajectoryBuilder(
            self.name, prompt=ctx.prompt, model=ctx.model, workspace=ctx.workspace_path
        )
        per_message: dict[str, dict[str, Any]] = {}
        streamed: set[str] = set()
        steps: dict[str, int] = {}
        current = ""
        for event in json_lines(result.stdout_path):
            kind = event.get("type")
            when = iso_time(event.get("timestamp"))
            if kind == "system" and event.get("subtype") == "init":
                b.session_id = str(event.get("session_id") or "") or None
                b.agent_version = str(event.get("claude_code_version") or "") or None
            elif kind == "system" and event.get("subtype") == "api_retry":
                b.system(
                    f"Claude Code retries a failed API call (HTTP {event.get('error_status')})"
                )
            elif kind == "stream_event":
                current = _track_stream(as_dict(event.get("event")), current, per_message)
                if current:
                    streamed.add(current)
            elif kind == "assistant":
                msg = as_dict(event.get("message"))
                msg_id = str(msg.get("id") or f"#{len(steps)}")
                if msg_id not in steps:
                    model = msg.get("model")
                    steps[msg_id] = b.agent_step(
                        timestamp=when, model=model if isinstance(model, str) else None
                    )
                if msg_id not in streamed:
                    per_message[msg_id] = as_dict(msg.get("usage"))
                for block in msg.get("content") or []:
                    block = as_dict(block)
                    if block.get("type") == "text":
                        b.say(str(block.get("text") or ""))
                    elif block.get("type") == "thinking":
                        b.think(str(block.get("thinking") or ""))
                    elif block.get("type") == "tool_use":
                        b.call(
                            str(block.get("id") or ""),
                            str(block.get("name") or ""),
                            arguments(block.get("input")),
                        )
            elif kind == "user":
                content = as_dict(event.get("message")).get("content")
                for block in content if isinstance(content, list) else []:
                    block = as_dict(block)
                    if block.get("type") == "tool_result":
                        text = _block_text(block.get("content"))
                        code = _EXIT_CODE.match(text) if block.get("is_error") else None
                        b.result(
                            str(block.get("tool_use_id") or ""),
                            text,
                            exit_code=int(code.group(1)) if code else None,
                            failed=bool(block.get("is_error")),
                        )
                text = _block_text(content)
                if text.strip():
                    b.user(text, timestamp=when)
            elif kind == "result" and (event.get("is_error") or event.get("subtype") != "success"):
                b.system(f"Claude Code stopped: {event.get('subtype') or 'error'}")
        for msg_id, step in steps.items():
            if msg_id in per_message:
                b.set_usage(_usage(per_message[msg_id]), step)
        if steps and not streamed:
            b.note(
                "Output tokens per step are each message's count at its start (no stream events)."
            )
        return b.build()


def _text(content: Any) -> str:
    """A tool result's text (a string, or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text") or "") for b in content if isinstance(b, dict))
    return ""


@hookimpl(trylast=True)
def ksi_register_agents(register: Any) -> None:
    register(ClaudeCodeAgent)
