"""``ksi run``, ``ksi report``, ``ksi regrade`` and ``ksi check``.

``ksi run``'s options are not written here: they are the run's settings'
declarations, made into parameters by :mod:`ksi.cli.run_options`. The runner
is imported inside the commands, so ``ksi run --help`` does not pay for it.
Options that only one environment or task source understands
(docker's ``--image``, ``--network``, ``--cpus``, ``--memory``; the polyglot
source's ``--language``) are not written here: each component declares them
in its ``cli_options`` class attribute and :func:`register` adds them to
``ksi run`` (see docs/environments.md, docs/plugins.md); for help alone,
:func:`register_for_help` takes them from a cache (:mod:`ksi.cli.run_flags_cache`).
"""

from __future__ import annotations

import functools
import inspect
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import attrs
import typer

from ksi.cli.common import (
    TasksArg,
    complete_names,
    echo_json,
    is_tty,
    print_warnings,
    require_tasks_path,
    stop_signals_as_interrupt,
    task_selection,
)
from ksi.cli.run_options import (
    EnvironmentOption,
    EnvironmentOptionsOption,
    ExcludeOption,
    LimitOption,
    TaskIdOption,
    TaskSourceOption,
    TaskSourceOptionsOption,
    TasksPathOption,
    check_choice,
    command_options,
    config_values,
    given_settings,
    run_parameters,
    was_given,
)
from ksi.errors import UserInputError
from ksi.rundir.config import RunConfig
from ksi.text import printable

if TYPE_CHECKING:
    from ksi.cli.run_flags_cache import Row
    from ksi.runs.driver import RunPlan
    from ksi.runs.progress import Progress


def _progress() -> Progress:
    # start-up: `ksi run --help` imports no runner
    from ksi.runs.progress import PlainProgress, RichProgress

    return RichProgress() if is_tty() else PlainProgress()


def run_command(ctx: typer.Context, **params: Any) -> None:
    """Run an agent on every task, grade every attempt, and print the summary.

    Each attempt starts in its own workspace directory; the task's starting
    files are in its repo/ subdirectory ($KSI_REPO), which is what gets
    captured and graded. Re-running the same command on the same run
    directory resumes it: only missing attempts (and, with --retries,
    unscored or failed ones) run. A resume may raise --attempts and take new
    tasks; it refuses only changes that would make the old records
    incomparable (another agent, model...).

    Options may come from a TOML file (-c run.toml) and, for the common ones,
    from KSI_* environment variables; the command line wins over both.
    """
    if params.get("executor") == "processes" and not params.get("dry_run"):
        # start-up: the first worker loads beside the runner's imports and the run's set-up
        from ksi.executors.workers import prestart

        prestart()
    # start-up: `ksi run --help` imports no runner
    from ksi.runs.api import default_run_dir
    from ksi.runs.driver import Driver

    command = command_options(params)
    values = config_values(params)
    shortcuts: dict[str, dict[str, str | None]] = ctx.meta.get(SHORTCUTS, {})
    for kind, field in SHORTCUT_FIELDS.items():
        given_flags = shortcuts.get(kind, {})
        values[field].update({k: v for k, v in given_flags.items() if v is not None})
    run_dir = command.run_dir
    if run_dir is None:
        if command.resume and command.run_name is None:
            raise UserInputError("--resume needs --run-dir (or --runs-root and --run-name)")
        run_dir = default_run_dir(command.runs_root, command.run_name)
    if command.resume:
        config = _resumed_config(ctx, run_dir, values)
    else:
        if "agent" not in values:
            raise UserInputError(
                "--agent is required (e.g. --agent oracle; `ksi agents` lists them)"
            )
        if values["tasks_path"] is None:
            raise UserInputError("give the tasks: ksi run TASKS --agent NAME")
        config = RunConfig(**values)
    if command.dry_run:
        _print_plan(Driver(config, run_dir).preview(), tasks_path=config.tasks_path)
        return
    stop_signals_as_interrupt()
    with print_warnings():  # a plugin may warn as its components are resolved
        runner = Driver(config, run_dir, progress=_progress())
        summary = runner.run()
    for problem in runner.observer_errors:
        typer.echo(f"warning: {printable(problem, multiline=True)}", err=True)
    _print_summary(summary)
    if runner.setup_failure is not None:
        raise runner.setup_failure
    if command.fail_on_error:
        _exit_on_errors(summary)


run_command.__signature__ = inspect.Signature(run_parameters())  # type: ignore[attr-defined]


def _resumed_config(ctx: typer.Context, run_dir: Path, values: dict[str, Any]) -> RunConfig:
    """``--resume``: the stored configuration, with what this command gives on top.

    A raised --max-cost, more --retries...: whatever the user gave (command
    line, ``KSI_*`` variable, ``-c`` file) replaces the stored value; the
    runner then checks the result against the run's resume rules.
    """
    # start-up: `ksi run --help` imports no runner
    from ksi.layout import RunLayout
    from ksi.rundir.run_state import load_run_state

    stored = load_run_state(RunLayout(run_dir)).config
    given = given_settings(ctx)
    for name, kind in ctx.meta.get(SHORTCUT_PARAMS, {}).items():
        if was_given(ctx, name):
            given.add(SHORTCUT_FIELDS[kind])
    changes = {name: values[name] for name in given if name in values}
    for field in SHORTCUT_FIELDS.values():
        if field in given:
            changes[field] = {**getattr(stored, field), **values[field]}
    moved = "executor" in given and values["executor"] != stored.executor
    if moved and "executor_options" not in given:
        changes["executor_options"] = {}  # another executor's options would not fit
    changes["retries"] = max(stored.retries, values["retries"])
    return attrs.evolve(stored, **changes)


def _print_plan(plan: RunPlan, *, tasks_path: str | None) -> None:
    """``ksi run --dry-run``: the plan, one line per thing a user would check."""
    ids = plan.task_ids
    shown = ", ".join(ids[:10]) + (f", ... ({len(ids) - 10} more)" if len(ids) > 10 else "")
    total = len(ids) * plan.attempts
    if plan.resumes:
        where = f"{plan.run_dir} (resumes it: {total - plan.to_run} of {total} attempts done)"
    else:
        where = f"{plan.run_dir} (new)"
    rows = [
        ("run dir", where),
        ("tasks", f"{len(ids)} from {tasks_path or '(given in Python)'}: {shown}"),
        ("attempts", f"{plan.attempts} per task, {plan.to_run} to run"),
        ("agent", plan.agent + (f" (model {plan.model})" if plan.model else "")),
        ("environment", plan.environment),
        (
            "evaluator",
            f"{plan.evaluator} (grades on the host, isolation {plan.eval_isolation})"
            if plan.grades_in == "host"
            else f"{plan.evaluator} (grades in the environment)",
        ),
        ("executor", f"{plan.executor}, {plan.concurrency} at once"),
    ]
    if plan.generation_plan:
        rows.append(("generations", plan.generation_plan))
    typer.echo("dry run: nothing was started")
    for label, value in rows:
        typer.echo(printable(f"{label + ':':<13}{value}"))


def _print_summary(summary: Any) -> None:
    # start-up: `ksi run --help` imports no runner
    from ksi.cli.summary_view import print_summary

    print_summary(summary, rich_output=is_tty())


def _exit_on_errors(summary: Any) -> None:
    """``--fail-on-error``: exit 1 (after the summary) when any attempt ended in error."""
    if summary.error_attempts:
        typer.echo(
            f"error: {summary.error_attempts} attempt(s) ended in error (--fail-on-error)",
            err=True,
        )
        raise typer.Exit(1)


REPORT_FORMATS = ("table", "json", "csv", "markdown")


def report_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory.")],
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="table (the summary), json (the full report), csv (one row per task) or "
            "markdown (totals and the task table, for a pull request or a paper draft).",
        ),
    ] = "table",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the full JSON report (same as --format json).")
    ] = False,
    solved_threshold: Annotated[
        float | None, typer.Option(help="Override the run's solved threshold.")
    ] = None,
    control: Annotated[
        Path | None,
        typer.Option(
            metavar="RUN_DIR",
            help="A run of the same tasks whose attempts did not get these notes (the "
            "--knowledge none arm): each note's receivers are compared with them too.",
        ),
    ] = None,
) -> None:
    """Print a run's summary again, from its journal alone (table, JSON, CSV or Markdown)."""
    # start-up: `ksi run --help` imports no runner
    from ksi.reporting.report import build_report
    from ksi.reporting.summary import summarize_run

    fmt = check_choice("--format", output_format, REPORT_FORMATS)
    if as_json:
        if fmt not in ("table", "json"):
            raise UserInputError(f"--json and --format {fmt} ask for two formats; give one")
        fmt = "json"
    if fmt == "json":
        echo_json(build_report(run_dir, solved_threshold=solved_threshold, control=control))
        return
    summary = summarize_run(run_dir, solved_threshold=solved_threshold, control=control)
    if fmt == "table":
        _print_summary(summary)
        return
    # start-up: `ksi run --help` imports no runner
    from ksi.view import tables

    if fmt == "csv":
        typer.echo(tables.task_csv(summary), nl=False)
    else:
        typer.echo(tables.task_markdown(summary, name=Path(summary.run_dir).name), nl=False)
    for warning in summary.warnings:
        typer.echo(f"warning: {printable(warning)}", err=True)


def regrade_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory.")],
    evaluator: Annotated[
        str | None,
        typer.Option(
            autocompletion=complete_names("evaluator"),
            help="Evaluator to grade with (default: the run's).",
        ),
    ] = None,
    evaluator_option: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", help="An evaluator option (repeatable)."),
    ] = None,
    eval_env: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME",
            help="Host variable to pass to the eval command (repeatable; default: the run's).",
        ),
    ] = None,
    eval_isolation: Annotated[
        str | None,
        typer.Option(help="auto, sandbox or none (default: the run's --eval-isolation)."),
    ] = None,
    task_id: TaskIdOption = None,
    exclude: ExcludeOption = None,
    limit: LimitOption = None,
) -> None:
    """Grade every attempt of a run again from its captured repos.

    --task-id, --exclude and --limit choose among the run's tasks; the others
    keep their records.
    """
    # start-up: `ksi run --help` imports no runner
    from ksi.options import parse_key_values
    from ksi.runs.regrade import regrade_run

    stop_signals_as_interrupt()
    summary = regrade_run(
        run_dir,
        evaluator=evaluator,
        evaluator_options=parse_key_values(evaluator_option or [], "--evaluator-option"),
        eval_env=eval_env,
        eval_isolation=eval_isolation,
        selection=task_selection(task_id, exclude, limit),
    )
    _print_summary(summary)


def check_command(
    tasks: TasksArg = None,
    tasks_path: TasksPathOption = None,
    task_id: TaskIdOption = None,
    exclude: ExcludeOption = None,
    limit: LimitOption = None,
    task_source: TaskSourceOption = "custom",
    task_source_option: TaskSourceOptionsOption = None,
    environment: EnvironmentOption = "local",
    environment_option: EnvironmentOptionsOption = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Attempts at once (default: CPUs, max 8).")
    ] = None,
    run_dir: Annotated[
        Path | None, typer.Option(help="Keep the check runs here (default: a temp dir).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run `oracle` and `nop` on every task and list the broken ones.

    A task is broken when its own solution does not solve it, or when it
    passes with no work at all. A task with no reference solution is run by
    nop only and listed as not checked. Exit code 1 when any task is broken.
    """
    # start-up: `ksi run --help` imports no runner
    from ksi.options import parse_key_values
    from ksi.rundir.option_groups.scale import default_concurrency
    from ksi.runs.check import check_tasks
    from ksi.serialization import to_data

    path = require_tasks_path(tasks, tasks_path, "check")
    selection = task_selection(task_id, exclude, limit)
    base = run_dir or Path(tempfile.mkdtemp(prefix="ksi-check-"))
    stop_signals_as_interrupt()
    try:
        result = check_tasks(
            path,
            task_source=task_source,
            task_source_options=parse_key_values(task_source_option or [], "--task-source-option"),
            environment=environment,
            environment_options=parse_key_values(environment_option or [], "--environment-option"),
            base_dir=base,
            concurrency=concurrency or default_concurrency(),
            selection=selection,
        )
    finally:
        if run_dir is None:  # a temporary directory: nothing is left in /tmp
            # start-up: `ksi run --help` imports no runner
            from ksi.fstree import remove_tree

            remove_tree(base)
    if run_dir is None:
        result = attrs.evolve(result, oracle_run="", nop_run="")
    if as_json:
        echo_json(to_data(result))
    else:
        for line in result.lines():
            typer.echo(printable(line))
    if result.broken:
        raise typer.Exit(1)


#: ``ctx.meta`` keys: kind -> (option -> value of its flag), and flag parameter -> kind.
SHORTCUTS = "ksi.component_shortcuts"
SHORTCUT_PARAMS = "ksi.component_shortcut_params"
ENVIRONMENT, TASK_SOURCE = "environment", "task source"
#: The kinds whose ``cli_options`` become ``ksi run`` flags, and the run field they fill.
SHORTCUT_FIELDS = {ENVIRONMENT: "environment_options", TASK_SOURCE: "task_source_options"}
#: The ``ksi run`` parameter each kind's flags follow.
_SHORTCUTS_AFTER = {ENVIRONMENT: "environment_option", TASK_SOURCE: "task_source_option"}


def with_component_flags(
    command: Callable[..., None], rows: Mapping[str, Sequence[Row]]
) -> Callable[..., None]:
    """``command`` with one ``--flag`` option per environment and task source shortcut.

    ``rows`` holds each kind's ``(flag, option, help)`` (from the plugins, or
    from the help cache: :mod:`ksi.cli.run_flags_cache`).

    Each kind's flags are placed after its ``--*-option`` parameter. The
    values reach ``command`` through ``ctx.meta[SHORTCUTS]`` (kind -> option
    -> value, ``None`` when not given), so ``command`` itself stays a fixed
    signature. A flag whose name the command already uses is left out.
    """
    signature = inspect.signature(command, eval_str=True)
    params = list(signature.parameters.values())
    taken = {p.name for p in params}
    extra: dict[str, tuple[str, str]] = {}  # parameter name -> (kind, option)
    for kind, after in _SHORTCUTS_AFTER.items():
        new_params = []
        for flag, option, help_text in rows[kind]:
            name = flag.lstrip("-").replace("-", "_")
            if not name.isidentifier() or name in taken or name in extra:
                continue
            extra[name] = (kind, option)
            annotation = Annotated[str | None, typer.Option(flag, help=help_text)]
            new_params.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=None,
                    annotation=annotation,
                )
            )
        index = next(i for i, p in enumerate(params) if p.name == after) + 1
        params[index:index] = new_params

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        ctx = kwargs["ctx"]
        shortcuts: dict[str, dict[str, str | None]] = {kind: {} for kind in _SHORTCUTS_AFTER}
        for name, (kind, option) in extra.items():
            shortcuts[kind][option] = kwargs.pop(name)
        ctx.meta[SHORTCUTS] = shortcuts
        ctx.meta[SHORTCUT_PARAMS] = {name: kind for name, (kind, _) in extra.items()}
        command(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapper


def _register(app: typer.Typer, rows: Mapping[str, Sequence[Row]]) -> None:
    app.command("run")(with_component_flags(run_command, rows))
    app.command("report")(report_command)
    app.command("regrade")(regrade_command)
    app.command("check")(check_command)


def register(app: typer.Typer) -> None:
    """The commands, ``ksi run`` with the flags every installed component declares now."""
    # start-up: `ksi run --help` imports no runner
    from ksi.cli.run_flags_cache import rows_from_plugins

    _register(app, rows_from_plugins(list(_SHORTCUTS_AFTER)))


def register_for_help(app: typer.Typer) -> bool:
    """The commands, ``ksi run``'s component flags from the help cache; False: no valid cache.

    The root command uses this only to print help (:mod:`ksi.cli.startup`), and
    registers the commands anew with :func:`register` for anything else.
    """
    # start-up: `ksi run --help` imports no runner
    from ksi.cli.run_flags_cache import cached_rows

    rows = cached_rows(list(_SHORTCUTS_AFTER))
    if rows is None:
        return False
    _register(app, rows)
    return True


__all__ = ["register", "register_for_help"]
