"""An attempt's trajectory as a person reads it: a timeline of steps, bounded for a page.

``trajectory.json`` (:mod:`ksi.trajectories`) holds every step of an attempt:
who spoke, each tool call with its arguments, what it returned, the step's
tokens. The report shows them collapsed, one line per step, failures marked;
``ksi show RUN TASK ATTEMPT --steps`` prints the same in a terminal.

A page must stay a page: a run of 1,000 attempts of 200 steps each cannot
inline every tool output. As with the logs (:func:`ksi.view.runs.fair_limit`),
a run's :data:`TRAJECTORY_BUDGET_BYTES` is shared out by the files' sizes;
each attempt's share bounds how many steps it inlines (past them the page
says how many more there are and links the file) and how much of each text
(:data:`STEP_TEXT_CAP` at most: a tool's output its end, as for logs, any
other text its start and end, with a marker saying how much went). The file
is opened only inside the run directory (:func:`ksi.fstree.open_file_inside`),
like every other file a view reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import attrs

from ksi.fstree import open_file_inside
from ksi.models import Usage
from ksi.trajectories import TRAJECTORY_FILE, Step, Trajectory
from ksi.trajectories.writer import MARK, MAX_READ_BYTES, clean_text, cut_text, parse_trajectory

#: Bytes of trajectory text one run's page inlines at most (steps and their texts).
TRAJECTORY_BUDGET_BYTES = 16 * 1024 * 1024
#: The most of one text (a message, a call's arguments, a tool's output) a step inlines.
STEP_TEXT_CAP = 2048
#: The least of one text shown, however small the attempt's share.
STEP_TEXT_FLOOR = 160
#: What one step costs the page before its texts (its summary line and markup: measured,
#: about 500 bytes in a 2,000-step page).
STEP_MARKUP_BYTES = 500
#: Steps inlined however small the attempt's share.
MIN_STEPS = 10


@attrs.frozen
class CallView:
    """A tool call and what it returned, or (``name`` None) output no call asked for."""

    name: str | None
    #: The arguments as indented JSON, cut to the attempt's text cap.
    arguments: str
    #: What the call returned (``None``: no result was recorded).
    output: str | None
    exit_code: int | None = None
    failed: bool = False


@attrs.frozen
class StepView:
    number: int
    source: str
    message: str
    reasoning: str | None
    calls: tuple[CallView, ...]
    usage: Usage | None
    timestamp: str | None = None
    model: str | None = None
    #: Whether some text of the step was cut for the page (the file holds it whole).
    cut: bool = False

    @property
    def failed(self) -> bool:
        return any(c.failed for c in self.calls)

    @property
    def tokens(self) -> int | None:
        """All the step's tokens (input, cache read and written, output), when reported."""
        u = self.usage
        if u is None:
            return None
        return u.input_tokens + u.cache_read_tokens + u.cache_write_tokens + u.output_tokens

    @property
    def tool_names(self) -> list[str]:
        return [c.name for c in self.calls if c.name is not None]

    @property
    def headline(self) -> str:
        """The step in one line: its tools, or the start of its message."""
        names = self.tool_names
        if names:
            return ", ".join(names)
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return first[:120] + ("…" if len(first) > 120 else "")


@attrs.frozen
class TrajectoryView:
    """What a view shows of one attempt's ``trajectory.json``."""

    #: The file, relative to the run directory.
    file: str
    #: The steps inlined: the first ones, up to the attempt's share.
    steps: tuple[StepView, ...]
    total_steps: int
    tool_calls: int
    #: Tool results that failed (a nonzero exit, or the CLI said so).
    tool_errors: int
    notes: tuple[str, ...] = ()
    usage: Usage | None = None
    agent: str = ""
    model: str | None = None
    #: Why the file could not be read (``""``: it was).
    problem: str = ""

    @property
    def hidden_steps(self) -> int:
        return self.total_steps - len(self.steps)


def _calls(step: Step, cap: int) -> Iterator[tuple[CallView, bool]]:
    answered = {r.call_id: r for r in step.results if r.call_id is not None}
    for call in step.tool_calls:
        args = json.dumps(dict(call.arguments), indent=2, ensure_ascii=False, default=str)
        result = answered.get(call.call_id)
        shown_args = cut_text(args, cap)
        output = None if result is None else tail_text(result.output, cap)
        cut = shown_args != args or (result is not None and output != result.output)
        yield (
            CallView(
                name=call.name,
                arguments=shown_args,
                output=output,
                exit_code=None if result is None else result.exit_code,
                failed=result is not None and result.is_failure,
            ),
            cut,
        )
    for result in step.results:
        if result.call_id is None or result.call_id not in {c.call_id for c in step.tool_calls}:
            output = tail_text(result.output, cap)
            yield (
                CallView(
                    name=None,
                    arguments="",
                    output=output,
                    exit_code=result.exit_code,
                    failed=result.is_failure,
                ),
                output != result.output,
            )


def tail_text(text: str, limit: int) -> str:
    """The end of a tool's output within ``limit`` UTF-8 bytes, after a marker saying how
    much went: as with logs, the end of a command's output is where its story ends."""
    text = clean_text(text)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    tail = data[-max(limit - 64, 1) :].decode("utf-8", "ignore")
    gone = len(data) - len(tail.encode("utf-8"))
    return f"{MARK}{gone:,} of {len(data):,} bytes here ...]\n{tail}"


def step_view(number: int, step: Step, cap: int) -> StepView:
    """``step`` (the ``number``-th, from 1) with every text cut to ``cap`` bytes."""
    calls = list(_calls(step, cap))
    message = cut_text(step.message, cap)
    reasoning = None if step.reasoning is None else cut_text(step.reasoning, cap)
    return StepView(
        number=number,
        source=step.source,
        message=message,
        reasoning=reasoning,
        calls=tuple(c for c, _ in calls),
        usage=step.usage,
        timestamp=step.timestamp,
        model=step.model,
        cut=message != step.message or reasoning != step.reasoning or any(cut for _, cut in calls),
    )


def _texts(step: Step) -> int:
    return (
        bool(step.message)
        + bool(step.reasoning)
        + 2 * len(step.tool_calls)
        + sum(1 for r in step.results if r.call_id is None)
    )


def trajectory_view(traj: Trajectory, file: str, share: int | None = None) -> TrajectoryView:
    """``traj`` as a view shows it, within ``share`` bytes (``None``: every step, each text
    within :data:`STEP_TEXT_CAP`)."""
    steps = traj.steps
    if share is None:
        shown, cap = len(steps), STEP_TEXT_CAP
    else:
        # Each step shown costs its markup and at least two texts at the floor.
        least = STEP_MARKUP_BYTES + 2 * STEP_TEXT_FLOOR
        shown = min(len(steps), max(MIN_STEPS, share // least))
        texts = sum(_texts(s) for s in steps[:shown]) or 1
        room = max(share - shown * STEP_MARKUP_BYTES, 0)
        cap = min(STEP_TEXT_CAP, max(STEP_TEXT_FLOOR, room // texts))
    return TrajectoryView(
        file=file,
        steps=tuple(step_view(n, s, cap) for n, s in enumerate(steps[:shown], start=1)),
        total_steps=len(steps),
        tool_calls=traj.call_count,
        tool_errors=traj.failure_count,
        notes=traj.notes,
        usage=traj.usage if traj.usage is not None else traj.step_usage(),
        agent=traj.agent,
        model=traj.model,
    )


def trajectory_bytes(root: str, attempt_dir: str) -> bytes | None:
    """``<attempt_dir>/trajectory.json`` below ``root`` (at most one byte over what a reader
    accepts); ``None`` when there is none. :class:`ValueError` says why a file that is
    there was not read: a link, a fifo, a directory on the way that is a link (never
    followed out of the run), or a read error."""
    try:
        fd = open_file_inside(root, f"{attempt_dir}/{TRAJECTORY_FILE}")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"not read ({exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as fh:
        try:
            return fh.read(MAX_READ_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"not read ({exc.strerror or exc})") from exc


def load_trajectory_view(
    root: str, attempt_dir: str, share: int | None = None
) -> TrajectoryView | None:
    """The view of ``<attempt_dir>/trajectory.json`` below ``root``; ``None`` when there is
    none. A file that is there but cannot be read gives a view saying why, with no steps:
    a person should see that the agent's steps were lost, not that there were none."""
    rel = f"{attempt_dir}/{TRAJECTORY_FILE}"
    try:
        data = trajectory_bytes(root, attempt_dir)
    except ValueError as exc:
        return _unreadable(rel, str(exc))
    if data is None:
        return None
    try:
        traj = parse_trajectory(data, TRAJECTORY_FILE)
    except ValueError as exc:
        return _unreadable(rel, f"not a trajectory KSI can read: {cut_text(str(exc), 500)}")
    return trajectory_view(traj, rel, share)


def _unreadable(rel: str, why: str) -> TrajectoryView:
    return TrajectoryView(
        file=rel, steps=(), total_steps=0, tool_calls=0, tool_errors=0, problem=why
    )
