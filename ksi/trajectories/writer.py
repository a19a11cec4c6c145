"""Writing ``trajectory.json`` within bounds, and reading it back.

An agent that prints a gigabyte must not leave a gigabyte trajectory: every
text (a message, a tool's output, its reasoning, a string among a call's
arguments) is cut to :attr:`Limits.text_bytes`, keeping its start and its end
around a marker that says how much went (``[... KSI cut 12,345 of 99,999
bytes here ...]``); if the document is still over :attr:`Limits.total_bytes`
the cap is halved until it fits, and past :attr:`Limits.steps` the middle
steps give way to one system step saying which went. The step structure
(who said what, which call each result answers) is kept; the trajectory's
notes say what was cut.

The file is ASCII JSON: whatever an agent printed (terminal escapes,
right-to-left overrides, lone surrogates) is an escape in it, inert when the
file is shown with ``cat``; a reader gets the text back unchanged (lone
surrogates become U+FFFD, which UTF-8 cannot hold).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from ksi.fileops import write_text_atomic
from ksi.trajectories.atif import from_atif, to_atif
from ksi.trajectories.models import Step, ToolCall, Trajectory

#: The attempt's file, beside its logs.
TRAJECTORY_FILE = "trajectory.json"
_SURROGATE = re.compile("[\ud800-\udfff]")
#: What marks a cut, and the bytes left for it, so a cut text fits its limit.
MARK = "[... KSI cut "
_MARK_ROOM = 64


@attrs.frozen
class Limits:
    """How big a trajectory may get (see the module docstring)."""

    #: Any one text, in UTF-8 bytes.
    text_bytes: int = 16 * 1024
    #: The whole document, in bytes as written.
    total_bytes: int = 8 * 1024 * 1024
    #: Steps kept; past it the middle ones are left out.
    steps: int = 5_000
    #: The cap a text is never cut below while the document is over its total.
    min_text_bytes: int = 256


DEFAULT_LIMITS = Limits()


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (from a JSON ``\\ud800`` escape) replaced: UTF-8 cannot
    hold them, and a reader of the file would choke."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def cut_text(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-8 bytes (plus the marker): its start and its end."""
    text = clean_text(text)
    if len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    half = max((limit - _MARK_ROOM) // 2, 1)
    return _marked(data[:half], data[-half:], len(data))


def _marked(head: bytes, tail: bytes, total: int) -> str:
    start = clean_text(head.decode("utf-8", "ignore"))
    end = clean_text(tail.decode("utf-8", "ignore"))
    gone = total - len(start.encode()) - len(end.encode())
    return f"{start}\n{MARK}{gone:,} of {total:,} bytes here ...]\n{end}"


def read_log(path: Path | str | None, limit: int = DEFAULT_LIMITS.text_bytes) -> str:
    """A log's text within ``limit`` bytes, its start and its end, read without loading
    the rest (a command's gigabyte of output costs two small reads)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            total = fh.tell()
            fh.seek(0)
            if total <= limit:
                return clean_text(fh.read().decode("utf-8", "replace"))
            half = max((limit - _MARK_ROOM) // 2, 1)
            head = fh.read(half)
            fh.seek(total - half)
            return _marked(head, fh.read(half), total)
    except OSError:
        return ""


def cut_json(value: Any, limit: int) -> Any:
    """A JSON value with every string in it cut to ``limit`` bytes (keys too, and at most
    ``limit`` items per list or object: a call's arguments can be as hostile as its output)."""
    if isinstance(value, str):
        return cut_text(value, limit)
    if isinstance(value, Mapping):
        items = list(value.items())[:limit]
        return {cut_text(str(k), limit): cut_json(v, limit) for k, v in items}
    if isinstance(value, list | tuple):
        return [cut_json(v, limit) for v in list(value)[:limit]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return cut_text(str(value), limit)


def _cut_step(step: Step, limit: int) -> Step:
    return attrs.evolve(
        step,
        message=cut_text(step.message, limit),
        reasoning=None if step.reasoning is None else cut_text(step.reasoning, limit),
        tool_calls=tuple(
            ToolCall(
                cut_text(c.call_id, limit), cut_text(c.name, limit), cut_json(c.arguments, limit)
            )
            for c in step.tool_calls
        ),
        results=tuple(
            attrs.evolve(
                r,
                call_id=None if r.call_id is None else cut_text(r.call_id, limit),
                output=cut_text(r.output, limit),
            )
            for r in step.results
        ),
    )


def _elide(steps: tuple[Step, ...], keep: int) -> tuple[tuple[Step, ...], str]:
    """The first and last steps, ``keep`` in all, with one system step for those left out."""
    head = max(keep // 2, 1)
    tail = max(keep - head - 1, 1)
    gone = len(steps) - head - tail
    note = (
        f"KSI left out steps {head + 1} to {head + gone} ({gone:,} of {len(steps):,}) "
        "to keep this file within its size limit."
    )
    return (*steps[:head], Step("system", note), *steps[-tail:]), note


def _size(traj: Trajectory) -> int:
    return len(dumps(to_atif(traj)))


def dumps(doc: Mapping[str, Any]) -> str:
    """How ``trajectory.json`` is written: ASCII JSON (see the module docstring)."""
    return json.dumps(doc, ensure_ascii=True, separators=(",", ":"))


def bound(traj: Trajectory, limits: Limits = DEFAULT_LIMITS) -> Trajectory:
    """``traj`` within ``limits``, with a note saying what was cut."""
    steps, notes = traj.steps, list(traj.notes)
    if len(steps) > limits.steps:
        steps, note = _elide(steps, limits.steps)
        notes.append(note)
    cap = limits.text_bytes
    while True:
        shaped = attrs.evolve(traj, steps=tuple(_cut_step(s, cap) for s in steps))
        if _size(shaped) <= limits.total_bytes:
            break
        if cap > limits.min_text_bytes:
            cap = max(cap // 2, limits.min_text_bytes)
        elif len(steps) > 3:
            steps, note = _elide(steps, len(steps) // 2)
            notes.append(note)
        else:
            break
    if any(MARK in text for step in shaped.steps for text in _texts(step)):
        notes.append(
            f"KSI cut texts over {cap:,} bytes to their start and end, marked where: "
            f"{MARK}N of M bytes here ...]."
        )
    return attrs.evolve(shaped, notes=tuple(notes))


def _texts(step: Step) -> Iterator[str]:
    yield step.message
    if step.reasoning:
        yield step.reasoning
    for result in step.results:
        yield result.output
    for call in step.tool_calls:
        yield json.dumps(call.arguments)


def write_trajectory(
    path: Path, traj: Trajectory, limits: Limits = DEFAULT_LIMITS, *, parents: bool = True
) -> None:
    """Write ``traj`` to ``path`` as ATIF, within ``limits`` (atomically); ``parents=False``
    for a writer that knows the directory exists (no mkdir)."""
    text = dumps(to_atif(bound(traj, limits))) + "\n"
    write_text_atomic(path, text, durable=False, parents=parents)


#: The most of a ``trajectory.json`` a reader reads: four times what KSI writes.
MAX_READ_BYTES = 4 * DEFAULT_LIMITS.total_bytes


def read_trajectory(path: Path, max_bytes: int = MAX_READ_BYTES) -> Trajectory:
    """The trajectory in ``path``; :class:`ValueError` when it is not one KSI can read
    (``OSError`` when it cannot be read at all). A file far over what KSI writes is
    refused unread: the attempt directory is the agent's to fill in some environments."""
    with open(path, "rb") as fh:
        return parse_trajectory(fh.read(max_bytes + 1), path.name, max_bytes)


def parse_trajectory(data: bytes, name: str, max_bytes: int = MAX_READ_BYTES) -> Trajectory:
    """The trajectory in ``data`` (read from ``name``, at most ``max_bytes + 1`` of it), for
    readers that open the file their own way (a viewer reads only inside a run directory)."""
    if len(data) > max_bytes:
        raise ValueError(f"{name} is over {max_bytes:,} bytes; KSI writes at most its limit")
    try:
        doc = json.loads(data.decode("utf-8", "replace"))
    except ValueError as exc:
        raise ValueError(f"{name} is not JSON ({exc})") from exc
    return from_atif(doc)
