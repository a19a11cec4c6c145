"""Google's Gemini CLI (``gemini``) as a KSI agent.

Invocation follows the headless-mode reference
(https://geminicli.com/docs/cli/headless/ and ``docs/cli/headless.md`` in
google-gemini/gemini-cli): ``-p`` runs one prompt non-interactively,
``--output-format json`` prints one JSON object with ``response`` (the final
answer), ``stats`` (per-model ``tokens``: ``prompt``, ``candidates``,
``cached``, ``thoughts``; ``api.totalRequests``) and, on failure, ``error``
(``type``, ``message``, ``code``); ``--yolo`` approves every tool call.
Piped stdin is read as input ahead of the ``-p`` text, which KSI uses for
prompts too long for one argument. Documented exit codes: 0 success,
1 general/API error, 42 input error, 53 turn limit exceeded; the CLI also
exits 41 on an authentication failure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ksi.agents.cli_base import (
    CliAgent,
    Parsed,
    as_int,
    choice_field,
    extra_args_field,
    read_text,
)
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, ExecResult, Usage

APPROVAL_MODES = ("yolo", "auto_edit", "default")
#: Exit codes with a meaning of their own.
_EXIT_STATUS = {41: "auth_error", 53: "budget_exceeded"}
_LONG_PROMPT_NOTE = "Carry out the task given above."


def _last_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object the CLI printed, skipping any warning lines before it."""
    stripped = text.strip()
    if not stripped:
        return None
    starts = [i for i, line in enumerate(stripped.splitlines()) if line.startswith("{")]
    lines = stripped.splitlines()
    for start in starts:
        try:
            obj = json.loads("\n".join(lines[start:]))
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


@attrs.define(frozen=True)
class GeminiCliAgent(CliAgent):
    """Google's Gemini CLI in headless mode."""

    name: ClassVar[str] = "gemini-cli"
    aliases: ClassVar[tuple[str, ...]] = ("gemini",)
    description: ClassVar[str] = "Gemini CLI (gemini -p, JSON output)"
    binary: ClassVar[str] = "gemini"
    install_command: ClassVar[str] = "npm install -g @google/gemini-cli"
    docs_url: ClassVar[str] = "https://geminicli.com/docs/cli/headless/"
    credential_env: ClassVar[tuple[str, ...]] = (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
    )
    login_files: ClassVar[tuple[str, ...]] = (".gemini/oauth_creds.json",)
    login_hint: ClassVar[str] = "run `gemini` once and log in with Google"
    extra_env: ClassVar[tuple[str, ...]] = ("GEMINI_MODEL",)
    #: Vertex AI (https://geminicli.com/docs/get-started/authentication/).
    mode_env: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "GOOGLE_GENAI_USE_VERTEXAI": (
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
        ),
    }

    #: ``yolo`` approves every tool call; ``auto_edit`` only file edits.
    approval_mode: str = choice_field("yolo", APPROVAL_MODES)
    #: More flags, shell-quoted, appended verbatim.
    extra_args: str = extra_args_field()

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        approval = (
            ["--yolo"] if self.approval_mode == "yolo" else ["--approval-mode", self.approval_mode]
        )
        argv = [
            self.binary,
            "--output-format",
            "json",
            *approval,
            *self.model_flag(ctx, "--model"),
        ]
        if self.fits_argv(ctx.prompt):
            return [*argv, "--prompt", ctx.prompt], None
        return [*argv, "--prompt", _LONG_PROMPT_NOTE], ctx.prompt

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        obj = _last_json_object(read_text(result.stdout_path))
        if obj is None or "error" not in obj:
            # In JSON mode errors are reported as JSON on stderr.
            err_obj = _last_json_object(read_text(result.stderr_path, 1024 * 1024))
            if err_obj is not None and "error" in err_obj:
                obj = {**(obj or {}), "error": err_obj["error"]}
        obj = obj or {}
        inp = cached = out = turns = 0
        stats = obj.get("stats") or {}
        models = stats.get("models") if isinstance(stats, dict) else None
        for model in (models or {}).values():
            if not isinstance(model, dict):
                continue
            tokens = model.get("tokens") or {}
            inp += as_int(tokens.get("prompt"))
            cached += as_int(tokens.get("cached"))
            out += as_int(tokens.get("candidates")) + as_int(tokens.get("thoughts"))
            turns += as_int((model.get("api") or {}).get("totalRequests"))
        usage = Usage(
            input_tokens=max(inp - cached, 0),
            output_tokens=out,
            cache_read_tokens=cached,
            turns=turns or None,
        )
        response = obj.get("response")
        message = response if isinstance(response, str) else ""
        status = _EXIT_STATUS.get(result.exit_code) if result.exit_code is not None else None
        err = obj.get("error")
        error = ""
        if isinstance(err, dict):
            code = err.get("code")
            error = f"{err.get('type') or 'Error'}: {err.get('message') or ''}"
            if code not in (None, ""):
                error += f" (code {code})"
        elif err:
            error = str(err)
        if status == "budget_exceeded" and not error:
            error = "Gemini CLI stopped: turn limit exceeded (exit code 53)"
        return Parsed(
            usage=usage,
            final_message=message,
            error=error,
            status=status,
            succeeded=not error and result.exit_code == 0,
        )


@hookimpl(trylast=True)
def ksi_register_agents(register: Any) -> None:
    register(GeminiCliAgent)
