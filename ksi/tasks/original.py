"""The original KSI's loader contract, for its two entry points.

``load_tasks_for_source`` and ``load_custom_tasks`` promised TaskSpecs whose
``metadata`` holds ``task_source``, ``repo_path`` (an existing directory of
starting files), ``eval_command``, ``eval_timeout_sec`` (plus
``tasks_file``, ``source_location`` and ``solution``), and whose ``prompt``
already ends with the note about ``repo/``. Those two functions call
:func:`as_original_task` on every task: inline starting files are written to
disk here, explicitly, once per task. ``ksi run`` loads through the task
source itself and never writes them (it seeds each attempt's ``repo/``
straight from the inline files).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from ksi.errors import TaskLoadError
from ksi.models import Problem, TaskSpec
from ksi.task_metadata import original_metadata
from ksi.tasks.prompts import agent_prompt


def as_original_task(task: TaskSpec) -> TaskSpec:
    """``task`` as the original KSI's loaders returned it (starting files on disk)."""
    try:
        files = task.starting_files.materialize()
    except OSError as exc:
        raise TaskLoadError(
            [
                Problem(
                    task.origin.file,
                    f"could not write the task's starting files: {exc.strerror or exc}",
                    task.origin.location,
                    task.id,
                    "$.files",
                )
            ]
        ) from exc
    done = attrs.evolve(task, starting_files=files, prompt=agent_prompt(task))
    return attrs.evolve(done, metadata=original_metadata(done))


def as_original_tasks(tasks: Iterable[TaskSpec]) -> list[TaskSpec]:
    return [as_original_task(t) for t in tasks]
