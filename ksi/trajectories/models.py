"""What an agent did in one attempt, as typed values: the trajectory and its steps.

An agent plugin reads its CLI's own output into a :class:`Trajectory`
(:meth:`ksi.interfaces.Agent.trajectory`); KSI bounds it and writes it as the
attempt's ``trajectory.json`` in ATIF (:mod:`ksi.trajectories.atif`), the
Agent Trajectory Interchange Format that Harbor and other tools read.

The models follow ATIF's shape, with KSI's meaning of usage
(:class:`ksi.models.Usage`: uncached input, cache reads and writes apart), so
a step's usage adds up to the attempt record's with
:func:`ksi.models.total_usage`. ATIF's own rules are checked when a value is
built, so a plugin cannot hand KSI a trajectory other tools would refuse:
only agent steps carry tool calls, usage, a model or reasoning, and every
tool result answers a call of its own step (or none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ksi.models import Usage, total_usage

#: The ATIF version KSI writes (Harbor's validator accepts it).
ATIF_VERSION = "ATIF-v1.7"
#: Who a step comes from: the user (the task's prompt), the agent (a model turn and
#: what its tools returned) or the system (the CLI or KSI saying something).
SOURCES: tuple[str, ...] = ("user", "agent", "system")


def _json_object(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"{attribute.name} must be a JSON object (str keys), got {value!r:.80}")


@attrs.frozen
class ToolCall:
    """One tool the model asked for, with its arguments as the model gave them."""

    #: The id the CLI gave the call (a result names it); unique within the trajectory.
    call_id: str
    #: The tool's name as the CLI names it (``Bash``, ``exec_command``, ``write``...).
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict, validator=_json_object)


@attrs.frozen
class ToolResult:
    """What a tool call returned (or what the agent's environment said, with no call)."""

    #: The call it answers; ``None`` for an observation no call asked for (Aider's
    #: "Applied edit to ...", the ``command`` agent's output when it has no call).
    call_id: str | None
    output: str = ""
    #: The command's exit status, where the CLI reports one.
    exit_code: int | None = None
    #: The CLI's own verdict that the call failed (Claude Code's ``is_error``, a tool
    #: status ``error``); ``None`` when it gives none.
    failed: bool | None = None

    @property
    def is_failure(self) -> bool:
        """Whether the call failed: a nonzero exit status, or the CLI said so."""
        return bool(self.failed) or (self.exit_code is not None and self.exit_code != 0)


def _source(_inst: object, _attr: object, value: str) -> None:
    if value not in SOURCES:
        raise ValueError(f"step source {value!r}: expected one of {', '.join(SOURCES)}")


@attrs.frozen
class Step:
    """One turn: a user message, a model response with its tool calls and their results,
    or a system message."""

    source: str = attrs.field(validator=_source)
    message: str = ""
    #: ISO 8601, when the CLI says when the step happened.
    timestamp: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()
    #: This model call's usage, when the CLI reports it per call (KSI's meaning).
    usage: Usage | None = None
    #: The model of this call, when it differs from the trajectory's.
    model: str | None = None
    #: The model's reasoning or thinking text, when the CLI shows it.
    reasoning: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.source != "agent":
            given = [
                name
                for name in ("tool_calls", "usage", "model", "reasoning")
                if getattr(self, name) not in (None, ())
            ]
            if given:
                raise ValueError(
                    f"a {self.source} step cannot carry {', '.join(given)} (agent steps only)"
                )
        ids = {c.call_id for c in self.tool_calls}
        stray = [r.call_id for r in self.results if r.call_id is not None and r.call_id not in ids]
        if stray:
            raise ValueError(f"tool results {stray} answer no tool call of their step")


@attrs.frozen
class Trajectory:
    """Every step of one agent run, in order, and what is known about the run."""

    #: The KSI agent name (``claude-code``).
    agent: str
    steps: tuple[Step, ...]
    #: The CLI's version, when its output says.
    agent_version: str | None = None
    model: str | None = None
    #: The CLI's own session or thread id.
    session_id: str | None = None
    #: The workspace as the agent saw it: paths under it are shown relative to it.
    workspace: str | None = None
    #: What the trajectory lacks or how it was read (one sentence each): where the CLI
    #: gives less than ATIF can hold, this says so rather than inventing steps.
    notes: tuple[str, ...] = ()
    #: The run's total usage as the attempt record has it (set by KSI when it writes
    #: the file); ``None``: the sum of the steps' usage.
    usage: Usage | None = None

    def __attrs_post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a trajectory has at least one step (ATIF requires it)")

    @property
    def call_count(self) -> int:
        """How many tool calls its steps made."""
        return sum(len(s.tool_calls) for s in self.steps)

    @property
    def failure_count(self) -> int:
        """How many tool results failed (:attr:`ToolResult.is_failure`)."""
        return sum(1 for s in self.steps for r in s.results if r.is_failure)

    def step_usage(self) -> Usage:
        """The sum of the steps' own usage (what the CLI reported per call)."""
        return total_usage([s.usage for s in self.steps if s.usage is not None])
