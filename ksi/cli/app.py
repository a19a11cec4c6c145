"""The root ``ksi`` command: built-in commands imported on demand, plugin commands, errors.

Start-up time is spent only on what the command line asks for:

* a built-in command's module is imported when that command runs (or shows
  its own help); ``ksi --help`` lists the built-ins from :data:`BUILTIN_COMMANDS`
  without importing any of them (tests check the summaries against the code);
  only the command asked for is converted to a click command, and a command
  line that asks only for a built-in's help may build it from caches
  (``ksi run --help``: :mod:`ksi.cli.run_flags_cache`);
* plugins are loaded only when their commands may be wanted: for the command
  list of ``ksi --help``, or a command name that is not a built-in;
* a :class:`~ksi.errors.KsiError` from any command, built-in or a plugin's,
  becomes ``error: ...`` lines on stderr and the error's exit code, in one
  place (:meth:`RootGroup.invoke`); anything else is a bug, reported by
  :func:`main` in one line (``--debug`` shows the traceback).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer
import typer.core

from ksi._version import __version__
from ksi.cli.common import fail
from ksi.errors import KsiError

HELP = "Run coding agents on tasks and grade every attempt."

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
        "Export the notes a run's generations distilled, to seed another run.",
    ),
}


class Settings:
    """What the root options asked for, read by :func:`main` after the command."""

    verbose: bool = False
    debug: bool = False
    #: A command (``ksi plugins``) listed the plugin errors itself: not again at exit.
    plugin_errors_shown: bool = False


class RootGroup(typer.core.TyperGroup):
    """``ksi``: built-in commands resolved lazily, plugin commands loaded on demand."""

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
            from ksi.plugins import get_plugins

            holder = typer.Typer()
            # A plugin command named like a built-in is left out and reported against it.
            get_plugins().register_commands(holder, reserved=BUILTIN_COMMANDS)
            found: dict[str, Any] = {}
            if holder.registered_commands or holder.registered_groups:
                group = typer.main.get_group(holder)
                from ksi.cli.help_format import plain_help

                found = {
                    n: plain_help(c) for n, c in group.commands.items() if n not in BUILTIN_COMMANDS
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
        from ksi.cli.help_format import first_paragraph

        # Whole first paragraphs, wrapped, never cut short with "...".
        summaries = [(name, first_paragraph(text)) for name, text in rows]
        with formatter.section("Commands"):
            formatter.write_dl(summaries)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KsiError as exc:
            raise fail(exc) from None


def _command_of(holder: typer.Typer, name: str) -> Any:
    """The click command ``name`` of a module's registered commands, converting no other."""
    only = typer.Typer(rich_markup_mode=None)
    only.registered_commands = [c for c in holder.registered_commands if c.name == name]
    only.registered_groups = [g for g in holder.registered_groups if g.name == name]
    from ksi.cli.help_format import plain_help

    return plain_help(typer.main.get_group(only).commands[name])


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


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"ksi {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Say more: log messages, plugins that failed to load."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Show the traceback of an unexpected error and of plugin load failures.",
        ),
    ] = False,
) -> None:
    """Run coding agents on tasks and grade every attempt."""
    Settings.verbose = verbose or debug
    Settings.debug = debug
    if Settings.verbose:
        import logging

        logging.basicConfig(
            level=logging.DEBUG if debug else logging.INFO,
            format="%(levelname)s %(name)s: %(message)s",
        )


def build_app() -> typer.Typer:
    """A new ``ksi`` app (each call its own); commands and plugins load when needed."""
    app = typer.Typer(
        name="ksi",
        help=HELP,
        cls=RootGroup,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.callback()(_root)
    return app


def _report_plugin_errors() -> None:
    """With ``-v``, plugins that failed to load; with ``--debug``, their tracebacks too."""
    from ksi.plugins import loaded_plugins

    state = loaded_plugins()
    if state is None or Settings.plugin_errors_shown:
        return
    for err in state.errors:
        typer.echo(f"warning: {err}", err=True)
        if Settings.debug and err.traceback:
            typer.echo(err.traceback.rstrip(), err=True)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``ksi`` console script."""
    Settings.verbose = Settings.debug = Settings.plugin_errors_shown = False
    command: Callable[..., Any] = typer.main.get_command(build_app()).main
    try:
        command(args=argv, prog_name="ksi")
    except Exception as exc:  # a KsiError never gets here (RootGroup.invoke)
        if Settings.debug:
            import traceback

            traceback.print_exc()
        else:
            typer.echo(
                f"error: unexpected {type(exc).__name__}: {exc}\n"
                "error: this is a bug in ksi or in a plugin; run again with "
                "`ksi --debug ...` to see the traceback, and report it",
                err=True,
            )
        sys.exit(1)
    finally:
        if Settings.verbose:
            _report_plugin_errors()
