"""One ARC task in the standard format, and every problem with a malformed one.

The format (the one ARC-AGI-1 and ARC-AGI-2 ship, one JSON object per task)::

    {"train": [{"input": grid, "output": grid}, ...],
     "test":  [{"input": grid, "output": grid}, ...]}

``train`` needs at least one pair, ``test`` at least one input; a test's
``output`` may be missing (a hidden test set), and such a task loads but
cannot be graded or solved by ``oracle``. Keys other than these are refused,
as ``custom`` refuses them, so a typo is caught at load time.
"""

from __future__ import annotations

from typing import Any

import attrs

from ksi_arc.grids import FieldProblem, Grid, grid_problems

PAIR_KEYS = ("input", "output")


@attrs.frozen
class ArcPair:
    input: Grid
    #: ``None`` only for a test whose output is not published.
    output: Grid | None


@attrs.frozen
class ArcTask:
    """One parsed, valid ARC task."""

    id: str
    train: tuple[ArcPair, ...]
    test: tuple[ArcPair, ...]

    @property
    def test_outputs(self) -> list[Grid] | None:
        """The reference output of every test input, or ``None`` when any is missing."""
        outputs = [pair.output for pair in self.test]
        if any(out is None for out in outputs):
            return None
        return [out for out in outputs if out is not None]

    def public_json(self) -> dict[str, Any]:
        """The task as the agent may see it: training pairs and test inputs, no test outputs."""
        return {
            "train": [{"input": p.input, "output": p.output} for p in self.train],
            "test": [{"input": p.input} for p in self.test],
        }


def _pairs(
    data: dict[str, Any], key: str, *, output_required: bool
) -> tuple[list[ArcPair], list[FieldProblem]]:
    value = data.get(key)
    where = f"$.{key}"
    if key not in data:
        what = "training pairs" if key == "train" else "test inputs"
        return [], [(where, f"is missing: a task needs a list of {what}")]
    if not isinstance(value, list) or not value:
        want = '{"input": grid, "output": grid}'
        return [], [(where, f"must be a non-empty list of {want} objects, got {value!r:.60}")]
    pairs: list[ArcPair] = []
    problems: list[FieldProblem] = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            want = '{"input": grid, "output": grid}'
            problems.append((at, f"must be an object {want}, got {item!r:.60}"))
            continue
        found = [
            (f"{at}.{extra}", "unknown key: a pair holds only 'input' and 'output' (typo?)")
            for extra in sorted(set(item) - set(PAIR_KEYS))
        ]
        if "input" not in item:
            found.append((f"{at}.input", "is missing: every pair needs an input grid"))
        else:
            found.extend(grid_problems(item["input"], f"{at}.input"))
        if "output" in item:
            found.extend(grid_problems(item["output"], f"{at}.output"))
        elif output_required:
            found.append((f"{at}.output", "is missing: every training pair needs an output grid"))
        problems.extend(found)
        if not found:
            pairs.append(ArcPair(input=item["input"], output=item.get("output")))
    return pairs, problems


def parse_task(task_id: str, data: Any) -> tuple[ArcTask | None, list[FieldProblem]]:
    """The task in ``data`` (a decoded JSON value), or every problem with it."""
    if not isinstance(data, dict):
        return None, [
            ("$", f'must be an object {{"train": [...], "test": [...]}}, got {type(data).__name__}')
        ]
    problems: list[FieldProblem] = [
        (f"$.{extra}", "unknown key: an ARC task holds only 'train' and 'test' (typo?)")
        for extra in sorted(set(data) - {"train", "test"})
    ]
    train, train_problems = _pairs(data, "train", output_required=True)
    test, test_problems = _pairs(data, "test", output_required=False)
    problems += train_problems + test_problems
    if problems:
        return None, problems
    return ArcTask(id=task_id, train=tuple(train), test=tuple(test)), []
