"""Loading tasks by task-source name: the original KSI's ``load_tasks_for_source``.

The task source is looked up in the plugin registry, so a source from a
third-party plugin is loaded exactly like the built-in ``custom`` one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from ksi.compat.original import as_original_tasks
from ksi.errors import ProblemsError, UserInputError
from ksi.interfaces import TaskSource
from ksi.kinds import TASK_SOURCE
from ksi.models import Problem, TaskSpec
from ksi.options import create_component
from ksi.plugins import registry

DEFAULT_TASK_SOURCE = "custom"


def get_task_source(
    name: str = DEFAULT_TASK_SOURCE, options: Mapping[str, Any] | None = None
) -> TaskSource:
    """The task source registered as ``name`` (or an alias), built with ``options``.

    Raises :class:`ksi.errors.UnknownComponentError` listing the valid names
    (with a "did you mean") when there is none.
    """
    reg = registry(TASK_SOURCE).get(name)
    source = create_component(
        reg.obj,
        options or {},
        kind=TASK_SOURCE.name,
        option_flag=TASK_SOURCE.option_flag,
        option_keyword=TASK_SOURCE.option_keyword,
    )
    return cast(TaskSource, source)


def _path(task_source: str, tasks_path: str | os.PathLike[str] | None) -> Path:
    if tasks_path is None or str(tasks_path) == "":
        raise UserInputError(
            f"task source {task_source!r} needs a tasks path (TASKS, the first argument of "
            "the command, or tasks_path=... in Python)"
        )
    return Path(tasks_path)


def load_tasks_for_source(
    task_source: str = DEFAULT_TASK_SOURCE,
    tasks_path: str | os.PathLike[str] | None = None,
    *,
    options: Mapping[str, Any] | None = None,
) -> list[TaskSpec]:
    """Load every task from ``tasks_path`` with the named task source.

    The original KSI's entry point: each task's starting files are written
    to disk (``metadata["repo_path"]`` is an existing directory), its
    ``metadata`` holds the original's keys, and its ``prompt`` already ends
    with the note about ``repo/``. ``ksi run`` loads through the source
    itself and writes nothing.

    Raises :class:`ksi.errors.TaskLoadError` (a ``KsiError`` and a
    ``ValueError``) when the input has problems; for ``custom`` the error
    lists all of them.
    """
    path = _path(task_source, tasks_path)
    return as_original_tasks(get_task_source(task_source, options).load(path))


def validate_tasks_for_source(
    task_source: str = DEFAULT_TASK_SOURCE,
    tasks_path: str | os.PathLike[str] | None = None,
    *,
    options: Mapping[str, Any] | None = None,
) -> list[Problem]:
    """Every problem in ``tasks_path`` for the named source (empty when it is clean)."""
    path = _path(task_source, tasks_path)
    source = get_task_source(task_source, options)
    try:
        return list(source.validate(path))
    except ProblemsError as exc:  # a plugin that raises instead of returning
        return list(exc.problems)
