"""ARC grids: checking one, and showing one as text.

A grid is a non-empty rectangle of integers 0-9 (each a colour), a list of
rows. ARC's own files hold grids of 1x1 to 30x30; larger ones are accepted
(hand-made tasks may need them), anything not a rectangle of digits is not.
"""

from __future__ import annotations

from typing import Any

Grid = list[list[int]]

#: A problem in a value: (JSON path of the offending part, what is wrong and how to fix it).
FieldProblem = tuple[str, str]


def _is_cell(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 9


def grid_problems(value: Any, path: str) -> list[FieldProblem]:
    """Every way ``value`` is not an ARC grid (empty when it is one), located under ``path``."""
    if not isinstance(value, list) or not value:
        return [(path, f"must be a grid: a non-empty list of rows, got {_short(value)}")]
    problems: list[FieldProblem] = []
    width: int | None = None
    for r, row in enumerate(value):
        where = f"{path}[{r}]"
        if not isinstance(row, list) or not row:
            problems.append((where, f"must be a non-empty list of cells 0-9, got {_short(row)}"))
            continue
        if width is None:
            width = len(row)
        elif len(row) != width:
            problems.append(
                (
                    where,
                    f"has {len(row)} cells but row 0 has {width}: every row of a grid must "
                    "have the same length (grids are rectangles)",
                )
            )
        for c, cell in enumerate(row):
            if not _is_cell(cell):
                problems.append(
                    (f"{where}[{c}]", f"must be an integer 0-9 (a colour), got {_short(cell)}")
                )
    return problems


def is_grid(value: Any) -> bool:
    return not grid_problems(value, "")


def shape(grid: Grid) -> str:
    """``rows x columns``, e.g. ``3x4``."""
    return f"{len(grid)}x{len(grid[0]) if grid else 0}"


def grid_text(grid: Grid) -> str:
    """The grid as text: one line per row, cells separated by spaces."""
    return "\n".join(" ".join(str(cell) for cell in row) for row in grid)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
