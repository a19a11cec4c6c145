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
1 general/API error, 41 authentication set-up error (no or bad auth method),
42 input error, 53 turn limit exceeded. An API error ends the run with the
HTTP status as exit code, modulo 256 (401 -> 145, 400 -> 144, 429 -> 173), and
``error.code`` in the JSON holds the status itself: KSI classifies by that.

What the real CLI (tested: see ``ksi/agents/tested_versions.py``) needs that
its docs do not say:

* ``--skip-trust``: every fresh workspace is an untrusted folder, where the
  CLI ignores ``--yolo`` and exits 55 asking for a trusted folder.
* ``base_url`` -> ``GOOGLE_GEMINI_BASE_URL``. That variable alone makes the CLI
  pick its "gateway" auth type, which headless mode refuses ("Invalid auth
  method selected.", exit 41), so KSI also points ``GEMINI_CLI_HOME`` at a
  directory in the workspace's ``.ksi/`` whose ``settings.json`` selects the
  ``gemini-api-key`` auth type (the key still comes from ``GEMINI_API_KEY``).
* ``max_turns`` exists only as a setting (``model.maxSessionTurns``), so it
  uses the same KSI-made ``GEMINI_CLI_HOME``. While either option is set the
  CLI does not read your ``~/.gemini`` (a Google login there is not used:
  authenticate with ``GEMINI_API_KEY``).
* A rate-limited call (429) is retried by the CLI with backoff for minutes;
  an attempt that hits KSI's timeout while still retrying is ``rate_limited``,
  not ``timeout``.

Trajectory (:meth:`GeminiCliAgent.trajectory`): the CLI records every chat
in its home (``<home>/.gemini/tmp/<project>/chats/session-*.jsonl``: each
model message with its tokens, thoughts and tool calls, each call's
arguments, output and status); KSI copies this attempt's (its session id
from the JSON output, or the newest of the project that is the attempt's
workspace) into the attempt directory as ``gemini.session.jsonl`` and reads
the steps from it. Not ``--output-format stream-json``: its events carry no
usage per call, and its totals leave out thinking tokens and the number of
model calls, which the JSON output has. A shell call's exit code is the
``Exit Code:`` line of its output.
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
    as_int,
    base_url_field,
    choice_field,
    extra_args_field,
    json_lines,
    positive_int_or_none,
    read_text,
)
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, ExecResult, Usage
from ksi.models import AgentStatus
from ksi.proc import read_tail
from ksi.trajectories import Trajectory, TrajectoryBuilder, arguments, iso_time

APPROVAL_MODES = ("yolo", "auto_edit", "default")
#: What the CLI prints for a call of a tool its approval mode keeps from a headless run
#: (it offers only the tools that need no approval).
_NOT_OFFERED = re.compile(r'^Error executing tool (\S+): Tool "\1" not found.*$', re.MULTILINE)
#: Exit codes with a meaning of their own.
_EXIT_STATUS = {41: AgentStatus.AUTH_ERROR, 53: AgentStatus.BUDGET_EXCEEDED}
#: ``error.code`` values (HTTP statuses) with a meaning of their own.
_CODE_STATUS = {
    401: AgentStatus.AUTH_ERROR,
    403: AgentStatus.AUTH_ERROR,
    429: AgentStatus.RATE_LIMITED,
}
#: ``GEMINI_CLI_HOME`` under the workspace's ``.ksi/`` when ``base_url`` is set.
_HOME_SUBDIR = "gemini-home"
#: The CLI's line for each retried API call ("Attempt 3 failed with status 429. Retrying...").
_RETRY_LINE = re.compile(r"Attempt \d+ failed with status (\d+)")
_LONG_PROMPT_NOTE = "Carry out the task given above."
#: The chat record KSI copies into the attempt directory.
SESSION_COPY = "gemini.session.jsonl"
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)", re.MULTILINE)


def gemini_homes(ctx: AgentContext, host_env: Mapping[str, str]) -> Iterator[Path]:
    """The ``.gemini`` directories this attempt's CLI may have used, as host paths: KSI's
    own ``GEMINI_CLI_HOME``, the per-attempt HOME of the sandbox and docker
    environments, then the host's (the local environment)."""
    yield ctx.host_workspace / ".ksi" / _HOME_SUBDIR / ".gemini"
    yield ctx.host_workspace / ".ksi" / "home" / ".gemini"
    if host_env.get("HOME"):
        yield Path(host_env["HOME"]) / ".gemini"


def _session_id(path: Path) -> str:
    for record in json_lines(path):
        return str(record.get("sessionId") or "")
    return ""


def find_session(homes: Iterator[Path], session_id: str, project_root: str) -> Path | None:
    """This run's chat record: the one of ``session_id``, else (a run cut short before
    printing its id) the newest of the project whose root is ``project_root``."""
    for home in homes:
        if session_id and "/" not in session_id:
            for found in home.glob(f"tmp/*/chats/session-*-{session_id[:8]}.jsonl"):
                if _session_id(found) == session_id:
                    return found
        elif not session_id:
            chats = [
                chat
                for project in home.glob("tmp/*")
                if read_text(project / ".project_root", 4096).strip() == project_root
                for chat in project.glob("chats/session-*.jsonl")
            ]
            if chats:
                return max(chats, key=lambda p: p.stat().st_mtime)
    return None


def _parts_text(content: Any) -> str:
    """A chat message's text (its ``text`` parts; function responses are not text)."""
    if isinstance(content, str):
        return content
    return "".join(
        str(p.get("text") or "") for p in content or [] if isinstance(p, dict) and p.get("text")
    )


def _tool_output(call: dict[str, Any]) -> str:
    """A tool call's output as the model got it (its function response)."""
    texts = []
    for part in call.get("result") or []:
        response = as_dict(as_dict(as_dict(part).get("functionResponse")).get("response"))
        value = response.get("output", response.get("error"))
        if value is not None:
            texts.append(value if isinstance(value, str) else json.dumps(value))
    return "\n".join(texts) or str(call.get("resultDisplay") or "")


def session_steps(b: TrajectoryBuilder, path: Path) -> None:
    """The chat record's messages as steps (see the module docstring)."""
    messages: dict[str, dict[str, Any]] = {}
    for record in json_lines(path):
        update = record.get("$set")
        if isinstance(update, dict):
            if isinstance(update.get("messages"), list):
                messages = {str(m.get("id")): m for m in update["messages"] if isinstance(m, dict)}
        elif record.get("type") and record.get("id") is not None:
            messages[str(record["id"])] = record  # a message is written again as it grows
        elif record.get("sessionId"):
            b.session_id = str(record["sessionId"])
    started = False  # Gemini's session context and the prompt come first
    for msg in messages.values():
        kind, when = msg.get("type"), iso_time(msg.get("timestamp"))
        if kind == "gemini":
            started = True
            tokens = as_dict(msg.get("tokens"))
            cached = as_int(tokens.get("cached"))
            thoughts = [
                f"{t.get('subject') or ''}: {t.get('description') or ''}".strip(": ")
                for t in msg.get("thoughts") or []
                if isinstance(t, dict)
            ]
            model = msg.get("model")
            b.agent_step(
                _parts_text(msg.get("content")),
                timestamp=when,
                model=model if isinstance(model, str) else None,
                reasoning="\n".join(thoughts),
                usage=Usage(
                    input_tokens=max(as_int(tokens.get("input")) - cached, 0),
                    output_tokens=as_int(tokens.get("output")) + as_int(tokens.get("thoughts")),
                    cache_read_tokens=cached,
                ),
            )
            for call in msg.get("toolCalls") or []:
                call = as_dict(call)
                cid = b.call(
                    str(call.get("id") or ""),
                    str(call.get("name") or ""),
                    arguments(call.get("args")),
                )
                output = _tool_output(call)
                code = _EXIT_CODE.search(output)
                b.result(
                    cid,
                    output,
                    exit_code=int(code.group(1)) if code else None,
                    failed=call.get("status") not in (None, "success"),
                )
        elif kind == "user" and started:
            text = _parts_text(msg.get("content"))
            if text.strip():
                b.user(text, timestamp=when)
        elif kind in ("error", "warning", "info") and started:
            b.system(_parts_text(msg.get("content")), timestamp=when)


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
    #: Where its model calls go without a ``base_url`` (the sandbox lets it reach this).
    api_host: ClassVar[str] = "generativelanguage.googleapis.com"
    speaks_mcp: ClassVar[bool] = True
    install_command: ClassVar[str] = "npm install -g @google/gemini-cli"
    docs_url: ClassVar[str] = "https://geminicli.com/docs/cli/headless/"
    #: What the CLI's headless auth check accepts (``GOOGLE_API_KEY`` alone is not
    #: enough: it is read only in Vertex AI mode).
    credential_env: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")
    login_files: ClassVar[tuple[str, ...]] = (".gemini/oauth_creds.json",)
    login_hint: ClassVar[str] = "run `gemini` once and log in with Google"
    extra_env: ClassVar[tuple[str, ...]] = ("GEMINI_MODEL",)
    #: Vertex AI (https://geminicli.com/docs/get-started/authentication/).
    mode_env: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "GOOGLE_GENAI_USE_VERTEXAI": (
            "GOOGLE_API_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
        ),
    }

    #: ``yolo`` approves every tool call; ``auto_edit`` only file edits.
    approval_mode: str = choice_field("yolo", APPROVAL_MODES)
    #: Stop after this many turns (the ``model.maxSessionTurns`` setting; exit 53).
    max_turns: int | None = positive_int_or_none()
    #: The Gemini API endpoint (a gateway, proxy or local server): ``GOOGLE_GEMINI_BASE_URL``.
    base_url: str = base_url_field()
    #: More flags, shell-quoted, appended verbatim.
    extra_args: str = extra_args_field()

    def own_settings(self, ctx: AgentContext) -> dict[str, Any]:
        """The settings only a settings file can give (empty: the user's own home is used)."""
        settings: dict[str, Any] = {}
        servers = self.mcp_servers(ctx)
        if servers:
            settings["mcpServers"] = {
                s.name: {"command": s.command, "args": list(s.args), "trust": True} for s in servers
            }
        if self.base_url:
            settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}
        if self.max_turns is not None:
            settings["model"] = {"maxSessionTurns": self.max_turns}
        return settings

    def setup(self, ctx: AgentContext) -> None:
        super().setup(ctx)
        settings = self.own_settings(ctx)
        if settings:
            path = ctx.host_workspace / ".ksi" / _HOME_SUBDIR / ".gemini" / "settings.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(settings, indent=2) + "\n")

    def process_env(self, ctx: AgentContext) -> dict[str, str]:
        env: dict[str, str] = {}
        if self.own_settings(ctx):
            env["GEMINI_CLI_HOME"] = ctx.workspace_path.rstrip("/") + "/.ksi/" + _HOME_SUBDIR
        if self.base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = self.base_url
        return env

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        approval = (
            ["--yolo"] if self.approval_mode == "yolo" else ["--approval-mode", self.approval_mode]
        )
        argv = [
            self.binary,
            "--output-format",
            "json",
            "--skip-trust",
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
        self._keep_session(ctx, str(obj.get("session_id") or ""))
        response = obj.get("response")
        message = response if isinstance(response, str) else ""
        status = _EXIT_STATUS.get(result.exit_code) if result.exit_code is not None else None
        err = obj.get("error")
        error = ""
        if isinstance(err, dict):
            code = err.get("code")
            if status is None and isinstance(code, int):
                status = _CODE_STATUS.get(code)
            error = f"{err.get('type') or 'Error'}: {err.get('message') or ''}"
            if code not in (None, ""):
                error += f" (code {code})"
        elif err:
            error = str(err)
        if status == AgentStatus.BUDGET_EXCEEDED and not error:
            error = "Gemini CLI stopped: turn limit exceeded (exit code 53)"
        stderr = read_tail(result.stderr_path, 16_384) if result.stderr_path else ""
        retried = _RETRY_LINE.findall(stderr)
        tools = as_dict(as_dict(stats).get("tools"))
        calls = as_int(tools.get("totalCalls"))
        hidden = (
            [m.group(0) for m in _NOT_OFFERED.finditer(stderr)]
            if self.approval_mode != "yolo"
            else []
        )
        return Parsed(
            usage=usage,
            final_message=message,
            error=error,
            status=status,
            succeeded=not error and result.exit_code == 0,
            retrying_status=int(retried[-1]) if retried else None,
            tool_calls=calls,
            refusal=hidden[0] if calls and len(hidden) >= calls else "",
        )

    def refusal_fix(self, ctx: AgentContext, result: ExecResult, refusal: str) -> str:
        return (
            f"in approval mode {self.approval_mode!r} a headless Gemini CLI offers no tool that "
            "needs approval (running commands, writing files): leave --agent-option "
            "approval_mode=yolo (the default)"
        )

    def _keep_session(self, ctx: AgentContext, session_id: str) -> None:
        """Copy this run's chat record into the attempt directory (:data:`SESSION_COPY`)."""
        workdir = ctx.task.runtime.workdir
        root = workdir if isinstance(workdir, str) else ctx.workspace_path
        found = find_session(gemini_homes(ctx, os.environ), session_id, root.rstrip("/"))
        if found is not None:
            ctx.attempt_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, ctx.attempt_dir / SESSION_COPY)

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """The chat record's messages as steps (see the module docstring)."""
        session = ctx.attempt_dir / SESSION_COPY
        if result is None or result.spawn_error or not session.is_file():
            return None
        b = TrajectoryBuilder(
            self.name, prompt=ctx.prompt, model=ctx.model, workspace=ctx.workspace_path
        )
        session_steps(b, session)
        b.note("Gemini CLI reports no cost and no version in its chat record.")
        return b.build()


@hookimpl(trylast=True)
def ksi_register_agents(register: Any) -> None:
    register(GeminiCliAgent)
