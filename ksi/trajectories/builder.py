"""Building a trajectory while reading a CLI's output: the helper every agent plugin uses.

A CLI prints its run as events in its own order: a model message in pieces,
a tool call, later the call's output, the usage when the response ends.
:class:`TrajectoryBuilder` takes them as they come and files each where ATIF
wants it: text and tool calls on the current agent step, a tool's output on
the step that made the call (whenever it arrives), usage on the step it
belongs to. Every text is cut as it comes in (:func:`ksi.trajectories.writer.cut_text`),
so reading a huge log holds no more than the trajectory will::

    b = TrajectoryBuilder("my-agent", prompt=ctx.prompt, model=ctx.model,
                          workspace=ctx.workspace_path)
    for event in json_lines(result.stdout_path):
        if event["type"] == "message":
            b.agent_step(event["text"], timestamp=iso_time(event.get("time")))
        elif event["type"] == "tool":
            b.call(event["id"], event["name"], arguments(event["input"]))
        elif event["type"] == "tool_output":
            b.result(event["id"], event["output"], exit_code=event.get("exit"))
        elif event["type"] == "usage":
            b.set_usage(Usage(event["input"], event["output"]))
    b.note("my-agent prints no timestamps")
    return b.build()
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from ksi.models import Usage
from ksi.trajectories.models import Step, ToolCall, ToolResult, Trajectory
from ksi.trajectories.writer import DEFAULT_LIMITS, Limits, cut_json, cut_text


def iso_time(value: Any) -> str | None:
    """A timestamp as ATIF wants it (ISO 8601), from ISO text or epoch seconds or
    milliseconds; ``None`` for anything else (a CLI's timestamp is never trusted)."""
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
        except (OverflowError, OSError, ValueError):
            return None
    return None


def arguments(value: Any) -> dict[str, Any]:
    """A tool call's arguments as a JSON object: as given, decoded from the JSON text many
    APIs send, or ``{"input": value}`` for anything else (a raw patch, a list)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return {"input": value}
        if isinstance(decoded, dict):
            return decoded
    return {"input": value}


@attrs.define
class _Draft:
    """A step while it is being read (frozen into a :class:`Step` by ``build``)."""

    source: str
    texts: list[str] = attrs.field(factory=list)
    timestamp: str | None = None
    calls: list[ToolCall] = attrs.field(factory=list)
    results: list[ToolResult] = attrs.field(factory=list)
    usage: Usage | None = None
    model: str | None = None
    reasoning: list[str] = attrs.field(factory=list)


class TrajectoryBuilder:
    """Collects steps as a CLI's output is read (see the module docstring)."""

    def __init__(
        self,
        agent: str,
        *,
        prompt: str | None = None,
        model: str | None = None,
        workspace: str | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        """``prompt``, when given, is step 1 (the task as KSI gave it to the agent)."""
        self.agent = agent
        self.model = model
        self.workspace = workspace
        #: Set when the CLI's output names them.
        self.session_id: str | None = None
        self.agent_version: str | None = None
        self._cap = limits.text_bytes
        self._steps: list[_Draft] = []
        self._owner: dict[str, _Draft] = {}
        self._notes: list[str] = []
        if prompt is not None:
            self.user(prompt)

    # -- steps -----------------------------------------------------------------------
    def user(self, message: str, *, timestamp: str | None = None) -> None:
        """A user step (a message the CLI was given after the prompt)."""
        self._steps.append(_Draft("user", [self._cut(message)], timestamp))

    def system(self, message: str, *, timestamp: str | None = None) -> None:
        """A system step: the CLI (or KSI) saying something that is not the model's."""
        self._steps.append(_Draft("system", [self._cut(message)], timestamp))

    def agent_step(
        self,
        message: str = "",
        *,
        timestamp: str | None = None,
        usage: Usage | None = None,
        model: str | None = None,
        reasoning: str = "",
    ) -> int:
        """Start a new agent step (one model response); calls and text go on it from now.

        Returns the step's handle, for :meth:`set_usage` once the response's usage is known.
        """
        draft = _Draft("agent", [], timestamp, usage=usage, model=model)
        self._steps.append(draft)
        self.say(message)
        self.think(reasoning)
        return len(self._steps) - 1

    def say(self, text: str) -> None:
        """More of the current agent step's message."""
        if text:
            self._agent().texts.append(self._cut(text))
            self._compact(self._agent().texts)

    def think(self, text: str) -> None:
        """More of the current agent step's reasoning."""
        if text:
            self._agent().reasoning.append(self._cut(text))
            self._compact(self._agent().reasoning)

    def call(self, call_id: str, name: str, args: Mapping[str, Any]) -> str:
        """A tool call on the current agent step; returns its id (made unique if it was not)."""
        draft = self._agent()
        call_id = call_id or f"call-{len(self._owner) + 1}"
        if call_id in self._owner:
            call_id = f"{call_id}#{len(self._owner) + 1}"
        draft.calls.append(
            ToolCall(self._cut(call_id), self._cut(name or "tool"), cut_json(args, self._cap))
        )
        self._owner[draft.calls[-1].call_id] = draft
        return draft.calls[-1].call_id

    def result(
        self,
        call_id: str | None,
        output: str,
        *,
        exit_code: int | None = None,
        failed: bool | None = None,
    ) -> None:
        """A tool's output, filed on the step that made call ``call_id``.

        A result for a call this trajectory does not hold (its step was never
        printed) goes on the current agent step without a call id.
        """
        cid = None if call_id is None else self._cut(call_id)
        owner = self._owner.get(cid) if cid is not None else None
        draft = owner or self._agent()
        cid = cid if owner is not None else None
        draft.results.append(ToolResult(cid, self._cut(output), exit_code, failed))

    def observe(self, output: str, *, exit_code: int | None = None) -> None:
        """What the agent's environment showed with no tool call (Aider's applied edits)."""
        self.result(None, output, exit_code=exit_code)

    def set_usage(self, usage: Usage, step: int | None = None) -> None:
        """An agent step's usage (one model call's): the current step's, or ``step``'s
        (a handle :meth:`agent_step` returned)."""
        draft = self._agent() if step is None else self._steps[step]
        if draft.source == "agent":
            draft.usage = usage

    def note(self, text: str) -> None:
        """What the trajectory lacks or how it was read (the file's ``notes``)."""
        if text not in self._notes:
            self._notes.append(text)

    def build(self) -> Trajectory | None:
        """The trajectory read so far; ``None`` when no step was."""
        if not self._steps:
            return None
        return Trajectory(
            agent=self.agent,
            steps=tuple(self._freeze(d) for d in self._steps),
            agent_version=self.agent_version,
            model=self.model,
            session_id=self.session_id,
            workspace=self.workspace,
            notes=tuple(self._notes),
        )

    # -- inside ----------------------------------------------------------------------
    def _cut(self, text: str) -> str:
        return cut_text(str(text), self._cap)

    def _compact(self, parts: list[str]) -> None:
        """Keep a text that arrives in many pieces within the cap as it grows."""
        if len(parts) > 1 and sum(len(p) for p in parts) > 2 * self._cap:
            parts[:] = [self._cut("".join(parts))]

    def _agent(self) -> _Draft:
        """The current agent step (a new one when the last step is not an agent's)."""
        if not self._steps or self._steps[-1].source != "agent":
            self._steps.append(_Draft("agent"))
        return self._steps[-1]

    def _freeze(self, d: _Draft) -> Step:
        reasoning = "".join(d.reasoning) if d.reasoning else None
        return Step(
            source=d.source,
            message=self._cut("".join(d.texts)),
            timestamp=d.timestamp,
            tool_calls=tuple(d.calls),
            results=tuple(d.results),
            usage=d.usage,
            model=d.model if d.model != self.model else None,
            reasoning=self._cut(reasoning) if reasoning else None,
        )
