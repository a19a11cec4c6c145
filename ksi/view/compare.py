"""Several runs side by side: each task's best score in each run, and what changed.

The first run is the baseline; a task's change is its best score in the last
run minus the baseline's. Tasks that *flipped* (solved in one run, not in
another) come first, then the largest changes, then the rest in the runs'
task order: a researcher comparing knowledge against none, or model A against
model B, sees what moved before what did not. Config keys whose values
differ between the runs are listed, so the page says what was compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs

from ksi.records import RunSummary
from ksi.rundir.run_state import RunState

Direction = Literal["gained", "lost", "better", "worse", "same", "missing"]

#: run.json config keys never worth listing as a difference (paths and outputs).
_UNCOMPARED = frozenset({"output_json", "tasks_path"})


@attrs.frozen
class RunColumn:
    """One run of a comparison: its label beside the summary it was compared by."""

    label: str
    summary: RunSummary


@attrs.frozen
class TaskChange:
    task_id: str
    #: Best score per run (None: no scored attempt, or the task is not in that run).
    scores: tuple[float | None, ...]
    #: Solved per run (None: the task is not in that run).
    solved: tuple[bool | None, ...]
    #: Last run's best score minus the first's (None when either has none).
    change: float | None
    direction: Direction

    @property
    def flipped(self) -> bool:
        return self.direction in ("gained", "lost")


@attrs.frozen
class Comparison:
    runs: tuple[RunColumn, ...]
    tasks: tuple[TaskChange, ...]
    #: Config key -> its value in each run, for the keys whose values differ.
    differences: dict[str, tuple[Any, ...]]

    @property
    def gained(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks if t.direction == "gained")

    @property
    def lost(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks if t.direction == "lost")


def _direction(scores: Sequence[float | None], solved: Sequence[bool | None]) -> Direction:
    first, last = solved[0], solved[-1]
    if first is None or last is None:
        return "missing"
    if first != last:
        return "gained" if last else "lost"
    if scores[0] is not None and scores[-1] is not None:
        if scores[-1] > scores[0]:
            return "better"
        if scores[-1] < scores[0]:
            return "worse"
    elif scores[0] is None and scores[-1] is not None:
        return "better"
    elif scores[0] is not None and scores[-1] is None:
        return "worse"
    return "same"


def run_labels(names: Sequence[str]) -> list[str]:
    """Run directory names, made unique (``demo``, ``demo (2)``) when two runs share one."""
    seen: dict[str, int] = {}
    labels = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        labels.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return labels


def compare_runs(runs: Sequence[tuple[str, RunSummary, RunState]]) -> Comparison:
    """Compare ``(label, summary, state)`` runs; the first is the baseline."""
    if len(runs) < 2:
        raise ValueError("a comparison needs at least two runs")
    per_run = [{t.task_id: t for t in summary.tasks} for _, summary, _ in runs]
    order: list[str] = []
    known: set[str] = set()
    for _, summary, _ in runs:
        for t in summary.tasks:
            if t.task_id not in known:
                known.add(t.task_id)
                order.append(t.task_id)
    changes = []
    for task_id in order:
        found = [tasks.get(task_id) for tasks in per_run]
        scores = tuple(t.best_score if t else None for t in found)
        solved = tuple(t.solved if t else None for t in found)
        change = (
            scores[-1] - scores[0] if scores[0] is not None and scores[-1] is not None else None
        )
        changes.append(TaskChange(task_id, scores, solved, change, _direction(scores, solved)))
    position = {task_id: i for i, task_id in enumerate(order)}
    rank = {"gained": 0, "lost": 0, "better": 1, "worse": 1, "missing": 2, "same": 3}
    changes.sort(key=lambda c: (rank[c.direction], -abs(c.change or 0.0), position[c.task_id]))
    columns = tuple(RunColumn(label=label, summary=summary) for label, summary, _ in runs)
    return Comparison(columns, tuple(changes), _differences([state for _, _, state in runs]))


def _differences(states: Sequence[RunState]) -> dict[str, tuple[Any, ...]]:
    configs = [attrs.asdict(state.config) for state in states]
    keys = [k for k in configs[0] if k not in _UNCOMPARED] if configs else []
    found = {}
    for key in keys:
        values = tuple(config[key] for config in configs)
        if len({repr(v) for v in values}) > 1:
            found[key] = values
    return found
