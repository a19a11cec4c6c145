"""Reading the agent's ``answer.json`` and scoring it the way ARC's official scoring does.

Accepted forms (``n`` = the task's number of test inputs):

* a list of ``n`` entries, in test order, each one of
  - a grid (``[[0, 1], [1, 0]]``): one candidate;
  - a list of 1 or 2 grids: candidates;
  - ``{"attempt_1": grid, "attempt_2": grid}`` (ARC Prize's submission form;
    ``attempt_2`` optional);
* a bare grid, when ``n`` is 1.

A test input is solved when any candidate equals its output exactly (same
shape, same cells). The score is the fraction of test inputs solved, as in
ARC-AGI's scoring. An answer that is not one of these forms is malformed:
the attempt scores 0 and every problem is noted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from ksi.nesting import json_depth_problem
from ksi_arc.grids import Grid, shape
from ksi_arc.prompt import ANSWER_FILE, MAX_CANDIDATES

ATTEMPT_KEYS = ("attempt_1", "attempt_2")


class MalformedAnswer(ValueError):
    """The answer file cannot be read as answers; ``problems`` says every reason."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def _is_candidate(value: Any) -> bool:
    """A list of rows of integers (shape and range are checked by comparison, not here)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(row, list)
            and all(isinstance(c, int) and not isinstance(c, bool) for c in row)
            for row in value
        )
    )


def _looks_like_grid(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(row, list) and all(not isinstance(c, list) for c in row) for row in value
        )
    )


def _entry(value: Any, where: str) -> tuple[list[Grid], list[str]]:
    if isinstance(value, dict):
        extra = sorted(set(value) - set(ATTEMPT_KEYS))
        found = [value[k] for k in ATTEMPT_KEYS if k in value]
        problems = [f"{where}: unknown key {k!r} (use attempt_1 and attempt_2)" for k in extra]
        if not found:
            problems.append(f"{where}: an object entry needs attempt_1 (and optionally attempt_2)")
        candidates = found
    elif _looks_like_grid(value):
        candidates, problems = [value], []
    elif isinstance(value, list):
        candidates, problems = value, []
        if not value:
            problems.append(f"{where}: empty list; give a grid or up to {MAX_CANDIDATES} grids")
        elif len(value) > MAX_CANDIDATES:
            problems.append(
                f"{where}: {len(value)} candidates; at most {MAX_CANDIDATES} per test input count"
            )
    else:
        return [], [
            f"{where}: expected a grid or a list of up to {MAX_CANDIDATES} grids, got {value!r:.40}"
        ]
    for i, candidate in enumerate(candidates, 1):
        if not _is_candidate(candidate):
            problems.append(
                f"{where}, candidate {i}: not a grid (a list of rows, each a list of integers): "
                f"{candidate!r:.40}"
            )
    return candidates, problems


def parse_answer(data: Any, n_tests: int) -> list[list[Grid]]:
    """The candidates for each test input; raise :class:`MalformedAnswer` with every problem."""
    if n_tests == 1 and _looks_like_grid(data):
        data = [data]
    if not isinstance(data, list):
        raise MalformedAnswer(
            [f"expected a JSON list with one entry per test input ({n_tests}), got "
             f"{type(data).__name__}"]
        )  # fmt: skip
    if len(data) != n_tests:
        raise MalformedAnswer(
            [f"has {len(data)} entries; the task has {n_tests} test input(s): give exactly one "
             "entry per test input, in order"]
        )  # fmt: skip
    answers: list[list[Grid]] = []
    problems: list[str] = []
    for i, value in enumerate(data, 1):
        candidates, found = _entry(value, f"test {i}")
        answers.append(candidates)
        problems.extend(found)
    if problems:
        raise MalformedAnswer(problems)
    return answers


def read_answer(repo: Path, n_tests: int) -> list[list[Grid]]:
    """The answers in ``repo/answer.json``; :class:`MalformedAnswer` when missing or bad."""
    path = repo / ANSWER_FILE
    if path.is_symlink() or not path.is_file():
        raise MalformedAnswer([f"repo/{ANSWER_FILE} was not written (or is not a regular file)"])
    text = ""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (ValueError, OSError) as exc:
        raise MalformedAnswer([f"repo/{ANSWER_FILE} is not valid JSON: {exc}"]) from None
    except RecursionError:
        deep = json_depth_problem(text)
        raise MalformedAnswer([f"repo/{ANSWER_FILE}: {deep.field}: {deep.message}"]) from None
    return parse_answer(data, n_tests)


@attrs.frozen
class TestVerdict:
    """How one test input went: solved (by which candidate) or why not."""

    solved: bool
    candidate: int | None
    note: str


def judge(candidates: list[Grid], expected: Grid, test_number: int) -> TestVerdict:
    """Exact match against ``expected``: any candidate, every cell."""
    for i, grid in enumerate(candidates, 1):
        if grid == expected:
            return TestVerdict(True, i, f"test {test_number}: solved (candidate {i})")
    reasons = []
    for i, grid in enumerate(candidates, 1):
        same_shape = len(grid) == len(expected) and all(
            len(row) == len(expected[0]) for row in grid
        )
        if same_shape:
            wrong = sum(
                a != b
                for row, want in zip(grid, expected, strict=True)
                for a, b in zip(row, want, strict=True)
            )
            reasons.append(f"candidate {i} has {wrong} wrong cell(s)")
        else:
            got = f"{len(grid)}x{len(grid[0]) if grid else 0}"
            reasons.append(f"candidate {i} is {got}, expected {shape(expected)}")
    return TestVerdict(False, None, f"test {test_number}: not solved ({'; '.join(reasons)})")
