"""``ksi tasks``: check and list a tasks file before spending anything on a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ksi.cli.common import (
    TasksArg,
    echo_json,
    require_tasks_path,
    task_selection,
)
from ksi.cli.run_options import (
    ExcludeOption,
    LimitOption,
    TaskIdOption,
    TaskSourceOption,
    TaskSourceOptionsOption,
    TasksPathOption,
)
from ksi.errors import TaskLoadError, UserInputError, problems_header
from ksi.models import TaskSpec
from ksi.tasks.loaders import (
    DEFAULT_TASK_SOURCE,
    get_task_source,
    validate_tasks_for_source,
)
from ksi.tasks.seed import describe_starting_files
from ksi.tasks.selection import TaskSelection
from ksi.text import printable

tasks_app = typer.Typer(
    name="tasks",
    help="Validate and list tasks files.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _source_options(given: list[str] | None) -> dict[str, str]:
    """``--task-source-option KEY=VALUE`` values as the source's options."""
    # start-up: not needed for `ksi tasks --help`
    from ksi.options import parse_key_values

    return parse_key_values(given or [], "--task-source-option")


def _load(
    tasks: Path | None,
    tasks_path: Path | None,
    task_source: str,
    source_options: dict[str, str],
    selection: TaskSelection,
    command: str,
) -> tuple[Path, list[TaskSpec]]:
    """All problems (exit 2) or the selected tasks; validation first so every problem is listed."""
    path = require_tasks_path(tasks, tasks_path, f"tasks {command}")
    problems = validate_tasks_for_source(task_source, path, options=source_options)
    if problems:
        count = len(problems)
        raise TaskLoadError(problems, header=problems_header(str(path), count))
    loaded = get_task_source(task_source, source_options).load(path)
    return path, loaded if selection.everything else selection.apply(loaded, where=str(path))


@tasks_app.command("validate")
def validate(
    tasks: TasksArg = None,
    tasks_path: TasksPathOption = None,
    task_id: TaskIdOption = None,
    exclude: ExcludeOption = None,
    limit: LimitOption = None,
    task_source: TaskSourceOption = DEFAULT_TASK_SOURCE,
    task_source_option: TaskSourceOptionsOption = None,
    protect: Annotated[
        list[str] | None,
        typer.Option(
            metavar="GLOB", help="As ksi run --protect: more files capture treats as tests."
        ),
    ] = None,
) -> None:
    """Check every record in TASKS; print "OK: N tasks" or every problem (exit 2).

    The whole file is checked; --task-id, --exclude and --limit only choose
    which tasks are counted (a pattern that matches none is an error). Also
    warns (on stderr, exit 0) about reference solutions that write a file
    capture would drop or restore before grading (a new test_*.py...).
    """
    # start-up: not needed for `ksi tasks --help`
    from ksi.protected_files import ProtectRule
    from ksi.tasks.solution_capture import solution_capture_warnings

    selection = task_selection(task_id, exclude, limit)
    options = _source_options(task_source_option)
    path, chosen = _load(tasks, tasks_path, task_source, options, selection, "validate")
    try:
        rule = ProtectRule(tuple(protect or ()))
    except ValueError as exc:
        raise UserInputError(f"--protect: {exc}") from None
    for task in chosen:
        for warning in solution_capture_warnings(task, rule):
            typer.echo(f"warning: {printable(warning)}", err=True)
    count = f"{len(chosen)} task{'s' if len(chosen) != 1 else ''}"
    picked = "" if selection.everything else f" selected by {selection.describe()}"
    typer.echo(f"OK: {count}{printable(picked)} in {printable(str(path))}")


def _row(task: TaskSpec, evaluator: str) -> dict[str, Any]:
    solution = task.solution
    return {
        "task_id": task.id,
        "starting_files": describe_starting_files(task),
        "evaluator": evaluator,
        "eval_command": task.eval.command,
        "eval_timeout_sec": task.eval.timeout_sec,
        "has_solution": solution is not None and bool(solution.as_dict()),
        "source_location": task.origin.location or None,
    }


@tasks_app.command("list")
def list_tasks(
    tasks: TasksArg = None,
    tasks_path: TasksPathOption = None,
    task_id: TaskIdOption = None,
    exclude: ExcludeOption = None,
    limit: LimitOption = None,
    task_source: TaskSourceOption = DEFAULT_TASK_SOURCE,
    task_source_option: TaskSourceOptionsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List each task: id, starting files (count or directory) and eval command."""
    selection = task_selection(task_id, exclude, limit)
    options = _source_options(task_source_option)
    source = get_task_source(task_source, options)
    evaluator = str(getattr(source, "default_evaluator", "") or "command")
    loaded = _load(tasks, tasks_path, task_source, options, selection, "list")[1]
    rows = [_row(task, evaluator) for task in loaded]
    if as_json:
        echo_json(rows)
        return
    headers = ("TASK", "STARTING FILES", "EVAL COMMAND")
    table = [
        tuple(printable(cell) for cell in (r["task_id"], r["starting_files"], _grading(r)))
        for r in rows
    ]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(headers[:2])]
    for row in (headers, *table):
        typer.echo(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}".rstrip())


def _grading(row: dict[str, Any]) -> str:
    """The EVAL COMMAND cell: the command, or who grades a task that has none."""
    if row["eval_command"]:
        return str(row["eval_command"])
    if row["evaluator"] != "command":
        return f"(graded by the {row['evaluator']!r} evaluator)"
    return "(none: unscored)"


def register(app: typer.Typer) -> None:
    """Add the ``tasks`` command group to ``app``."""
    app.add_typer(tasks_app, name="tasks")
