"""Any Agent Client Protocol (ACP) agent as a KSI agent: ``--agent acp --agent-option cmd=...``.

ACP (https://agentclientprotocol.com/) is how editors drive coding agents:
JSON-RPC over the agent's stdin and stdout, with ``session/update``
notifications for what the agent says and does and ``session/request_permission``
requests before it acts. Gemini CLI speaks it (``gemini --acp``), adapters
wrap Claude Code and Codex, and more agents follow; this one plugin runs them
all.

The conversation happens inside the attempt's environment, where the
agent's pipes are: :meth:`AcpAgent.setup` copies KSI's client
(:mod:`ksi.agents.acp_client`, standard library and the
``agent-client-protocol`` package only) into the workspace's ``.ksi/``, and the
agent process KSI runs is that client, under KSI's own Python when the
process sees the host's files (``local``, ``sandbox``) and the environment's
``python3`` otherwise (``docker``: the image must hold Python 3.10+ with the
package). The client starts ``cmd`` with ``/bin/sh -c`` in the workspace,
sends the prompt as one turn, answers permission requests per ``permission``
and logs the session; KSI reads the log on the host (:func:`read_session`)
for the outcome and the trajectory (:func:`acp_trajectory`) and keeps it in the
attempt directory as ``acp-session.jsonl``.

What a status means here: the turn's stop reason ``end_turn`` is
``completed``; ``max_turn_requests`` is ``budget_exceeded``; ``max_tokens``,
``refusal`` and ``cancelled`` are ``crashed`` (graded, with the reason as the
error); a protocol error is classified by its text like a CLI's
(``auth_error``, ``rate_limited``...), and "authentication required" when
the session starts is ``auth_error``; a client that never started (no
Python, no package) is ``error``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi._version import __version__
from ksi.agents import acp_client
from ksi.agents.builtin import attempt_env, parse_endpoints, prompt_path, write_prompt
from ksi.agents.cli_base import (
    Parsed,
    as_dict,
    as_float,
    as_int,
    choice_field,
    json_lines,
    keep_ksi_file,
    parsed_outcome,
)
from ksi.errors import UserInputError
from ksi.hookspecs import Register, hookimpl
from ksi.interfaces import AgentBase, AgentContext, AgentOutcome, ExecResult, Invocation
from ksi.models import AgentStatus, Usage
from ksi.proc import read_tail
from ksi.trajectories import Trajectory, TrajectoryBuilder, arguments, iso_time

#: The session log the client writes in the workspace's ``.ksi/`` (kept in the attempt dir).
LOG_FILE = "acp-session.jsonl"
#: The client's copy in the workspace's ``.ksi/``.
CLIENT_FILE = "acp_client.py"
#: What each turn-ending stop reason other than ``end_turn`` makes the attempt.
_STOP_STATUS = {
    "max_turn_requests": AgentStatus.BUDGET_EXCEEDED,
    "max_tokens": AgentStatus.CRASHED,
    "refusal": AgentStatus.CRASHED,
    "cancelled": AgentStatus.CRASHED,
}
#: JSON-RPC error code ACP uses for "authentication required".
_AUTH_REQUIRED = -32000
#: Session updates that are the agent acting (a message after one starts a new message).
_TOOL_UPDATES = ("tool_call", "tool_call_update")


def _need_cmd(_inst: object, _attr: object, value: str | None) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            "option 'cmd' is required: the shell command that starts the ACP agent on "
            "stdio, e.g. --agent-option cmd='gemini --acp'"
        )


def _string(_inst: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"option {attribute.name!r} must be a string")


@attrs.frozen
class AcpSession:
    """What one session's log says (see :mod:`ksi.agents.acp_client` for the format)."""

    #: The ``update`` and ``permission`` lines, in the order they came.
    events: tuple[Mapping[str, Any], ...] = ()
    #: ``agentInfo`` from ``initialize`` (``name``, ``version``), when given.
    agent: Mapping[str, Any] = attrs.field(factory=dict)
    auth_methods: tuple[str, ...] = ()
    session_id: str | None = None
    #: The ``result`` line (the turn ended), or ``None``.
    result: Mapping[str, Any] | None = None
    #: The ``error`` line, or ``None``.
    error: Mapping[str, Any] | None = None
    #: Whether the log has any line at all (the client started).
    started: bool = False

    @property
    def updates(self) -> list[Mapping[str, Any]]:
        """Every ``session/update``'s update, in order, as the protocol sent it."""
        return [as_dict(e.get("update")) for e in self.events if e.get("event") == "update"]


def read_session(path: Path) -> AcpSession:
    """The session a log holds; an empty session when there is no log."""
    events: list[Mapping[str, Any]] = []
    fields: dict[str, Any] = {}
    for line in json_lines(path):
        fields["started"] = True
        event = line.get("event")
        if event in ("update", "permission"):
            events.append(line)
        elif event == "initialized":
            fields["agent"] = as_dict(line.get("agent"))
            methods = line.get("auth_methods")
            fields["auth_methods"] = tuple(str(m) for m in methods or () if isinstance(m, str))
        elif event == "session" and isinstance(line.get("session_id"), str):
            fields["session_id"] = line["session_id"]
        elif event == "result":
            fields["result"] = line
        elif event == "error":
            fields["error"] = line
    return AcpSession(tuple(events), **fields)


def acp_usage(session: AcpSession) -> Usage:
    """The session's usage in KSI's meaning, where the agent reports one.

    ACP's own ``usage`` on the turn's response (``inputTokens``,
    ``outputTokens``, ``thoughtTokens``, ``cachedReadTokens``,
    ``cachedWriteTokens``, ``totalTokens``) does not say whether the input
    counts the cached tokens or the output the thoughts; ``totalTokens``
    does: a part counted apart is in the total on top of the rest. Without
    it, Gemini CLI's ``_meta.quota.token_count`` (input and output only, the
    input with the cached tokens in it). The cost is the last
    ``usage_update``'s, when in USD. Nothing reported: zeros and no cost.
    """
    cost = None
    for update in session.updates:
        if update.get("sessionUpdate") == "usage_update":
            spent = as_dict(update.get("cost"))
            if spent.get("currency") == "USD":
                cost = as_float(spent.get("amount"))
    result = session.result or {}
    reported = as_dict(result.get("usage"))
    if reported:
        inp, out = as_int(reported.get("inputTokens")), as_int(reported.get("outputTokens"))
        read = as_int(reported.get("cachedReadTokens"))
        write = as_int(reported.get("cachedWriteTokens"))
        thought, total = as_int(reported.get("thoughtTokens")), as_int(reported.get("totalTokens"))
        if total and total < inp + out + read + write:
            inp = max(inp - read - write, 0)  # the input counted the cached tokens
        if thought and (not total or total >= inp + read + write + out + thought):
            out += thought  # the output did not count the thoughts
        return Usage(inp, out, read, write, cost_usd=cost)
    counted = as_dict(as_dict(as_dict(result.get("meta")).get("quota")).get("token_count"))
    return Usage(
        as_int(counted.get("input_tokens")), as_int(counted.get("output_tokens")), cost_usd=cost
    )


def _text(block: Any) -> str:
    """The text of a content block (``{"type": "text", "text": ...}``); ``""`` otherwise."""
    block = as_dict(block)
    text = block.get("text")
    return text if block.get("type") == "text" and isinstance(text, str) else ""


def final_message(session: AcpSession) -> str:
    """The agent's last message: its text since the last tool call (or before the
    trailing ones)."""
    parts: list[str] = []
    acted = False
    for update in session.updates:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            if acted:
                parts, acted = [], False
            parts.append(_text(update.get("content")))
        elif kind in _TOOL_UPDATES:
            acted = True
    return "".join(parts).strip()


def _outcome_of(session: AcpSession) -> tuple[str | None, str]:
    """``(status or None, error)`` the log states."""
    error = session.error
    if error is not None:
        stage, message = str(error.get("stage") or ""), str(error.get("message") or "")
        data = error.get("data")
        if data not in (None, "", {}):
            message += f" {json.dumps(data, default=str)}"
        if stage == "client":
            return AgentStatus.ERROR, message
        if stage == "session" and error.get("code") == _AUTH_REQUIRED:
            offered = ", ".join(session.auth_methods) or "none listed"
            return AgentStatus.AUTH_ERROR, (
                f"the ACP agent requires authentication: {message} (give "
                f"--agent-option auth=METHOD; it offers: {offered})"
            )
        return None, f"ACP {stage} failed: {message}"
    if session.result is None:
        return None, ""
    reason = str(session.result.get("stop_reason") or "")
    if reason == "end_turn":
        return None, ""
    return _STOP_STATUS.get(reason, AgentStatus.CRASHED), f"the ACP agent stopped: {reason}"


#: A tool call's last status, once it has one of these, is its result.
_FINISHED = ("completed", "failed")


def _call_facts(session: AcpSession) -> dict[str, dict[str, Any]]:
    """What the session says of each tool call, over all its updates and its permission
    request (an update may add the input or a better title later): the last of each."""
    facts: dict[str, dict[str, Any]] = {}
    for event in session.events:
        call = as_dict(
            event.get("update") if event["event"] == "update" else event.get("tool_call")
        )
        cid = call.get("toolCallId")
        if not isinstance(cid, str):
            continue
        known = facts.setdefault(cid, {})
        for key in ("title", "kind", "rawInput", "locations"):
            if call.get(key) not in (None, "", {}, []):
                known[key] = call[key]
    return facts


def _arguments(facts: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments: its ``rawInput``; without one, its title (for a command, the
    command line) and the paths it names."""
    if facts.get("rawInput") not in (None, "", {}):
        return arguments(facts["rawInput"])
    title = str(facts.get("title") or "")
    args: dict[str, Any] = {"title": title}
    if facts.get("kind") == "execute" and title:
        args["command"] = title
    paths = [as_dict(loc).get("path") for loc in facts.get("locations") or ()]
    if any(isinstance(p, str) for p in paths):
        args["paths"] = [p for p in paths if isinstance(p, str)]
    return args


def _output(update: Mapping[str, Any]) -> str:
    """A finished call's output: its content (text; an edit as the path and new text; a
    terminal by id), else its ``rawOutput``."""
    parts: list[str] = []
    for item in update.get("content") or ():
        item = as_dict(item)
        if item.get("type") == "content":
            parts.append(_text(item.get("content")))
        elif item.get("type") == "diff":
            parts.append(f"edited {item.get('path')}:\n{item.get('newText') or ''}")
        elif item.get("type") == "terminal":
            parts.append(f"[terminal {item.get('terminalId')}]")
    text = "\n".join(p for p in parts if p)
    raw = update.get("rawOutput")
    if not text and raw not in (None, ""):
        text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    return text


def _plan(update: Mapping[str, Any]) -> str:
    entries = [as_dict(e) for e in update.get("entries") or ()]
    lines = [f"- [{e.get('status', '')}] {e.get('content', '')}" for e in entries]
    return "Plan:\n" + "\n".join(lines)


def acp_trajectory(name: str, ctx: AgentContext, session: AcpSession) -> Trajectory | None:
    """The session as ATIF steps: the prompt, then one agent step per stretch of the
    agent's text and tool calls, a new one after tool results (ACP does not mark model
    calls); each call with its arguments and its result, a call KSI's policy rejected
    with that answer as a failed result, a plan as reasoning. ACP reports usage for the
    whole turn only, so the steps carry none."""
    if not session.started:
        return None
    b = TrajectoryBuilder(name, prompt=ctx.prompt, model=ctx.model, workspace=ctx.workspace_path)
    b.session_id = session.session_id
    agent = session.agent
    if agent.get("version"):
        b.agent_version = f"{agent.get('name', '')} {agent['version']}".strip()
    facts = _call_facts(session)
    ids: dict[str, str] = {}
    finished: set[str] = set()
    new_step = True
    answered: list[str] = []

    def step(event: Mapping[str, Any]) -> None:
        nonlocal new_step
        if new_step:
            b.agent_step(timestamp=iso_time(event.get("time")))
            new_step = False

    def call(event: Mapping[str, Any], cid: str) -> str:
        if cid not in ids:
            step(event)
            known = facts.get(cid, {})
            ids[cid] = b.call(cid, str(known.get("kind") or "tool"), _arguments(known))
        return ids[cid]

    for event in session.events:
        if event["event"] == "permission":
            cid = as_dict(event.get("tool_call")).get("toolCallId")
            chosen = as_dict(event.get("chosen"))
            answer = str(chosen.get("kind") or "cancelled")
            answered.append(answer)
            if isinstance(cid, str) and not answer.startswith("allow"):
                b.result(
                    call(event, cid), f"KSI's permission policy answered {answer}.", failed=True
                )
                finished.add(cid)
                new_step = True
            continue
        update = as_dict(event.get("update"))
        kind = update.get("sessionUpdate")
        cid = update.get("toolCallId")
        if kind in ("agent_message_chunk", "agent_thought_chunk", "plan"):
            step(event)
            text = _text(update.get("content")) if kind != "plan" else _plan(update)
            if kind == "agent_message_chunk":
                b.say(text)
            else:
                b.think(text)
        elif kind in _TOOL_UPDATES and isinstance(cid, str):
            own = call(event, cid)
            if update.get("status") in _FINISHED and cid not in finished:
                b.result(own, _output(update), failed=update.get("status") == "failed")
                finished.add(cid)
                new_step = True
    if answered:
        b.note(
            f"KSI answered {len(answered)} permission request(s): "
            + ", ".join(f"{answered.count(k)} {k}" for k in dict.fromkeys(answered))
            + "."
        )
    if any(f.get("rawInput") in (None, "", {}) for f in facts.values()):
        b.note(
            "Some tool calls came without their input (ACP's rawInput): their arguments are "
            "the title the agent gave them (for a command, the command line) and their paths."
        )
    error = _outcome_of(session)[1]
    if error:
        b.note(f"The session ended early: {error}")
    return b.build()


def _no_client(python: str, why: str) -> str:
    """Why KSI's client did not run, and what the environment needs for it."""
    return (
        f"KSI's ACP client did not start under {python!r} ({why}): the environment needs "
        f"Python 3.10+ with the agent-client-protocol package ({acp_client.INSTALL_HINT}), "
        "or the acp agent's python option naming such a Python"
    )


@attrs.frozen
class AcpAgent(AgentBase):
    """An ACP agent over stdio, driven by KSI's client in the attempt's environment."""

    name: ClassVar[str] = "acp"
    aliases: ClassVar[tuple[str, ...]] = ("agent-client-protocol",)
    description: ClassVar[str] = (
        "Any Agent Client Protocol agent (--agent-option cmd='gemini --acp'): KSI's client "
        "sends the prompt, answers permission requests per `permission` (allow, "
        "allow-always, deny) and records the session. Needs pip install 'ksi[acp]'."
    )
    #: The session log, kept in the attempt directory.
    trajectory_file: ClassVar[str] = LOG_FILE

    #: The shell command that starts the ACP agent on stdio (``/bin/sh -c``, cwd the
    #: workspace; ``$KSI_MODEL`` holds ``--model``).
    cmd: str | None = attrs.field(default=None, validator=_need_cmd)
    #: How permission requests are answered: ``allow`` (the allow-once option, so every
    #: request is asked and logged), ``allow-always``, ``deny`` (reject once).
    permission: str = choice_field("allow", tuple(acp_client.POLICIES))
    #: A session mode to switch to first (the agent's ids, e.g. Gemini CLI's ``yolo``).
    mode: str = attrs.field(default="", validator=_string)
    #: An auth method id to authenticate with before the session (the agent's ids).
    auth: str = attrs.field(default="", validator=_string)
    #: ``HOST:PORT[,...]`` or URLs the agent needs (its model API): the only network it
    #: gets in the ``sandbox`` and ``docker`` environments.
    endpoints: str = attrs.field(default="", validator=lambda _i, _a, v: parse_endpoints(v))
    #: The Python that runs KSI's client; empty: KSI's own where the agent sees the host's
    #: files, else ``python3``.
    python: str = attrs.field(default="", validator=_string)

    def interpreter(self, ctx: AgentContext) -> str:
        """The Python the client runs under (see :attr:`python`)."""
        if self.python:
            return self.python
        sees_host = Path(ctx.workspace_path).resolve() == ctx.host_workspace.resolve()
        return sys.executable if sees_host else "python3"

    def setup(self, ctx: AgentContext) -> None:
        """The prompt file and the client in ``.ksi/``; no stale log."""
        write_prompt(ctx)
        ksi_dir = ctx.host_workspace / ".ksi"
        shutil.copyfile(acp_client.__file__, ksi_dir / CLIENT_FILE)
        (ksi_dir / LOG_FILE).unlink(missing_ok=True)
        if self.interpreter(ctx) == sys.executable and importlib.util.find_spec("acp") is None:
            raise UserInputError(
                f"agent 'acp' needs the agent-client-protocol package in KSI's Python "
                f"({sys.executable}): {acp_client.INSTALL_HINT}"
            )

    def invocation(self, ctx: AgentContext) -> Invocation:
        ksi_dir = ctx.workspace_path.rstrip("/") + "/.ksi/"
        argv = [self.interpreter(ctx), ksi_dir + CLIENT_FILE, "--log", ksi_dir + LOG_FILE]
        argv += ["--prompt-file", prompt_path(ctx), "--permission", self.permission]
        argv += ["--client-version", __version__]
        for flag, value in (("--mode", self.mode), ("--auth", self.auth)):
            if value:
                argv += [flag, value]
        assert self.cmd is not None  # the validator guarantees it
        return Invocation(
            argv=(*argv, "--", self.cmd),
            env={**attempt_env(ctx), "KSI_PROMPT_FILE": prompt_path(ctx)},
            cwd=".",
            endpoints=parse_endpoints(self.endpoints),
        )

    def parse(self, ctx: AgentContext, result: ExecResult) -> Parsed:
        """The outcome the session log states."""
        session = read_session(ctx.host_workspace / ".ksi" / LOG_FILE)
        if not session.started:
            stderr = read_tail(result.stderr_path, 2000).strip() if result.stderr_path else ""
            why = f"stderr: {stderr}" if stderr else "it wrote no log"
            return Parsed(error=_no_client(self.interpreter(ctx), why), status=AgentStatus.ERROR)
        status, error = _outcome_of(session)
        return Parsed(
            usage=acp_usage(session),
            final_message=final_message(session),
            error=error,
            status=status,
            succeeded=session.result is not None and not error,
        )

    def trajectory(self, ctx: AgentContext, result: ExecResult | None) -> Trajectory | None:
        """The session log's steps (:func:`acp_trajectory`)."""
        if result is None:
            return None
        return acp_trajectory(self.name, ctx, read_session(ctx.host_workspace / ".ksi" / LOG_FILE))

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        """Classify the run from the session log and the client's exit status."""
        if result is None:
            return AgentOutcome(AgentStatus.CRASHED, error="acp: the agent process never ran")
        keep_ksi_file(ctx, LOG_FILE)
        python = self.interpreter(ctx)
        if result.spawn_error:
            return AgentOutcome(AgentStatus.ERROR, error=_no_client(python, result.spawn_error))
        try:
            parsed = self.parse(ctx, result)
        except Exception as exc:  # a parser bug must not lose the attempt
            parsed = Parsed(error=f"KSI could not read the ACP session log: {exc}")
        return parsed_outcome(self.name, python, result, parsed)


@hookimpl(trylast=True)
def ksi_register_agents(register: Register) -> None:
    register(AcpAgent)
