"""A compact digest of a trajectory, for the knowledge loop's evidence.

A distiller cannot read every step of every attempt; what it can use is
short: the commands that failed and the lines that said why, the files the
agent's tools named, the step at which it first ran the tests (late, or
never, is a pattern worth a note), and the commands it ran again and again
unchanged. :func:`digest` reads those off any agent's trajectory, by the
shape of the tool calls (a ``command`` or ``cmd`` argument is a shell
command; ``file_path``, ``path``... name files), never by one CLI's names.
It is bounded: at most ``max_bytes`` of JSON, the lists cut from their ends
(the first and the last failures are kept).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from ksi.serialization import to_data
from ksi.trajectories.models import ToolCall, ToolResult, Trajectory

#: Arguments that hold a shell command (Claude Code's Bash, Codex's exec_command,
#: Gemini's run_shell_command, OpenCode's and mini's bash, KSI's own shell).
_COMMAND_KEYS = ("command", "cmd", "commands")
#: Arguments that name a file.
_PATH_KEYS = (
    "file_path",
    "filePath",
    "path",
    "file",
    "filename",
    "notebook_path",
    "absolute_path",
    "target_file",
)
#: Codex's apply_patch names the files it changes on lines like these.
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
#: A command that runs a test suite.
_TEST_COMMAND = re.compile(
    r"\b(?:py\.?test|unittest|nose2?|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest"
    r"|go test|cargo test|(?:npm|yarn|pnpm|bun|deno)(?: run)? test|make (?:test|check)"
    r"|mvn (?:-\S+ )*test|gradlew? test|dotnet test|mix test|swift test|run_tests|tests?\.sh)\b"
)
#: Lines of a failed command's output that say what went wrong.
_ERROR_LINE = re.compile(
    r"error|fail|traceback|exception|fatal|denied|not found|no such|cannot|can't|invalid"
    r"|assert|panic|segmentation|killed|timed? ?out",
    re.IGNORECASE,
)
_MAX_COMMAND = 240
_MAX_LINE = 240
_ERROR_LINES = 3
#: Most items a list holds before the byte bound trims it further.
_MAX_FAILED = 20
_MAX_FILES = 60
_MAX_REPEATED = 10


@attrs.frozen
class FailedCommand:
    """A tool call that failed: where, what, and the lines that said why."""

    step: int
    command: str
    exit_code: int | None = None
    error_lines: tuple[str, ...] = ()


@attrs.frozen
class RepeatedCommand:
    """A command the agent ran more than once, unchanged."""

    command: str
    times: int
    #: The steps it ran at (the first few).
    steps: tuple[int, ...] = ()


@attrs.frozen
class TrajectoryDigest:
    """What an attempt's trajectory says, in a few lines (see the module docstring)."""

    steps: int
    tool_calls: int
    failed: tuple[FailedCommand, ...] = ()
    #: How many calls failed in all (``failed`` may hold fewer, to stay in bounds).
    failed_total: int = 0
    #: Files the agent's tools named (read or written), relative to the workspace.
    files: tuple[str, ...] = ()
    #: The step at which the agent first ran the tests, and the command (None: never).
    first_test_step: int | None = None
    first_test_command: str = ""
    repeated: tuple[RepeatedCommand, ...] = ()


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def shell_command(call: ToolCall) -> str | None:
    """The shell command a tool call runs, or ``None`` when it is not a shell call."""
    for key in _COMMAND_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def describe(call: ToolCall) -> str:
    """One line for a call: its command, or its name and arguments."""
    command = shell_command(call)
    if command is not None:
        return _one_line(command, _MAX_COMMAND)
    args = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True, default=str)
    return _one_line(f"{call.name} {args}", _MAX_COMMAND)


def _relative(path: str, workspace: str | None) -> str:
    if workspace:
        root = workspace.rstrip("/") + "/"
        if path.startswith(root):
            return path[len(root) :]
    return path


def _paths(call: ToolCall) -> Iterator[str]:
    for key in _PATH_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value.strip():
            yield value.strip()
    for value in call.arguments.values():
        if isinstance(value, str) and "*** " in value:
            yield from (m.strip() for m in _PATCH_FILE.findall(value))


def error_lines(output: str) -> tuple[str, ...]:
    """The last lines of ``output`` that say what went wrong (else its last line)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    found = [ln for ln in lines if _ERROR_LINE.search(ln)] or lines[-1:]
    return tuple(_one_line(ln, _MAX_LINE) for ln in found[-_ERROR_LINES:])


def _calls(traj: Trajectory) -> Iterator[tuple[int, ToolCall, ToolResult | None]]:
    for number, step in enumerate(traj.steps, start=1):
        results: Mapping[str | None, ToolResult] = {r.call_id: r for r in step.results}
        for call in step.tool_calls:
            yield number, call, results.get(call.call_id)


def digest(traj: Trajectory, *, max_bytes: int = 4096) -> TrajectoryDigest:
    """The digest of ``traj``, at most about ``max_bytes`` as JSON."""
    failed: list[FailedCommand] = []
    files: dict[str, None] = {}
    runs: Counter[str] = Counter()
    at: dict[str, list[int]] = {}
    first_test: tuple[int, str] | None = None
    for number, call, result in _calls(traj):
        line = describe(call)
        command = shell_command(call)
        if command is not None:
            runs[line] += 1
            at.setdefault(line, []).append(number)
            if first_test is None and _TEST_COMMAND.search(command):
                first_test = (number, line)
        for path in _paths(call):
            files.setdefault(_relative(path, traj.workspace), None)
        if result is not None and result.is_failure:
            failed.append(FailedCommand(number, line, result.exit_code, error_lines(result.output)))
    repeated = sorted(
        (RepeatedCommand(c, n, tuple(at[c][:5])) for c, n in runs.items() if n > 1),
        key=lambda r: (-r.times, r.steps),
    )
    return _within(
        TrajectoryDigest(
            steps=len(traj.steps),
            tool_calls=traj.call_count,
            failed=_ends(failed, _MAX_FAILED),
            failed_total=len(failed),
            files=tuple(files)[:_MAX_FILES],
            first_test_step=first_test[0] if first_test else None,
            first_test_command=first_test[1] if first_test else "",
            repeated=tuple(repeated[:_MAX_REPEATED]),
        ),
        max_bytes,
    )


def _ends(items: list[FailedCommand], most: int) -> tuple[FailedCommand, ...]:
    """The first and the last failures, ``most`` in all."""
    if len(items) <= most:
        return tuple(items)
    return (*items[: most // 2], *items[-(most - most // 2) :])


def _size(d: TrajectoryDigest) -> int:
    return len(json.dumps(to_data(d), ensure_ascii=False).encode())


def _within(d: TrajectoryDigest, max_bytes: int) -> TrajectoryDigest:
    """``d`` cut to ``max_bytes``: the longest list loses items until it fits (failures
    keep their first and last ones, the others their first)."""
    while _size(d) > max_bytes:
        lists: dict[str, tuple[Any, ...]] = {
            "failed": d.failed,
            "files": d.files,
            "repeated": d.repeated,
        }
        name, items = max(lists.items(), key=lambda kv: len(kv[1]))
        if not items:
            break
        if name == "failed":
            kept = list(d.failed)
            del kept[len(kept) // 2 if len(kept) > 2 else -1]  # the first and last stay
            d = attrs.evolve(d, failed=tuple(kept))
        elif name == "files":
            d = attrs.evolve(d, files=d.files[:-1])
        else:
            d = attrs.evolve(d, repeated=d.repeated[:-1])
    return d
