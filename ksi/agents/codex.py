"""OpenAI Codex CLI (``codex exec``) as a KSI agent.

Invocation follows the non-interactive documentation
(https://developers.openai.com/codex/noninteractive and ``docs/exec.md`` in
openai/codex): ``codex exec --json`` reads the prompt from stdin when it is
given as ``-`` (no argument-length limit), prints one JSON event per line
(``thread.started``, ``turn.started``, ``item.completed``,
``turn.completed`` with ``usage``, ``turn.failed``, ``error``), and with
``--full-auto`` may edit the workspace without asking. ``--skip-git-repo-check``
because a task's workspace need not be a git repository. Codex reports
tokens (``input_tokens`` including ``cached_input_tokens``,
``output_tokens``) but no cost.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ksi.agents.cli_base import (
    CliAgent,
    Parsed,
    as_int,
    choice_field,
    extra_args_field,
    json_lines,
)
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, ExecResult, Usage

#: ``sandbox`` option -> Codex flags. ``danger-full-access`` is for
#: environments that already isolate the agent (docker, sandbox) where Codex's
#: own Landlock/seccomp sandbox may not be available.
SANDBOX_FLAGS = {
    "workspace-write": ["--full-auto"],
    "read-only": ["--sandbox", "read-only"],
    "danger-full-access": ["--dangerously-bypass-approvals-and-sandbox"],
}
REASONING_EFFORTS = ("", "minimal", "low", "medium", "high", "xhigh")


@attrs.define(frozen=True)
class CodexAgent(CliAgent):
    """OpenAI's Codex CLI in exec mode."""

    name: ClassVar[str] = "codex"
    aliases: ClassVar[tuple[str, ...]] = ("codex-cli",)
    description: ClassVar[str] = "OpenAI Codex CLI (codex exec --json)"
    binary: ClassVar[str] = "codex"
    install_command: ClassVar[str] = "npm install -g @openai/codex"
    docs_url: ClassVar[str] = "https://developers.openai.com/codex/noninteractive"
    credential_env: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY", "CODEX_API_KEY")
    login_files: ClassVar[tuple[str, ...]] = (".codex/auth.json",)
    login_hint: ClassVar[str] = "run `codex login`"
    extra_env: ClassVar[tuple[str, ...]] = ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "CODEX_HOME")

    #: ``-c model_reasoning_effort=...``; empty: the model's default.
    reasoning_effort: str = choice_field("", REASONING_EFFORTS)
    #: How Codex may touch files: workspace-write (``--full-auto``), read-only,
    #: or danger-full-access (no Codex sandbox, for already-isolated environments).
    sandbox: str = choice_field("workspace-write", tuple(SANDBOX_FLAGS))
    #: ``--profile`` from the user's config.toml.
    profile: str = ""
    #: More flags, shell-quoted, appended verbatim.
    extra_args: str = extra_args_field()

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        argv = [
            self.binary,
            "exec",
            "--json",
            "--skip-git-repo-check",
            *SANDBOX_FLAGS[self.sandbox],
            *self.model_flag(ctx, "--model"),
        ]
        if self.reasoning_effort:
            argv += ["-c", f"model_reasoning_effort={self.reasoning_effort}"]
        if self.profile:
            argv += ["--profile", self.profile]
        return argv, ctx.prompt

    def tail_args(self, ctx: AgentContext) -> list[str]:
        # "-" as the prompt argument: read the prompt from stdin.
        return ["-"]

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        inp = cached = out = turns = 0
        message = ""
        error = ""
        finished = False
        for event in json_lines(result.stdout_path):
            kind = event.get("type")
            if kind == "turn.completed":
                usage = event.get("usage") or {}
                if isinstance(usage, dict):
                    inp += as_int(usage.get("input_tokens"))
                    cached += as_int(usage.get("cached_input_tokens"))
                    out += as_int(usage.get("output_tokens"))
                turns += 1
                finished = True
                error = ""
            elif kind == "item.completed":
                item = event.get("item") or {}
                if isinstance(item, dict) and item.get("type") in ("agent_message",):
                    message = str(item.get("text") or "")
            elif kind == "turn.failed":
                err = event.get("error") or {}
                error = str(err.get("message") if isinstance(err, dict) else err)
                finished = False
            elif kind == "error":
                error = str(event.get("message") or event)
        usage = Usage(
            input_tokens=max(inp - cached, 0),
            output_tokens=out,
            cache_read_tokens=cached,
            turns=turns or None,
        )
        return Parsed(usage=usage, final_message=message, error=error, succeeded=finished)


@hookimpl(trylast=True)
def ksi_register_agents(register: Any) -> None:
    register(CodexAgent)
