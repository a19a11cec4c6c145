"""The ``ksi`` command line: one module per command group, assembled here.

User errors (:class:`ksi.errors.KsiError`) print one line per problem on
stderr and exit with the error's code (2 for bad input); anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import typer

from ksi import __version__
from ksi.errors import KsiError

app = typer.Typer(
    name="ksi",
    help="Run coding agents on tasks and grade every attempt.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"ksi {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    """Run coding agents on tasks and grade every attempt."""


#: Built-in command modules; each has ``register(app)``.
COMMAND_MODULES = (
    "plugins_cmd",
    "tasks_cmd",
    "grade_cmd",
    "run_cmd",
    "agents_cmd",
    "env_cmd",
    "install_cmd",
)


def _add_builtin_commands() -> None:
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(f"ksi.cli.{name}").register(app)


def build_app() -> typer.Typer:
    """The app with built-in and plugin commands (plugins load here, not at import)."""
    _add_builtin_commands()
    try:
        from ksi.plugins import get_plugins

        get_plugins().register_commands(app)
    except KsiError:
        pass  # the command that needs plugins reports the error (exit code 2)
    return app


def main() -> None:
    build_app()(prog_name="ksi")
