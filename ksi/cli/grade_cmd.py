"""``ksi grade``: check a task's evaluator on a directory before any agent runs.

A task author writes an eval command, puts a known-good (or known-bad)
solution in a directory, and runs ``ksi grade`` to see the score KSI would
give. The evaluator runs on a temporary *copy* of the directory, as it does
on a captured attempt, so the author's files are never changed (the
``command`` evaluator deletes a stale ``score.json`` first, and the eval
command may write anything).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import attrs
import typer

from ksi.attempt.components import component_name, resolve_host_evaluator
from ksi.attempt.safety import configure_host_grading, decide_eval_isolation
from ksi.choices import EvalIsolation
from ksi.cli.common import (
    TasksArg,
    echo_json,
    require_tasks_path,
    stop_signals_as_interrupt,
)
from ksi.cli.run_options import (
    EvalEnvOption,
    EvaluatorOption,
    TaskIdOption,
    TaskSourceOption,
    TaskSourceOptionsOption,
    TasksPathOption,
)
from ksi.errors import UserInputError
from ksi.fstree import copy_tree
from ksi.models import EvalResult, TaskSpec
from ksi.options import parse_key_values
from ksi.text import printable

DEFAULT_TASK_SOURCE = "custom"


@attrs.frozen
class GradeOutcome:
    """An :class:`EvalResult` plus where it came from, for printing."""

    task: TaskSpec
    evaluator: str
    workspace: Path
    result: EvalResult
    copy_kept: bool


def grade_workspace(
    tasks_path: Path,
    task_id: str | Sequence[str],
    workspace: Path,
    *,
    task_source: str = DEFAULT_TASK_SOURCE,
    task_source_options: Mapping[str, str] | None = None,
    evaluator: str | None = None,
    evaluator_options: Sequence[str] = (),
    keep_copy: bool = False,
    log_dir: Path | None = None,
    eval_env: Sequence[str] = (),
    eval_isolation: str = "auto",
) -> GradeOutcome:
    """Load ``task_id`` from ``tasks_path`` and grade a temporary copy of ``workspace``.

    ``task_id`` is an id or glob (or several, as ``--task-id`` repeated) that
    must pick exactly one task. Raises :class:`ksi.errors.UserInputError`
    (exit 2) for anything the user can fix: a missing path, an unknown task
    id, source or evaluator, bad options.
    """
    # start-up: not needed for `ksi grade --help`
    from ksi.tasks.loaders import get_task_source

    if not workspace.is_dir():
        what = "is not a directory" if workspace.exists() else "does not exist"
        raise UserInputError(f"--workspace: {str(workspace)!r} {what}; pass the directory to grade")
    if not tasks_path.exists():
        raise UserInputError(f"TASKS: {str(tasks_path)!r} does not exist")
    source = get_task_source(task_source, task_source_options)
    patterns = (task_id,) if isinstance(task_id, str) else tuple(task_id)
    task = _find_task(source.load(tasks_path), patterns, tasks_path)
    evaluator_name = evaluator or str(getattr(source, "default_evaluator", "") or "")
    if not evaluator_name:
        raise UserInputError(
            f"task source {task_source!r} names no default evaluator; pass --evaluator NAME"
        )
    options = parse_key_values(evaluator_options, "--evaluator-option")
    grader, _ = resolve_host_evaluator(
        evaluator_name,
        options,
        refusal="grades inside an attempt's environment; ksi grade can only run evaluators "
        "that grade on the host (use `ksi run` instead)",
    )
    # No agent ran here: ``auto`` grades the author's own directory without isolation.
    isolation = decide_eval_isolation(eval_isolation, None)
    isolation = EvalIsolation.NONE if eval_isolation == EvalIsolation.AUTO else isolation
    grader = configure_host_grading(grader, isolation=isolation, pass_env=eval_env)
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserInputError(
                f"--log-dir: cannot create {str(log_dir)!r} ({exc.strerror or exc}); "
                "give a directory path that can be created"
            ) from exc
    tmp = Path(tempfile.mkdtemp(prefix="ksi-grade-"))
    copy = tmp / "repo"
    try:
        try:
            copy_tree(workspace.resolve(), copy)
        except OSError as exc:
            raise UserInputError(f"--workspace: cannot copy {str(workspace)!r}: {exc}") from exc
        result = grader.grade(task, copy, log_dir=log_dir)
    finally:
        if not keep_copy:
            shutil.rmtree(tmp, ignore_errors=True)
    details = {**result.details, "graded_copy_of": str(workspace.absolute())}
    details["eval_workdir_removed"] = not keep_copy
    return GradeOutcome(
        task, component_name(grader), workspace, attrs.evolve(result, details=details), keep_copy
    )


def _find_task(tasks: Sequence[TaskSpec], patterns: Sequence[str], tasks_path: Path) -> TaskSpec:
    """The one task the ``--task-id`` patterns pick (the selection every command shares)."""
    # start-up: not needed for `ksi grade --help`
    from ksi.tasks.selection import TaskSelection

    selection = TaskSelection(include=tuple(patterns))
    if not selection.include:
        raise UserInputError("--task-id: give the task to grade against (--task-id ID)")
    chosen = selection.apply(tasks, where=str(tasks_path))
    if len(chosen) > 1:
        ids = ", ".join(repr(t.id) for t in chosen[:10])
        raise UserInputError(
            f"--task-id: {selection.describe()} picks {len(chosen)} tasks in {tasks_path} "
            f"({ids}{', ...' if len(chosen) > 10 else ''}); grade takes one: give its id"
        )
    return chosen[0]


def _print_outcome(outcome: GradeOutcome) -> None:
    r = outcome.result
    score = "unscored" if r.native_score is None else str(r.native_score)
    where = f"{r.eval_workdir} (a copy of {outcome.workspace}; "
    where += "kept)" if outcome.copy_kept else "removed)"
    rows: list[tuple[str, Any]] = [
        ("task", outcome.task.id),
        ("evaluator", outcome.evaluator),
        ("status", r.status),
        ("score", score),
        ("exit code", "-" if r.exit_code is None else r.exit_code),
        ("duration", f"{r.duration_sec:.2f}s"),
        ("graded in", where),
    ]
    for key in ("stdout_log", "stderr_log"):
        if key in r.details:
            rows.append((key.replace("_", " "), r.details[key]))
    # The task id, paths, notes and above all the eval's output are not KSI's text.
    for label, value in rows:
        typer.echo(f"{label + ':':<11} {printable(str(value))}")
    for note in r.notes:
        typer.echo(f"note:       {printable(note)}")
    for label, tail in (("stdout", r.stdout_tail), ("stderr", r.stderr_tail)):
        if tail:
            typer.echo(f"--- {label} (end) ---")
            typer.echo(printable(tail.rstrip("\n"), multiline=True))


def grade(
    workspace: Annotated[
        Path,
        typer.Option(
            "--workspace",
            help="The directory to grade, laid out like the agent's repo/. It is copied to a "
            "temporary directory first and never modified.",
        ),
    ],
    tasks: TasksArg = None,
    tasks_path: TasksPathOption = None,
    task_id: TaskIdOption = None,
    evaluator: EvaluatorOption = None,
    task_source: TaskSourceOption = DEFAULT_TASK_SOURCE,
    task_source_option: TaskSourceOptionsOption = None,
    evaluator_option: Annotated[
        list[str] | None,
        typer.Option(
            "--evaluator-option",
            metavar="KEY=VALUE",
            help="An option for the evaluator (repeatable), e.g. timeout_sec=60.",
        ),
    ] = None,
    keep_copy: Annotated[
        bool, typer.Option("--keep-copy", help="Keep the graded copy and print where it is.")
    ] = False,
    log_dir: Annotated[
        Path | None,
        typer.Option("--log-dir", help="Write the evaluator's full stdout/stderr logs here."),
    ] = None,
    eval_env: EvalEnvOption = None,
    eval_isolation: Annotated[
        str,
        typer.Option(
            help="sandbox: grade in bubblewrap (no network, only the copy writable); none or "
            "auto (the same here): a plain host process.",
        ),
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Grade an existing directory with a task's evaluator and print the result.

    How a task author checks an eval command before any agent runs. KSI grades
    a temporary COPY of --workspace, exactly as it grades a copy of each
    attempt's repo/, so your directory is never modified: a score.json already
    in it is deleted from the copy only, and whatever the eval command writes
    lands in the copy.

    Exit status: 0 when the workspace was scored (whatever the score), 1 when
    it could not be scored (timeout, no eval command, the command could not
    start...: see status), 2 for bad input (unknown task id, missing paths,
    bad options).
    """
    stop_signals_as_interrupt()
    outcome = grade_workspace(
        require_tasks_path(tasks, tasks_path, "grade"),
        task_id or (),
        workspace,
        task_source=task_source,
        task_source_options=parse_key_values(task_source_option or [], "--task-source-option"),
        evaluator=evaluator,
        evaluator_options=evaluator_option or (),
        keep_copy=keep_copy,
        log_dir=log_dir,
        eval_env=eval_env or (),
        eval_isolation=eval_isolation,
    )
    if as_json:
        echo_json(outcome.result.as_dict())
    else:
        _print_outcome(outcome)
    if not outcome.result.scored:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``ksi grade`` to ``app``."""
    app.command("grade")(grade)
