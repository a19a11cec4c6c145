"""OpenCode (``opencode run``) as a KSI agent.

Invocation follows the CLI documentation (https://opencode.ai/docs/cli/,
section ``run``): ``opencode run [message..]`` sends one message and exits;
``--format json`` prints raw JSON events, one per line (``step_start``,
``text``, ``tool_use``, ``step_finish`` whose ``part`` carries ``tokens``
``{input, output, reasoning, cache: {read, write}}`` and ``cost``, and
``error``); ``--model provider/model``; ``--agent``; ``--variant`` (reasoning
effort). Piped stdin is appended to the message, which KSI uses for prompts
too long for one argument. Tool permissions come from
``OPENCODE_PERMISSION`` (JSON), set to allow so nothing waits for approval.

The ``base_url`` option becomes the ``baseURL`` of the ``--model``'s provider
(``openai`` for ``openai/gpt-4.1``; ``openai`` without a model) in
``OPENCODE_CONFIG_CONTENT``, the inline configuration OpenCode merges over its
config files. OpenCode's ``openai`` provider speaks the Responses API; the
model must be one OpenCode knows (its catalog, or a ``provider.<id>.models``
entry in the user's ``opencode.json``). Besides the session's own model calls,
OpenCode asks the provider for a session title (a small model, no tools); its
tokens are not in the ``step_finish`` events and so not in KSI's usage.

Start-up traffic: KSI sets ``OPENCODE_DISABLE_MODELS_FETCH`` (no catalog
download from models.opencode.ai; the built-in snapshot prices the known
models). OpenCode also installs ``@opencode-ai/plugin`` with npm, in the
background, into a config directory (``~/.config/opencode``) that lacks it,
which a fresh HOME (the sandbox and docker environments give each attempt one)
does; no switch stops that, and a failed install does not fail the run.

Trajectory (:meth:`OpenCodeAgent.trajectory`): one agent step per
``step_start`` ... ``step_finish`` (one model call): its ``text`` and
``reasoning`` parts, each ``tool_use`` part with its input, output, status
and (for ``bash``) exit code, and the step's tokens and cost. The title call
is in no event, so not in the trajectory either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ksi.agents.cli_base import (
    AWS_BEDROCK_ENV,
    CliAgent,
    Parsed,
    as_dict,
    as_exit_code,
    as_float,
    as_int,
    base_url_field,
    extra_args_field,
    json_lines,
)
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, ExecResult, Usage
from ksi.trajectories import Trajectory, TrajectoryBuilder, arguments, iso_time

#: OpenCode otherwise downloads its model catalog from models.opencode.ai (models.dev) at
#: start, a call to a host nobody configured (and where only the provider is reachable, a
#: DNS failure and retries); with this switch it uses the catalog snapshot built into the
#: binary (or its cache), which holds the known models and their prices.
NO_CATALOG_FETCH = {"OPENCODE_DISABLE_MODELS_FETCH": "1"}
#: Every tool allowed: an attempt has nobody to answer a permission prompt.
ALLOW_ALL = json.dumps({"edit": "allow", "bash": "allow", "webfetch": "allow"})
#: A tool call's error when the ``permission`` option refused it: "ask" (nobody answers in
#: a run), or "deny" (the tool is not offered, and a call of it is of no tool).
REFUSED = re.compile(r"rejected permission|unavailable tool", re.IGNORECASE)


def _error_text(err: Any) -> str:
    """``{"name": "APIError", "data": {"message": ..., "statusCode": 429}}`` -> one line."""
    if not isinstance(err, dict):
        return str(err or "")
    data = as_dict(err.get("data"))
    text = f"{err.get('name') or 'Error'}: {data.get('message') or err.get('message') or ''}"
    if data.get("statusCode"):
        text += f" (status {data['statusCode']})"
    return text.strip()


def _step_usage(part: dict[str, Any]) -> Usage:
    """A ``step_finish`` part's tokens and cost (one model call)."""
    tokens = as_dict(part.get("tokens"))
    cache = as_dict(tokens.get("cache"))
    return Usage(
        input_tokens=as_int(tokens.get("input")),
        output_tokens=as_int(tokens.get("output")) + as_int(tokens.get("reasoning")),
        cache_read_tokens=as_int(cache.get("read")),
        cache_write_tokens=as_int(cache.get("write")),
        cost_usd=as_float(part.get("cost")),
    )


@attrs.define(frozen=True)
class OpenCodeAgent(CliAgent):
    """The OpenCode CLI in ``run`` mode."""

    name: ClassVar[str] = "opencode"
    speaks_mcp: ClassVar[bool] = True
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "OpenCode CLI (opencode run --format json)"
    binary: ClassVar[str] = "opencode"
    install_command: ClassVar[str] = "npm install -g opencode-ai"
    docs_url: ClassVar[str] = "https://opencode.ai/docs/cli/"
    credential_env: ClassVar[tuple[str, ...]] = (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_GENERATIVE_AI_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "XAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "MISTRAL_API_KEY",
        "OPENCODE_API_KEY",
    )
    login_files: ClassVar[tuple[str, ...]] = (".local/share/opencode/auth.json",)
    login_hint: ClassVar[str] = "run `opencode auth login`"
    extra_env: ClassVar[tuple[str, ...]] = (
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "OPENCODE_CONFIG",
    )
    #: The Amazon Bedrock provider (https://opencode.ai/docs/providers/#amazon-bedrock)
    #: is chosen by the model name; its AWS keys go only with such a --model.
    model_env: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "amazon-bedrock/": AWS_BEDROCK_ENV,
    }

    #: ``--agent`` (e.g. ``build``); empty: OpenCode's default agent.
    agent: str = ""
    #: ``--variant``: provider-specific reasoning effort (e.g. ``high``, ``max``).
    variant: str = ""
    #: ``OPENCODE_PERMISSION`` JSON; the default allows every tool.
    permission: str = attrs.field(default=ALLOW_ALL)
    #: The ``--model`` provider's endpoint (a proxy, gateway or local server).
    base_url: str = base_url_field()
    #: More flags, shell-quoted, appended verbatim.
    extra_args: str = extra_args_field()

    @permission.validator
    def _check_permission(self, _attr: Any, value: str) -> None:
        try:
            json.loads(value)
        except ValueError as exc:
            raise ValueError(f"permission must be JSON, got {value!r}: {exc}") from exc

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        argv = [self.binary, "run", "--format", "json", *self.model_flag(ctx, "--model")]
        if self.agent:
            argv += ["--agent", self.agent]
        if self.variant:
            argv += ["--variant", self.variant]
        return argv, None if self.fits_argv(ctx.prompt) else ctx.prompt

    def tail_args(self, ctx: AgentContext) -> list[str]:
        # The message is the positional argument; too long for argv, it goes on stdin.
        if not self.fits_argv(ctx.prompt):
            return []
        # A message starting with "-" would read as a flag; "--" ends the flags.
        return ["--", ctx.prompt] if ctx.prompt.startswith("-") else [ctx.prompt]

    def process_env(self, ctx: AgentContext) -> dict[str, str]:
        env = {"OPENCODE_PERMISSION": self.permission, **NO_CATALOG_FETCH}
        config: dict[str, Any] = {}
        if self.base_url:
            provider = ctx.model.split("/", 1)[0] if ctx.model and "/" in ctx.model else "openai"
            config["provider"] = {provider: {"options": {"baseURL": self.base_url}}}
        servers = self.mcp_servers(ctx)
        if servers:
            config["mcp"] = {
                s.name: {"type": "local", "command": s.argv(), "enabled": True} for s in servers
            }
        if config:
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
        return env

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        inp = out = cache_r = cache_w = steps = 0
        cost: float | None = None
        step_texts: list[str] = []
        last_texts: list[str] = []
        error = ""
        stopped = False
        #: What each tool call's error said ("" : it ran).
        tool_errors: list[str] = []
        for event in json_lines(result.stdout_path):
            kind = event.get("type")
            part = as_dict(event.get("part"))
            if kind == "tool_use":
                state = as_dict(part.get("state"))
                tool_errors.append(
                    str(state.get("error") or "") if state.get("status") == "error" else ""
                )
            elif kind == "step_start":
                step_texts = []
            elif kind == "text":
                text = str(part.get("text") or "")
                if text:
                    step_texts.append(text)
                    last_texts = step_texts
            elif kind == "step_finish":
                steps += 1
                step = _step_usage(part)
                inp += step.input_tokens
                out += step.output_tokens
                cache_r += step.cache_read_tokens
                cache_w += step.cache_write_tokens
                if step.cost_usd is not None:
                    cost = (cost or 0.0) + step.cost_usd
                stopped = part.get("reason") == "stop"
            elif kind == "error":
                error = _error_text(event.get("error") or event.get("message"))
        usage = Usage(inp, out, cache_r, cache_w, cost, steps or None)
        refused = self.permission != ALLOW_ALL and all(REFUSED.search(e) for e in tool_errors)
        return Parsed(
            usage=usage,
            final_message="".join(last_texts).strip(),
            error=error,
            succeeded=stopped and not error,
            tool_calls=len(tool_errors),
            refusal=tool_errors[0] if tool_errors and refused else "",
        )

    def refusal_fix(self, ctx: AgentContext, result: ExecResult, refusal: str) -> str:
        return (
            f"its permission option ({self.permission}) denies or asks before the tools it "
            "called, and nobody can answer in a run: leave --agent-option permission unset "
            "(KSI's default allows every tool)"
        )

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """The JSON events as steps, one per model call (see the module docstring)."""
        if result is None or result.spawn_error or not result.stdout_path:
            return None
        b = TrajectoryBuilder(
            self.name, prompt=ctx.prompt, model=ctx.model, workspace=ctx.workspace_path
        )
        step: int | None = None
        for event in json_lines(result.stdout_path):
            kind, part = event.get("type"), as_dict(event.get("part"))
            b.session_id = b.session_id or (str(event.get("sessionID") or "") or None)
            if kind == "step_start" or (step is None and kind in ("text", "reasoning", "tool_use")):
                step = b.agent_step(timestamp=iso_time(event.get("timestamp")))
            if kind == "text":
                b.say(str(part.get("text") or ""))
            elif kind == "reasoning":
                b.think(str(part.get("text") or ""))
            elif kind == "tool_use":
                state = as_dict(part.get("state"))
                call = b.call(
                    str(part.get("callID") or ""),
                    str(part.get("tool") or ""),
                    arguments(state.get("input")),
                )
                failed = state.get("status") == "error"
                output = state.get("error") if failed else state.get("output")
                code = as_dict(state.get("metadata")).get("exit")
                b.result(
                    call,
                    output if isinstance(output, str) else json.dumps(output),
                    exit_code=as_exit_code(code),
                    failed=failed,
                )
            elif kind == "step_finish" and step is not None:
                b.set_usage(_step_usage(part), step)
                step = None
            elif kind == "error":
                b.system(_error_text(event.get("error") or event.get("message")))
        return b.build()


@hookimpl(trylast=True)
def ksi_register_agents(register: Any) -> None:
    register(OpenCodeAgent)
