"""Aider as a KSI agent.

Invocation follows "Scripting aider" (https://aider.chat/docs/scripting.html)
and the options reference (https://aider.chat/docs/config/options.html):
``--message-file`` sends the prompt file once and exits (no
argument-length limit), ``--yes-always`` answers every confirmation,
``--no-pretty``/``--no-stream``/``--no-fancy-input`` keep the output plain,
and update checks, release notes, model warnings and analytics are off so nothing waits on
the network or a question. Aider has no JSON output; after every model
call it prints ``Tokens: 12k sent, 1.2k cache write, 3.4k cache hit, 345
received. Cost: $0.01 message, $0.02 session.``, which KSI parses (token
counts above 1,000 are rounded by Aider: ``1.2k``, ``12k``). "sent" is
litellm's ``prompt_tokens`` (cache hits and writes included) plus the cache
write a second time, so KSI subtracts the hits once and the write twice to
get uncached input. A call that both hit and wrote the cache puts ``Cost:``
on the next line. The final message leaves out the start-up banner and
whatever came before it. ``base_url`` is ``--openai-api-base`` (Aider's
"OpenAI compatible APIs": ``--model openai/<name>``).

KSI sets ``LITELLM_LOCAL_MODEL_COST_MAP=True``: litellm then reads the price
list bundled with it instead of downloading it from GitHub at import. Aider's
own copy of that list (``~/.aider/caches``, refreshed daily from GitHub) has no
switch; ``--model-metadata-file`` with an entry for the model skips it.

Trajectory (:meth:`AiderAgent.trajectory`): Aider's chat history, which KSI
puts in ``<workspace>/.ksi/aider.chat.history.md`` (``--chat-history-file``,
out of ``repo/``) and copies into the attempt directory. Its ``####`` lines
are user messages (the first is the prompt), its plain text the model's
replies, one agent step each, and its ``>`` lines what Aider printed after a
reply: the ``Tokens:``/``Cost:`` lines are the step's usage, the rest (the
edits it applied...) the step's observation. Aider has no tool calls and
writes no timestamps per message; the trajectory's notes say so.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import attrs

from ksi.agents.cli_base import (
    LITELLM_OFFLINE_ENV,
    CliAgent,
    Parsed,
    base_url_field,
    extra_args_field,
    read_text,
)
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, ExecResult, Usage
from ksi.trajectories import Trajectory, TrajectoryBuilder

_NUM = r"([\d.,]+[kKmM]?)"
_TOKENS = re.compile(
    rf"Tokens: {_NUM} sent(?:, {_NUM} cache write)?(?:, {_NUM} cache hit)?, {_NUM} received\."
)
#: On the Tokens line, or on the next one when the call both hit and wrote the cache.
_COST = re.compile(r"Cost: \$([\d.,]+) message, \$([\d.,]+) session\.")
#: The start-up banner Aider prints before the first reply (and anything above it:
#: the analytics notice, litellm's failed price-list download...).
_BANNER = re.compile(
    r"^(?:Aider v\d|Main model:|Model:|Weak model:|Editor model:|Git repo:|Repo-map:"
    r"|Added .* to the chat|Use /help)"
)
#: Lines Aider prints when a model call fails (litellm exception names and
#: Aider's own explanations).
_ERROR_LINE = re.compile(
    r"litellm\.\w+(?:Error|Exception)|\w+Error:|exceeds the [\d,]+ token limit"
    r"|larger than the context window|rate limited|API provider|Error:",
    re.IGNORECASE,
)
_NOISE = re.compile(
    r"^(?:Aider v|Main model:|Weak model:|Git repo:|Repo-map:|Model:|Added .* to the chat"
    r"|Applied edit to|Commit [0-9a-f]+|Tokens:|Cost:|https://aider\.chat|─+$)"
)


def _count(text: str | None) -> int:
    """``"1.2k"`` -> 1200, ``"12k"`` -> 12000, ``"950"`` -> 950."""
    if not text:
        return 0
    text = text.replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1].lower(), 1)
    number = text[:-1] if scale != 1 else text
    try:
        return round(float(number) * scale)
    except ValueError:
        return 0


def _call_usage(tokens: re.Match[str], cost: re.Match[str] | None) -> Usage:
    """One model call's usage from its ``Tokens:`` line (and its ``Cost:``, per message)."""
    sent, write, hit, received = (_count(g) for g in tokens.group(1, 2, 3, 4))
    # "sent" is litellm's prompt_tokens (cache reads and writes included)
    # plus the cache write once more: Aider adds it when the provider reports one.
    return Usage(
        input_tokens=max(sent - 2 * write - hit, 0),
        output_tokens=received,
        cache_read_tokens=hit,
        cache_write_tokens=write,
        cost_usd=float(cost.group(1).replace(",", "")) if cost else None,
    )


#: Aider's notes on what its chat history cannot give.
_HISTORY_NOTES = (
    "Aider has no tool calls: it edits files from the text of its replies; what it did "
    "after a reply (the edits it applied...) is that step's observation.",
    "Aider's chat history has no timestamps per message, and Aider rounds token counts "
    "above 1,000 (1.2k).",
)


def history_steps(b: TrajectoryBuilder, path: Any) -> None:
    """Aider's chat history as steps (see the module docstring)."""
    users = 0
    mode = "preamble"  # preamble (banner, argv), user, reply, after (the > lines of a reply)
    lines: list[str] = []
    step: int | None = None
    usage: Usage | None = None

    def flush() -> None:
        text = "\n".join(lines).strip("\n")
        if mode == "user" and users > 1:  # the first is the prompt, step 1 already
            b.user(text)
        elif mode == "reply":
            b.say(text)
        elif mode == "after" and text:
            if step is None:
                b.system(text)
            else:
                b.observe(text)
        lines.clear()

    for raw in read_text(path).splitlines():
        line = raw.rstrip()
        if line.startswith("# aider chat started at"):
            flush()
            mode, step = "preamble", None
        elif line.startswith("####"):
            if mode != "user":
                flush()
                mode, users, step = "user", users + 1, None
            lines.append(line[4:].strip())
        elif (line.startswith(">") and mode != "preamble") or (
            mode == "after" and line.startswith("Cost:")  # the Tokens line's, wrapped
        ):
            if mode != "after":
                flush()
                mode = "after"
            tokens, cost = _TOKENS.search(line), _COST.search(line)
            if tokens and step is not None:
                usage = _call_usage(tokens, cost)
                b.set_usage(usage, step)
            elif cost and step is not None and usage is not None:
                usage = attrs.evolve(usage, cost_usd=float(cost.group(1).replace(",", "")))
                b.set_usage(usage, step)
            elif not tokens and not cost:
                lines.append(line[1:].strip())
        elif mode not in ("preamble", "reply") and line.strip():
            flush()
            mode, step, usage = "reply", b.agent_step(), None
            lines.append(line)
        elif mode == "reply":
            lines.append(line)
    flush()
    for note in _HISTORY_NOTES:
        b.note(note)


@attrs.define(frozen=True)
class AiderAgent(CliAgent):
    """Aider in scripting mode (one message, then exit)."""

    name: ClassVar[str] = "aider"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "Aider (aider --message-file --yes-always)"
    binary: ClassVar[str] = "aider"
    install_command: ClassVar[str] = "python -m pip install aider-install && aider-install"
    docs_url: ClassVar[str] = "https://aider.chat/docs/scripting.html"
    credential_env: ClassVar[tuple[str, ...]] = (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "DEEPSEEK_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "XAI_API_KEY",
        "MISTRAL_API_KEY",
        "COHERE_API_KEY",
        "AZURE_API_KEY",
        "OLLAMA_API_BASE",
    )
    login_hint: ClassVar[str] = "pass --api-key provider=KEY in extra_args"
    extra_env: ClassVar[tuple[str, ...]] = (
        "OPENAI_API_BASE",
        "AZURE_API_BASE",
        "AZURE_API_VERSION",
        "AIDER_MODEL",
    )
    trajectory_file: ClassVar[str] = "aider.chat.history.md"

    #: ``--edit-format`` (e.g. ``diff``, ``whole``, ``udiff``); empty: the model's default.
    edit_format: str = ""
    #: ``--reasoning-effort`` for models that take one.
    reasoning_effort: str = ""
    #: Let Aider find (or create) a git repository and use its repo map;
    #: off: ``--no-git`` (the workspace is not a git repository).
    git: bool = False
    #: Let Aider commit its edits (``--auto-commits``); off by default so the
    #: graded workspace holds plain edits.
    auto_commits: bool = False
    #: An OpenAI-compatible endpoint (``--openai-api-base``) for ``openai/<model>`` models.
    base_url: str = base_url_field()
    #: More flags, shell-quoted, appended verbatim.
    extra_args: str = extra_args_field()

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        argv = [
            self.binary,
            "--message-file",
            self.prompt_path(ctx),
            "--yes-always",
            "--no-pretty",
            "--no-stream",
            "--no-fancy-input",
            "--no-check-update",
            "--no-show-release-notes",
            "--analytics-disable",
            "--no-show-model-warnings",
            "--chat-history-file",
            self.trajectory_path(ctx),
            "--auto-commits" if self.auto_commits else "--no-auto-commits",
            *([] if self.git else ["--no-git"]),
            *self.model_flag(ctx, "--model"),
        ]
        if self.base_url:
            argv += ["--openai-api-base", self.base_url]
        if self.edit_format:
            argv += ["--edit-format", self.edit_format]
        if self.reasoning_effort:
            argv += ["--reasoning-effort", self.reasoning_effort]
        return argv, None

    def process_env(self, ctx: AgentContext) -> dict[str, str]:
        # litellm's price-list download at import (see LITELLM_OFFLINE_ENV).
        return dict(LITELLM_OFFLINE_ENV)

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        text = read_text(result.stdout_path)
        lines = text.splitlines()
        inp = out = cache_w = cache_r = calls = 0
        cost: float | None = None
        last_usage_line = -1
        prev_usage_line = -1
        for i, line in enumerate(lines):
            m = _TOKENS.search(line)
            if not m:
                continue
            calls += 1
            call = _call_usage(m, None)
            cache_w += call.cache_write_tokens
            cache_r += call.cache_read_tokens
            inp += call.input_tokens
            out += call.output_tokens
            for candidate in lines[i : i + 2]:
                c = _COST.search(candidate)
                if c:
                    cost = float(c.group(2).replace(",", ""))
                    break
            prev_usage_line, last_usage_line = last_usage_line, i
        usage = Usage(inp, out, cache_r, cache_w, cost, calls or None)
        start = prev_usage_line
        if start < 0:  # the first reply starts after the start-up banner
            banner = [
                i for i, ln in enumerate(lines[: max(last_usage_line, 0)]) if _BANNER.match(ln)
            ]
            start = banner[-1] if banner else -1
        # The reply is what Aider printed between the previous usage line (or banner) and the last.
        reply = [
            ln
            for ln in lines[start + 1 : max(last_usage_line, 0)]
            if ln.strip()
            and not _NOISE.match(ln.strip())
            and not _ERROR_LINE.search(ln)
            and not ln.startswith("Retrying in")
        ]
        # Errors only count when no successful call followed them (Aider retries).
        errors = [ln.strip() for ln in lines[last_usage_line + 1 :] if _ERROR_LINE.search(ln)]
        return Parsed(
            usage=usage,
            final_message="\n".join(reply).strip()[-4000:],
            error=" | ".join(errors[-3:]),
            succeeded=calls > 0 and not errors,
        )

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """Aider's chat history as steps (see the module docstring)."""
        history = ctx.attempt_dir / self.trajectory_file
        if result is None or not history.is_file():
            return None
        b = TrajectoryBuilder(
            self.name, prompt=ctx.prompt, model=ctx.model, workspace=ctx.workspace_path
        )
        version = re.search(r"^> Aider v(\S+)", read_text(history, 65536), re.MULTILINE)
        b.agent_version = version.group(1) if version else None
        history_steps(b, history)
        return b.build()


@hookimpl(trylast=True)
def ksi_register_agents(register: Any) -> None:
    register(AiderAgent)
