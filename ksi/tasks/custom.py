"""The built-in ``custom`` task source: tasks from a ``.json`` or ``.jsonl`` file.

Records are checked by :mod:`ksi.tasks.schema`; this module turns clean
records into :class:`~ksi.models.TaskSpec` objects with typed parts.

Loading writes nothing: inline ``files`` stay in memory as
:class:`~ksi.task_parts.StartingFiles` and are written into each attempt's
``repo/`` when it is seeded. Only the original KSI's entry point
(:func:`load_custom_tasks`, like ``load_tasks_for_source``) writes them into
a temporary directory, because it promises ``metadata["repo_path"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.compat.original import as_original_tasks
from ksi.errors import TaskLoadError, problems_header
from ksi.fileops import write_files
from ksi.hookspecs import hookimpl
from ksi.models import Problem, TaskSpec
from ksi.task_parts import EvalSpec, Runtime, Solution, StartingFiles, TaskOrigin
from ksi.tasks.schema import MakeRecord, parse_tasks_file

__all__ = ["CustomTaskSource", "load_custom_tasks", "write_files"]

_NO_FILES = StartingFiles()


#: Every custom task runs with the default runtime (what a task would get left out).
_RUNTIME = Runtime()


def _task_maker(tasks_file: str) -> MakeRecord[TaskSpec]:
    """What :func:`~ksi.tasks.schema.parse_tasks_file` calls per clean record: the task,
    its starting files, solution and origin built when first read (every part given, so
    none is looked for in ``metadata``)."""
    evals: dict[tuple[str, float], EvalSpec] = {}
    source = CustomTaskSource.name
    # The constructors bound once, not looked up and bound again for each of 10,000 tasks.
    new_task, deferred, new_origin = TaskSpec.checked, TaskSpec.deferred, TaskOrigin.checked
    new_solution, inline = Solution.checked, StartingFiles.checked_inline

    def parts(
        files: dict[str, str] | None, solution: dict[str, Any] | None, location: str
    ) -> tuple[StartingFiles, Solution | None, TaskOrigin]:
        return (
            inline(files) if files else _NO_FILES,
            None
            if solution is None
            else new_solution(solution.get("files"), solution.get("command")),
            new_origin(source, tasks_file, location),
        )

    def make(
        task_id: str,
        prompt: str,
        location: str,
        workspace_dir: Path | None,
        files: dict[str, str] | None,
        eval_command: str,
        eval_timeout_sec: float,
        solution: dict[str, Any] | None,
    ) -> TaskSpec:
        key = (eval_command, eval_timeout_sec)
        spec = evals.get(key)
        if spec is None:  # most files grade every task the same way: share one value
            spec = evals[key] = EvalSpec(eval_command, eval_timeout_sec)
        if workspace_dir is None:
            return deferred(
                task_id, prompt, spec, _RUNTIME, True, (parts, (files, solution, location))
            )
        _, solved, origin = parts(None, solution, location)
        starting = StartingFiles(directory=str(workspace_dir))
        return new_task(task_id, prompt, spec, starting, _RUNTIME, solved, origin, True)

    return make


@attrs.define
class CustomTaskSource:
    """Tasks you define yourself, one JSON record each (see docs/your-own-tasks.md)."""

    name: ClassVar[str] = "custom"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Your own tasks from a .json array or .jsonl file (task_id, prompt, files or "
        "workspace_dir, eval command, solution)"
    )
    default_evaluator: ClassVar[str] = "command"

    def load(self, path: Path | str) -> list[TaskSpec]:
        """Every task in ``path``; raises :class:`TaskLoadError` listing *all* problems."""
        path = Path(path)
        parsed = parse_tasks_file(path, str(path), _task_maker(str(path.resolve())))
        if parsed.problems:
            count = len(parsed.problems)
            raise TaskLoadError(
                parsed.problems,
                header=problems_header(str(path), count),
            )
        return parsed.records

    def validate(self, path: Path | str) -> list[Problem]:
        """Every problem in ``path`` (empty list when it loads cleanly); never raises."""
        path = Path(path)
        return parse_tasks_file(path, str(path)).problems


def load_custom_tasks(path: Path | str) -> list[TaskSpec]:
    """The original KSI's entry point: the tasks with their starting files on disk.

    Each task's ``metadata`` holds the original's keys (``repo_path`` an
    existing directory) and its ``prompt`` ends with the note about ``repo/``.
    """
    return as_original_tasks(CustomTaskSource().load(path))


@hookimpl(trylast=True)
def ksi_register_task_sources(register: Callable[[Any], None]) -> None:
    """Register the built-in ``custom`` source; a plugin's ``tryfirst`` hook may override it."""
    register(CustomTaskSource)
