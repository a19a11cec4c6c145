"""The root ``ksi`` command: its options, and errors reported in one place.

The commands are found and built by :class:`~ksi.cli.startup.LazyGroup`,
which spends start-up time only on what the command line asks for. A
:class:`~ksi.errors.KsiError` from any command, built-in or a plugin's,
becomes ``error: ...`` lines on stderr and the error's exit code, in one
place (:meth:`RootGroup.invoke`); anything else is a bug, reported by
:func:`main` in one line (``--debug`` shows the traceback).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer

from ksi._version import __version__
from ksi.cli.common import fail
from ksi.cli.startup import LazyGroup
from ksi.errors import KsiError

HELP = "Run coding agents on tasks and grade every attempt."


class Settings:
    """What the root options asked for, read by :func:`main` after the command."""

    verbose: bool = False
    debug: bool = False
    #: A command (``ksi plugins``) listed the plugin errors itself: not again at exit.
    plugin_errors_shown: bool = False


class RootGroup(LazyGroup):
    """``ksi``: the lazy group (:mod:`ksi.cli.startup`), and errors in one place."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KsiError as exc:
            raise fail(exc) from None


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
        # start-up: only with -v
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
    # start-up: plugins are loaded only if a command needed them
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
            # start-up: only to show a crash with --debug
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
