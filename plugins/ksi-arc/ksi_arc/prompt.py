"""What the agent is asked: the training pairs and test inputs as text grids, and the answer format.

The answer format is described in the prompt itself (and in the README), so
any agent can follow it without knowing KSI: ``repo/answer.json`` holds one
entry per test input, each a grid or up to :data:`MAX_CANDIDATES` candidate
grids (ARC's official scoring gives two attempts per test input).
"""

from __future__ import annotations

from ksi_arc.grids import Grid, grid_text, shape
from ksi_arc.taskfile import ArcTask

ANSWER_FILE = "answer.json"
TASK_FILE = "task.json"
#: Attempts per test input that ARC's official scoring allows.
MAX_CANDIDATES = 2


def _block(title: str, grid: Grid) -> str:
    return f"{title} ({shape(grid)}):\n```\n{grid_text(grid)}\n```"


def arc_prompt(task: ArcTask) -> str:
    n = len(task.test)
    parts = [
        f"# ARC task {task.id}",
        "Each training example below shows an input grid and the output grid a hidden rule "
        "makes from it. Work out the rule and apply it to the test input"
        + ("s." if n > 1 else "."),
        "A grid is a rectangle of digits 0-9 (each digit is a colour), one line per row, "
        "cells separated by spaces.",
        "## Training examples",
    ]
    for i, pair in enumerate(task.train, 1):
        assert pair.output is not None  # training outputs are required at load time
        parts.append(
            f"### Example {i}\n\n{_block('Input', pair.input)}\n\n{_block('Output', pair.output)}"
        )
    parts.append("## Test" + (" inputs" if n > 1 else " input"))
    for i, pair in enumerate(task.test, 1):
        parts.append(_block(f"Test input {i}", pair.input))
    example = "[[[1, 0], [0, 1]]]" if n == 1 else "[[[1, 0], [0, 1]], [[[2]], [[3]]]]"
    parts.append(
        "## Your answer\n\n"
        f"Write the file `repo/{ANSWER_FILE}`: a JSON list with exactly one entry per test "
        f"input ({n} here), in order. Each entry is either your predicted output grid (a list "
        "of rows, each a list of integers 0-9) or a list of up to "
        f"{MAX_CANDIDATES} candidate grids; a test input counts as solved when one candidate is "
        f"exactly right. For example: `{example}`"
        + (" (one grid for test 1, two candidates for test 2)." if n > 1 else ".")
        + f"\n\nThe same task, without the test outputs, is in `repo/{TASK_FILE}`. "
        f"Your score is the fraction of test inputs solved; a missing or malformed "
        f"`{ANSWER_FILE}` scores 0."
    )
    return "\n\n".join(parts) + "\n"
