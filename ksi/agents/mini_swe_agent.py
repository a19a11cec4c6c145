"""mini-SWE-agent (``mini``) as a KSI agent.

Invocation follows the ``mini`` usage page
(https://mini-swe-agent.com/latest/usage/mini/): ``-t`` gives the task,
``-y``/``--yolo`` runs every action without confirmation,
``--exit-immediately`` ends when the agent submits instead of asking,
``-o`` writes the trajectory file, ``-m`` picks the (litellm) model and
``-l`` the cost limit. ``MSWEA_CONFIGURED=true`` skips the first-run setup
wizard. The trajectory (``trajectory_format: mini-swe-agent-1``) holds
``info.exit_status`` (``Submitted`` on success, ``LimitsExceeded`` or an
exception name otherwise), ``info.submission``,
``info.model_stats.instance_cost`` and ``api_calls``, and the messages,
whose assistant entries carry the provider response with its ``usage``.
``mini`` has no task-file option, so a task too long for one argument is
replaced by an instruction to read the prompt file.

How a run ended is read from the trajectory's last message (role ``exit``:
``extra.exit_status`` and ``extra.exception_str``, e.g. litellm's
``AuthenticationError`` or mini's "model isn't mapped yet" cost error with
its fix), never from stderr, which holds mini's pretty-printed traceback and
source code. ``base_url`` and ``step_limit`` are ``-c key=value`` overrides;
any ``-c`` drops mini's default config, so KSI names it (``mini.yaml``) first.

litellm would download its model price list from GitHub at import; KSI sets
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it reads the copy in the package
(``LITELLM_MODEL_REGISTRY_PATH`` still adds prices of your own).

Trajectory (:meth:`MiniSweAgent.trajectory`): the trajectory file's messages
after mini's own system and instance messages (step 1 is KSI's prompt): each
assistant message an agent step with its tool calls (their arguments as the
model sent them), usage and cost; each ``tool`` message the output and
``returncode`` of the call it answers; the ``exit`` message a system step.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import attrs

from ksi.agents.cli_base import (
    LITELLM_OFFLINE_ENV,
    CliAgent,
    Parsed,
    as_dict,
    as_exit_code,
    as_float,
    as_int,
    base_url_field,
    choice_field,
    extra_args_field,
    positive_int_or_none,
)
from ksi.agents.errors import classify_text
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, ExecResult, Usage
from ksi.models import AgentStatus
from ksi.proc import read_tail
from ksi.trajectories import Trajectory, TrajectoryBuilder, arguments, iso_time

COST_TRACKING = ("", "default", "ignore_errors")
#: mini's built-in default config, named when KSI adds ``-c key=value`` overrides.
DEFAULT_CONFIG = "mini.yaml"


def _non_negative(_inst: Any, attr: Any, value: float | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attr.name} must be >= 0 (0 disables the limit), got {value}")


def _message_usage(msg: dict[str, Any]) -> Usage:
    """One assistant message's usage (its provider response's), and its cost."""
    extra = as_dict(msg.get("extra"))
    u = as_dict(as_dict(extra.get("response")).get("usage"))
    details = as_dict(u.get("prompt_tokens_details"))
    read = as_int(u.get("cache_read_input_tokens")) or as_int(details.get("cached_tokens"))
    write = as_int(u.get("cache_creation_input_tokens"))
    # litellm's prompt_tokens include cache reads (and, for Anthropic, writes).
    return Usage(
        input_tokens=max(as_int(u.get("prompt_tokens")) - read - write, 0),
        output_tokens=as_int(u.get("completion_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
        cost_usd=as_float(extra.get("cost")),
    )


def _read_traj(path: Any) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            traj = json.load(fh)
    except (OSError, ValueError):
        return {}
    return traj if isinstance(traj, dict) else {}


@attrs.define(frozen=True)
class MiniSweAgent(CliAgent):
    """mini-SWE-agent's ``mini`` command in yolo mode."""

    name: ClassVar[str] = "mini-swe-agent"
    aliases: ClassVar[tuple[str, ...]] = ("mini", "mini-swe")
    description: ClassVar[str] = "mini-SWE-agent (mini -t ... --yolo, trajectory file)"
    binary: ClassVar[str] = "mini"
    install_command: ClassVar[str] = "python -m pip install mini-swe-agent"
    docs_url: ClassVar[str] = "https://mini-swe-agent.com/latest/usage/mini/"
    credential_env: ClassVar[tuple[str, ...]] = (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "DEEPSEEK_API_KEY",
        "GROQ_API_KEY",
        "XAI_API_KEY",
        "MISTRAL_API_KEY",
        "MSWEA_MODEL_API_KEY",
        "OLLAMA_API_BASE",
    )
    login_files: ClassVar[tuple[str, ...]] = (".config/mini-swe-agent/.env",)
    login_hint: ClassVar[str] = "run `mini-extra config setup`"
    extra_env: ClassVar[tuple[str, ...]] = (
        "MSWEA_MODEL_NAME",
        "MSWEA_GLOBAL_CONFIG_DIR",
        "OPENAI_API_BASE",
        "LITELLM_MODEL_REGISTRY_PATH",
    )
    trajectory_file: ClassVar[str] = "mini.traj.json"

    #: ``-l``: stop when the model cost reaches this many USD (0: no limit).
    cost_limit: float | None = attrs.field(default=None, validator=_non_negative)
    #: ``-c``: agent config file (as the agent's process sees it).
    config: str = ""
    #: ``--model-class`` (e.g. ``anthropic``).
    model_class: str = ""
    #: ``MSWEA_COST_TRACKING``: ``ignore_errors`` for models litellm has no price for.
    cost_tracking: str = choice_field("", COST_TRACKING)
    #: ``-c agent.step_limit=N``: stop after N model calls.
    step_limit: int | None = positive_int_or_none()
    #: The model's endpoint (``-c model.model_kwargs.api_base=...``, litellm's ``api_base``).
    base_url: str = base_url_field()
    #: More flags, shell-quoted, appended verbatim.
    extra_args: str = extra_args_field()

    def command(self, ctx: AgentContext) -> tuple[list[str], str | None]:
        task = ctx.prompt
        if not self.fits_argv(task):
            task = (
                f"Your task is described in the file {self.prompt_path(ctx)}. "
                "Read it first, then carry it out."
            )
        argv = [
            self.binary,
            "-t",
            task,
            "--yolo",
            "--exit-immediately",
            "-o",
            self.trajectory_path(ctx),
            *self.model_flag(ctx, "--model"),
        ]
        if self.cost_limit is not None:
            argv += ["--cost-limit", f"{self.cost_limit:g}"]
        for spec in self.config_specs():
            argv += ["--config", spec]
        if self.model_class:
            argv += ["--model-class", self.model_class]
        return argv, None

    def config_specs(self) -> list[str]:
        """``-c`` specs: the config file, then KSI's ``key=value`` overrides.

        Any ``-c`` replaces mini's default config, so an override without a
        ``config`` option names the default (``mini.yaml``) first.
        """
        overrides = []
        if self.base_url:
            overrides.append(f"model.model_kwargs.api_base={self.base_url}")
        if self.step_limit is not None:
            overrides.append(f"agent.step_limit={self.step_limit}")
        if not self.config and not overrides:
            return []
        return [self.config or DEFAULT_CONFIG, *overrides]

    def process_env(self, ctx: AgentContext) -> dict[str, str]:
        env = {"MSWEA_CONFIGURED": "true", **LITELLM_OFFLINE_ENV}
        if self.cost_tracking:
            env["MSWEA_COST_TRACKING"] = self.cost_tracking
        return env

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        traj = _read_traj(ctx.host_workspace / ".ksi" / self.trajectory_file)
        info = as_dict(traj.get("info"))
        stats = as_dict(info.get("model_stats"))
        inp = out = cache_r = cache_w = 0
        last_assistant = ""
        exit_message: dict[str, Any] = {}
        for msg in traj.get("messages") or []:
            if not isinstance(msg, dict):
                continue
            if msg.get("role") == "exit":
                exit_message = msg
            if msg.get("role") != "assistant":
                continue
            content = msg.get("content")
            if isinstance(content, str) and content.strip():
                last_assistant = content
            u = _message_usage(msg)
            inp += u.input_tokens
            out += u.output_tokens
            cache_r += u.cache_read_tokens
            cache_w += u.cache_write_tokens
        calls = as_int(stats.get("api_calls"))
        usage = Usage(
            inp, out, cache_r, cache_w, as_float(stats.get("instance_cost")), calls or None
        )
        submission = info.get("submission")
        message = submission if isinstance(submission, str) and submission else last_assistant
        exit_extra = as_dict(exit_message.get("extra"))
        exit_status = str(info.get("exit_status") or exit_extra.get("exit_status") or "")
        if exit_status == "Submitted":
            return Parsed(usage=usage, final_message=message, succeeded=True)
        if exit_status == "LimitsExceeded":
            return Parsed(
                usage=usage,
                final_message=message,
                error="mini-SWE-agent stopped: step or cost limit exceeded (LimitsExceeded)",
                status=AgentStatus.BUDGET_EXCEEDED,
            )
        if not traj:
            # mini died before saving (e.g. a bad option): its last stderr line says why.
            stderr = read_tail(result.stderr_path, 4096) if result.stderr_path else ""
            lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
            error = lines[-1] if lines else "mini wrote no trajectory file"
            return Parsed(usage=usage, final_message=message, error=error)
        # The exit message holds the exception mini stopped on, with its own advice;
        # the class comes from it alone (stderr holds mini's printed source code).
        detail = str(exit_extra.get("exception_str") or exit_message.get("content") or "")
        if "MSWEA_COST_TRACKING" in detail:  # KSI's spelling of mini's fix, before any cut
            exit_status += " (with KSI: --agent-option cost_tracking=ignore_errors)"
        error = f"{exit_status}: {detail}" if detail and detail != exit_status else exit_status
        error = error or "mini-SWE-agent stopped without submitting"
        return Parsed(
            usage=usage,
            final_message=message,
            error=error,
            status=classify_text([error]) or AgentStatus.CRASHED,
        )

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """The trajectory file's messages as steps (see the module docstring)."""
        traj = _read_traj(ctx.attempt_dir / self.trajectory_file)
        messages = [m for m in traj.get("messages") or [] if isinstance(m, dict)]
        if result is None or not messages:
            return None
        b = TrajectoryBuilder(
            self.name, prompt=ctx.prompt, model=ctx.model, workspace=ctx.workspace_path
        )
        b.agent_version = str(as_dict(traj.get("info")).get("mini_version") or "") or None
        started = False  # mini's system message and its instance (the task) come first
        for msg in messages:
            role, extra = msg.get("role"), as_dict(msg.get("extra"))
            content = msg.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            when = iso_time(extra.get("timestamp"))
            if role == "assistant":
                started = True
                b.agent_step(text, timestamp=when, usage=_message_usage(msg))
                for call in msg.get("tool_calls") or []:
                    function = as_dict(as_dict(call).get("function"))
                    b.call(
                        str(as_dict(call).get("id") or ""),
                        str(function.get("name") or ""),
                        arguments(function.get("arguments")),
                    )
            elif role == "tool":
                code, raw = extra.get("returncode"), extra.get("raw_output")
                problem = str(extra.get("exception_info") or "")
                ran = "not executed" not in problem  # mini's placeholder (the submission, say)
                b.result(
                    str(msg.get("tool_call_id") or ""),
                    raw if isinstance(raw, str) and not problem else text,
                    exit_code=as_exit_code(code) if ran else None,
                    failed=True if problem and ran else None,
                )
            elif role == "exit":
                status = str(extra.get("exit_status") or "")
                b.system(f"{status}: {text}" if status else text, timestamp=when)
            elif started and text.strip():
                b.user(text, timestamp=when)
        return b.build()


@hookimpl(trylast=True)
def ksi_register_agents(register: Any) -> None:
    register(MiniSweAgent)
