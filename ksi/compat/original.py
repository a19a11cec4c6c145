"""KSI's tasks and grades in the shape the original KSI's API returned them.

* :func:`as_original_tasks`, for ``load_tasks_for_source`` and
  ``load_custom_tasks``: TaskSpecs whose ``metadata`` holds ``task_source``,
  ``repo_path`` (an existing directory of starting files), ``eval_command``,
  ``eval_timeout_sec`` (plus ``tasks_file``, ``source_location`` and
  ``solution``), and whose ``prompt`` already ends with the note about
  ``repo/``. Inline starting files are written to disk here, explicitly, once
  per task; ``ksi run`` loads through the task source and never writes them.
* :func:`evaluate`, for ``CommandEvaluator().evaluate()``: a grade as the
  original's dict, with its status words (:data:`STATUS_WORDS`). KSI's own
  records and ``grade()`` keep KSI's words.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ksi.compat.task_keys import LEGACY_KEYS
from ksi.errors import TaskLoadError
from ksi.interfaces import Evaluator
from ksi.models import EvalResult, EvalStatus, TaskSpec
from ksi.problems import Problem
from ksi.tasks.prompts import agent_prompt

#: The keys the original's loaders put in every task's ``metadata``.
ORIGINAL_KEYS = (
    "task_source",
    "repo_path",
    "eval_command",
    "eval_timeout_sec",
    "tasks_file",
    "source_location",
    "solution",
)

#: KSI's status -> the original KSI's word for it, as ``evaluate()`` reports it. Any
#: status not listed (``eval_error``: KSI could not prepare the grading) is kept.
STATUS_WORDS: dict[str, str] = {
    EvalStatus.SCORED: "evaluated",
    EvalStatus.TIMEOUT: "eval_timeout",
    EvalStatus.SPAWN_FAILED: "eval_spawn_failed",
    EvalStatus.MISSING_WORKSPACE: "no_workspace",
    EvalStatus.NO_EVAL: "no_eval_command",
}


def legacy_metadata(task: TaskSpec, keys: Iterable[str]) -> dict[str, Any]:
    """The original's ``keys`` with the values ``task``'s typed parts give them.

    ``repo_path`` is ``""`` when there are no starting files (the original's
    "none") and left out for inline files, which have no directory.
    """
    out: dict[str, Any] = {}
    for key in keys:
        part, field = LEGACY_KEYS[key]
        if part == "solution":
            out[key] = task.solution.as_dict() if task.solution is not None else None
        elif part == "workspace_note":
            out[key] = task.workspace_note
        elif part == "starting_files" and task.starting_files.directory is None:
            if task.starting_files.kind == "empty":
                out[key] = ""
        else:
            out[key] = getattr(getattr(task, part), field)
    return out


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
    return attrs.evolve(done, metadata={**task.metadata, **legacy_metadata(done, ORIGINAL_KEYS)})


def as_original_tasks(tasks: Iterable[TaskSpec]) -> list[TaskSpec]:
    return [as_original_task(t) for t in tasks]


def original_result(result: EvalResult) -> dict[str, Any]:
    """The original KSI's result dict: KSI's fields, the status in the original's word."""
    data = result.as_dict()
    data["status"] = STATUS_WORDS.get(result.status, data["status"])
    return data


def evaluate(
    evaluator: Evaluator,
    task: TaskSpec,
    runtime_meta: Mapping[str, Any] | None,
    *,
    keep_workdir: bool = False,
) -> dict[str, Any]:
    """Grade ``task`` with ``evaluator`` the way the original's ``evaluate()`` did.

    With ``runtime_meta["host_workspace_repo_dir"]`` that directory is
    graded in place. Without it, a fresh copy of the task's starting files is
    made in a temporary directory and graded there, so the seed is never
    touched; the copy is removed afterwards unless ``keep_workdir``.
    ``eval_workdir`` always says where the command ran
    (``details["eval_workdir_removed"]`` tells whether it is gone).
    """
    given = (runtime_meta or {}).get("host_workspace_repo_dir")
    if given:
        return original_result(evaluator.grade(task, Path(str(given))))
    tmp = Path(tempfile.mkdtemp(prefix=f"ksi-eval-{_safe(task.id)}-"))
    workdir = tmp / "repo"
    try:
        try:
            task.starting_files.seed_into(workdir, task_id=task.id)
        except Exception as exc:  # any failure to copy means nothing to grade
            result = EvalResult(
                EvalStatus.MISSING_WORKSPACE,
                None,
                eval_workdir=str(workdir),
                notes=(
                    f"could not copy the starting files of task {task.id!r} "
                    f"({task.starting_files.describe()}): "
                    f"{type(exc).__name__}: {exc}",
                ),
            )
        else:
            result = evaluator.grade(task, workdir)
    finally:
        if not keep_workdir:
            shutil.rmtree(tmp, ignore_errors=True)
    data = original_result(result)
    data["details"]["eval_workdir_removed"] = not keep_workdir
    return data


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:40] or "task"
