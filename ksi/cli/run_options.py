"""``ksi run``'s options as typer parameters, built from the one table of run options.

Every setting of a run declares its option once, on its
:class:`~ksi.rundir.config.RunConfig` field (:class:`~ksi.rundir.run_option.RunOption`);
the options of the command itself (which run directory, ``--resume``,
``--dry-run``...) are declared the same way on :class:`CommandOptions` here.
This module turns both into ``ksi run``'s parameters, in the groups of
docs/running.md (:func:`run_parameters`), and the values the command receives
back into the run's settings (:func:`config_values`). ``-c run.toml`` keys are
the parameters' names, so they follow too.

Commands that share an option with ``ksi run`` (``check``, ``grade``,
``tasks``) take it from here (:data:`TaskIdOption`...), so it reads the same
everywhere. Imported by ``ksi run --help``: nothing heavy at import.
"""

from __future__ import annotations

import enum
import inspect
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import attrs
import typer

from ksi.cli.common import TasksArg, complete_names, tasks_path_of
from ksi.cli.config_file import ConfigOption
from ksi.errors import UserInputError
from ksi.rundir.config import RunConfig
from ksi.rundir.run_option import (
    COMMAND,
    GROUPS,
    OPTION,
    RESULTS,
    Form,
    RunOption,
    option_of,
    options_of,
)
from ksi.tasks.paths import recorded_tasks_path
from ksi.tasks.selection import split_patterns


@attrs.frozen
class CommandOptions:
    """``ksi run``'s options that are no setting of the run: which directory, what to do."""

    dry_run: bool = attrs.field(
        default=False,
        metadata={
            OPTION: RunOption(
                ("--dry-run",),
                "Show the plan (tasks, attempts, agent, environment, evaluator, run "
                "directory) and start nothing.",
                COMMAND,
            )
        },
    )
    run_dir: Path | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--run-dir",), "Run directory.", RESULTS, metavar="DIR", doc="The run directory."
            )
        },
    )
    runs_root: Path = attrs.field(
        default=Path("runs"),
        metadata={
            OPTION: RunOption(
                ("--runs-root",),
                "Parent of run directories.",
                RESULTS,
                metavar="DIR",
                envvar="KSI_RUNS_ROOT",
                doc="Without `--run-dir`, the run directory is `DIR/NAME` (`--run-name`); "
                "default `runs/run-YYYYmmdd-HHMMSS-xxxxxx`: the start time and 6 random hex "
                "digits, so runs started in the same second never share a directory.",
            )
        },
    )
    run_name: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--run-name",),
                "Run directory name under --runs-root.",
                RESULTS,
                metavar="NAME",
            )
        },
    )
    resume: bool = attrs.field(
        default=False,
        metadata={
            OPTION: RunOption(
                ("--resume",),
                "Resume the run in --run-dir.",
                RESULTS,
                doc="Resume the run in the run directory (see [Resume](#resume)).",
            )
        },
    )
    fail_on_error: bool = attrs.field(
        default=False,
        metadata={
            OPTION: RunOption(
                ("--fail-on-error",),
                "Exit 1 when any attempt ended in error (for CI).",
                RESULTS,
                doc="Exit 1 (after the summary) when any attempt ended in error (status "
                "`error` or `agent_error`), for CI. Without it a run that finishes exits 0 "
                "whatever its attempts did, and the summary says what went wrong (see [The "
                "summary](#the-summary)).",
            )
        },
    )


def param_name(opt: RunOption) -> str:
    """The command's parameter for ``opt`` (``--agent-option``: ``agent_option``)."""
    return opt.flag.lstrip("-").replace("-", "_")


def run_options() -> Iterator[tuple[attrs.Attribute[Any], RunOption]]:
    """Every ``ksi run`` option (the run's settings that have a flag, and the command's
    own), in ``--help`` order: by :data:`~ksi.rundir.run_option.GROUPS`, then as declared."""
    found = [(f, o) for cls in (RunConfig, CommandOptions) for f, o in options_of(cls) if o.flags]
    yield from sorted(found, key=lambda pair: GROUPS.index(pair[1].group))


def _base(annotation: Any) -> tuple[Any, bool]:
    """``T`` of ``T | None``, and whether None was allowed."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0], len(args) < len(get_args(annotation))
    return annotation, False


def _has_default(field: attrs.Attribute[Any]) -> bool:
    """Whether the field's default is one value ``--help`` can show (not a factory)."""
    factory = isinstance(field.default, attrs.Factory)  # type: ignore[arg-type]  # a class at run time
    return field.default is not attrs.NOTHING and not factory


def _cli_type(field: attrs.Attribute[Any], opt: RunOption) -> Any:
    """The type the command line's value is parsed as."""
    if opt.form in (Form.KEY_VALUES, Form.NAMES, Form.PATTERNS):
        return list[str] | None
    if opt.form in (Form.PATH, Form.TASKS):
        return Path | None
    if opt.form is Form.TRUE_FALSE:
        return str
    base, optional = _base(field.type)
    if opt.choices or (isinstance(base, type) and issubclass(base, enum.Enum)):
        base = str  # checked against the choices, with the flag in the message
    return base | None if optional or not _has_default(field) else base


def _cli_default(field: attrs.Attribute[Any], opt: RunOption) -> Any:
    if opt.form is Form.TRUE_FALSE:
        return "true" if field.default else "false"
    if opt.form is not Form.VALUE or not _has_default(field):
        return None  # not given: the field's own default (a factory's)
    default = field.default
    return default.value if isinstance(default, enum.Enum) else default


def option_info(opt: RunOption) -> Any:
    """``typer.Option(...)`` for ``opt``."""
    return typer.Option(
        *opt.flags,
        metavar=opt.value_name,
        envvar=opt.envvar,
        min=opt.minimum,
        max=opt.maximum,
        autocompletion=complete_names(opt.complete) if opt.complete else None,
        help=opt.help,
    )


def _resolved() -> None:
    """Field types as objects, not the strings ``from __future__ import annotations`` left."""
    attrs.resolve_types(RunConfig)
    attrs.resolve_types(CommandOptions)


def run_parameters() -> list[inspect.Parameter]:
    """``ksi run``'s parameters: ``ctx``, ``-c``, ``TASKS``, then every option."""
    _resolved()
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [
        inspect.Parameter("ctx", keyword, annotation=typer.Context),
        inspect.Parameter("config_file", keyword, default=None, annotation=ConfigOption),
        inspect.Parameter("tasks", keyword, default=None, annotation=TasksArg),
    ]
    for field, opt in run_options():
        # A type made at run time, which typer reads as any annotation.
        annotation = Annotated[_cli_type(field, opt), option_info(opt)]  # type: ignore[valid-type]
        default = _cli_default(field, opt)
        params.append(
            inspect.Parameter(param_name(opt), keyword, default=default, annotation=annotation)
        )
    return params


def check_choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    """``value``, or a :class:`UserInputError` naming ``flag`` and the choices."""
    if value not in choices:
        raise UserInputError(f"{flag}: {value!r} is not one of {', '.join(choices)}")
    return value


def _value(field: attrs.Attribute[Any], opt: RunOption, given: Any) -> Any:
    """The setting the command line's ``given`` makes (``attrs.NOTHING``: its default)."""
    # start-up: `ksi run --help` needs neither (ksi.options imports cattrs and the models)
    from ksi.options import parse_bool, parse_key_values

    form = opt.form
    if form is Form.KEY_VALUES:
        return parse_key_values(given or [], opt.flag)
    if form is Form.NAMES:
        return list(given or [])
    if form is Form.PATTERNS:
        return list(split_patterns(given, opt.flag)) or None
    if form is Form.PATH:
        return str(given.resolve()) if given else None
    if form is Form.TASKS:
        return recorded_tasks_path(given)
    if form is Form.TRUE_FALSE:
        try:
            return parse_bool(given)
        except ValueError as exc:
            raise UserInputError(f"{opt.flag}: {exc}") from exc
    if given is None and not _has_default(field):
        return attrs.NOTHING
    if opt.choices:
        return check_choice(opt.flag, given, opt.choices)  # RunConfig makes it the member
    return given


def config_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """The run's settings the command's parameter values make (``tasks`` is TASKS).

    A setting whose default is computed (``--concurrency``: the CPUs) and that
    was not given is left out, so :class:`RunConfig` computes it.
    """
    _resolved()
    values = {}
    for field, opt in options_of(RunConfig):
        if not opt.flags:
            continue
        given = params[param_name(opt)]
        if opt.form is Form.TASKS:
            given = tasks_path_of(params["tasks"], given)
        value = _value(field, opt, given)
        if value is not attrs.NOTHING:
            values[field.name] = value
    return values


def command_options(params: Mapping[str, Any]) -> CommandOptions:
    return CommandOptions(**{f.name: params[f.name] for f in attrs.fields(CommandOptions)})


def given_settings(ctx: typer.Context) -> set[str]:
    """The settings the user gave (command line, ``KSI_*`` variable, ``-c`` file)."""
    given = set()
    for field, opt in options_of(RunConfig):
        names = [param_name(opt)] if opt.flags else []
        if opt.form is Form.TASKS:
            names.append("tasks")
        if any(was_given(ctx, name) for name in names):
            given.add(field.name)
    return given


def was_given(ctx: typer.Context, name: str) -> bool:
    """Whether parameter ``name`` was given (command line, ``KSI_*`` variable, ``-c`` file)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in (
        "COMMANDLINE",
        "ENVIRONMENT",
        "PROMPT",
        "DEFAULT_MAP",
    )


def _shared(field_name: str) -> Any:
    return option_info(option_of(getattr(attrs.fields(RunConfig), field_name)))


# -- options other commands share with `ksi run`, declared by the run's settings ---------

TaskSourceOption = Annotated[str, _shared("task_source")]
TaskSourceOptionsOption = Annotated[list[str] | None, _shared("task_source_options")]
#: The older spelling of TASKS (the first argument), kept working.
TasksPathOption = Annotated[Path | None, _shared("tasks_path")]
TaskIdOption = Annotated[list[str] | None, _shared("task_ids")]
ExcludeOption = Annotated[list[str] | None, _shared("exclude_task_ids")]
LimitOption = Annotated[int | None, _shared("max_tasks")]
EnvironmentOption = Annotated[str, _shared("environment")]
EnvironmentOptionsOption = Annotated[list[str] | None, _shared("environment_options")]
EvaluatorOption = Annotated[str | None, _shared("evaluator")]
EvalEnvOption = Annotated[list[str] | None, _shared("eval_env")]
