"""The start-up machinery of ``ksi``, behind one seam: the root group's base class.

What it buys: ``ksi --help`` within 1.5x and ``ksi run --help`` within 2x of
``python -c "import typer"``, the floor of any Typer CLI
(benchmarks/bench_startup.py). Each part, measured by running without it (CPU
ms, medians of 40 interleaved runs on the 2-core development VM, where
``import typer`` takes 44, ``ksi --help`` 58 and ``ksi run --help`` 68):

* built-in commands imported, and converted to click, only when the command
  line names them (:class:`LazyGroup`): 91 ms of ``ksi --help``;
* their summaries copied into :data:`BUILTIN_COMMANDS` (tests/test_cli.py keeps
  them equal to the commands' help), so that ``ksi --help`` imports no command
  module: 56 of those 91 ms;
* ``ksi run --help`` built from the flags cache (:mod:`ksi.cli.run_flags_cache`,
  through ``register_for_help`` in :mod:`ksi.cli.run_cmd`), loading no plugin:
  37 ms;
* unset root flags read ``False`` (:meth:`LazyGroup.get_params`), so typer does
  not import pydantic to coerce them: 60 ms of ``ksi run --help``;
* commands' plain values (strings, numbers, paths) converted without pydantic
  (:mod:`ksi.cli.plain_values`): 60 ms of every ``ksi run``;
* the ``ksi`` entry points read from the ``entry_points.txt`` files
  (:mod:`ksi.entry_points`) instead of ``importlib.metadata``: 15 ms of
  ``ksi --help`` and 10 of ``ksi run --help``. Under the 20 ms a part must buy to
  stay, but without it ``ksi --help`` is 1.63x ``import typer`` (1.65x in
  bench_startup.py), over its target, so it stays.

Plain help (:mod:`ksi.cli.help_format`: ``RUN_DIR``, not ``{run_dir}``) is not
part of it: it changes what help says, and costs nothing measurable.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
import typer.core
import typer.main

from ksi.cli.help_format import first_paragraph, plain_help
from ksi.cli.plain_values import plain_help_option, plain_values
from ksi.errors import KsiError

#: Built-in commands in ``ksi --help`` order: name -> (module in ``ksi.cli``, summary).
#: The summary is the first paragraph of the command's help; a test keeps them equal.
BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "grade": (
        "grade_cmd",
        "Grade an existing directory with a task's evaluator and print the result.",
    ),
    "run": ("run_cmd", "Run an agent on every task, grade every attempt, and print the summary."),
    "report": (
        "run_cmd",
        "Print a run's summary again, from its journal alone (table, JSON, CSV or Markdown).",
    ),
    "view": (
        "view_cmd",
        "Write one self-contained HTML report of a run, or a comparison of several runs.",
    ),
    "show": (
        "view_cmd",
        "Show a run, one of its tasks, or one attempt (status and why, diff, eval output, logs).",
    ),
    "compare": (
        "view_cmd",
        "Compare runs task by task: best score in each, the change, flipped tasks first.",
    ),
    "export": (
        "export_cmd",
        "Export a run's trajectories (ATIF, one file per attempt) with an index.",
    ),
    "regrade": ("run_cmd", "Grade every attempt of a run again from its captured repos."),
    "check": ("run_cmd", "Run `oracle` and `nop` on every task and list the broken ones."),
    "agents": (
        "agents_cmd",
        "List every agent: its plugin, binary and version, credentials, install command.",
    ),
    "doctor": (
        "doctor_cmd",
        "Check Python, plugins, agent binaries and credentials, Docker/bubblewrap.",
    ),
    "cleanup": (
        "cleanup_cmd",
        "Remove what killed runs left (containers, local processes): of RUN_DIR, --run-id or "
        "--all.",
    ),
    "install": (
        "install_cmd",
        "Install plugins into KSI's own Python environment, then show what they add.",
    ),
    "uninstall": ("install_cmd", "Remove plugins from KSI's own Python environment."),
    "plugins": (
        "plugins_cmd",
        "List installed plugins, what they provide and any that failed to load.",
    ),
    "tasks": ("tasks_cmd", "Validate and list tasks files."),
    "knowledge": (
        "knowledge_cmd",
        "Search the knowledge store, show a note and who received it, export notes.",
    ),
}


class LazyGroup(typer.core.TyperGroup):
    """A group whose built-in commands are imported and built on demand, plugins' on request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Built-in command modules' commands as registered, and those converted (on demand).
        self._holders: dict[str, typer.Typer] = {}
        self._commands: dict[str, Any] = {}
        self._plugin_commands: dict[str, Any] | None = None

    # -- built-ins ----------------------------------------------------------
    def _builtin(self, name: str) -> Any:
        command = self._commands.get(name)
        if command is None:
            module_name = BUILTIN_COMMANDS[name][0]
            holder = self._holders.get(module_name)
            if holder is None:
                holder = typer.Typer(rich_markup_mode=None)  # as the root: plain help, no rich
                importlib.import_module(f"ksi.cli.{module_name}").register(holder)
                self._holders[module_name] = holder
            command = self._commands[name] = _command_of(holder, name)
        return command

    def _builtin_for_help(self, ctx: Any, name: str, args: list[str]) -> Any | None:
        """``name`` built the quicker way its module offers for help, if ``args`` ask for help.

        A module may define ``register_for_help(app) -> bool``: what
        ``register`` adds, from caches, good only for printing help (``ksi run``'s
        component flags without loading plugins). ``None``: build the command
        as usual (the module has no such way, it declined, or ``args`` ask for
        more than help).
        """
        module = importlib.import_module(f"ksi.cli.{BUILTIN_COMMANDS[name][0]}")
        register_for_help = getattr(module, "register_for_help", None)
        holder = typer.Typer(rich_markup_mode=None)
        if register_for_help is None or not register_for_help(holder):
            return None
        command = _command_of(holder, name)
        return command if _asks_for_help(command, ctx, name, args) else None

    # -- plugins ------------------------------------------------------------
    def plugin_commands(self) -> dict[str, Any]:
        """Commands plugins add (``ksi_register_commands``), loading plugins once."""
        if self._plugin_commands is None:
            from ksi.plugins import get_plugins  # start-up: pluggy and plugins, only if wanted

            holder = typer.Typer()
            # A plugin command named like a built-in is left out and reported against it.
            get_plugins().register_commands(holder, reserved=BUILTIN_COMMANDS)
            found: dict[str, Any] = {}
            if holder.registered_commands or holder.registered_groups:
                group = typer.main.get_group(holder)
                found = {
                    n: plain_values(plain_help(c))
                    for n, c in group.commands.items()
                    if n not in BUILTIN_COMMANDS
                }
            self._plugin_commands = found
        return self._plugin_commands

    def _listed_plugin_commands(self) -> dict[str, Any]:
        try:
            return self.plugin_commands()
        except KsiError:
            return {}  # strict mode and a broken plugin: the command that needs it says so

    # -- click's interface --------------------------------------------------
    def get_params(self, ctx: Any) -> list[Any]:
        """The root options, with flags that were not given reading ``False``, not ``None``.

        Typer coerces every value that is not already a bool through pydantic,
        which it imports for that (tens of milliseconds): an unset ``--help``
        or ``--install-completion`` (``None``) would make ``ksi run --help`` pay it.
        """
        params: list[Any] = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.default is None:
                param.default = False
        return params

    def list_commands(self, ctx: Any) -> list[str]:
        return [*BUILTIN_COMMANDS, *self._listed_plugin_commands()]

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        """The command ``args`` name; a built-in asked only for its help, built for that.

        With ``-v``/``--debug`` a command is always built in full: its
        plugins load, so their failures can be reported.
        """
        name = args[0] if args else ""
        verbose = ctx.params.get("verbose") or ctx.params.get("debug")
        # Cheap first look (the help option's names, inherited by every command's context):
        # a command line without one is never help, and is not parsed twice.
        if name in BUILTIN_COMMANDS and not verbose and set(ctx.help_option_names) & set(args):
            command = self._builtin_for_help(ctx, name, args[1:])
            if command is not None:
                return name, command, args[1:]
        resolved: tuple[str | None, Any, list[str]] = super().resolve_command(ctx, args)
        if resolved[1] is not None:
            plain_help_option(resolved[1], ctx)
        return resolved

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in BUILTIN_COMMANDS:
            return self._builtin(cmd_name)
        return self.plugin_commands().get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list, with built-ins' summaries from the table (no import)."""
        rows = [(name, summary) for name, (_, summary) in BUILTIN_COMMANDS.items()]
        rows += [
            (name, cmd.help or "")
            for name, cmd in self._listed_plugin_commands().items()
            if not cmd.hidden
        ]
        # Whole first paragraphs, wrapped, never cut short with "...".
        summaries = [(name, first_paragraph(text)) for name, text in rows]
        with formatter.section("Commands"):
            formatter.write_dl(summaries)


def _command_of(holder: typer.Typer, name: str) -> Any:
    """The click command ``name`` of a module's registered commands, converting no other."""
    only = typer.Typer(rich_markup_mode=None)
    only.registered_commands = [c for c in holder.registered_commands if c.name == name]
    only.registered_groups = [g for g in holder.registered_groups if g.name == name]
    return plain_values(plain_help(typer.main.get_group(only).commands[name]))


def _asks_for_help(command: Any, parent: Any, name: str, args: list[str]) -> bool:
    """Whether click, parsing ``args`` for ``command``, would meet its help option.

    Click's own parser splits the arguments (an option's value that reads
    ``--help`` is a value, ``--`` ends the options); nothing is converted or
    called. Arguments it cannot parse are not a request for help: the command
    built in full reports them.
    """
    ctx = command.context_class(command, info_name=name, parent=parent, **command.context_settings)
    help_option = command.get_help_option(ctx)
    if help_option is None:
        return False
    try:
        opts, _, _ = command.make_parser(ctx).parse_args(args=list(args))
    except Exception:  # click's UsageError (click's or typer's own copy of click)
        return False
    return bool(opts.get(help_option.name))
