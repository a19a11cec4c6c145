"""What every command shares: error output, warnings, JSON output, TTY detection."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import warnings
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from ksi.errors import KsiError, KsiWarning
from ksi.text import printable

#: ``--eval-env NAME`` of every command that runs an eval command on the host.
EvalEnvOption = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME",
        help="Host environment variable to pass to the eval command (repeatable); it gets "
        "no credentials otherwise.",
    ),
]


def fail(exc: KsiError) -> typer.Exit:
    """Print ``exc`` as ``error: ...`` lines on stderr; return the exit to raise.

    Only the root command calls this (:meth:`ksi.cli.app.RootGroup.invoke`),
    so every command, a plugin's too, reports a ``KsiError`` the same way.
    """
    # Messages quote task ids, paths and file contents: never let them drive the terminal.
    for line in str(exc).splitlines() or [type(exc).__name__]:
        typer.echo(f"error: {printable(line, multiline=True)}", err=True)
    return typer.Exit(exc.exit_code)


@contextlib.contextmanager
def print_warnings() -> Iterator[None]:
    """Show each :class:`KsiWarning` raised inside as ``warning: ...`` on stderr, every time."""
    shown = warnings.showwarning

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, KsiWarning):
            typer.echo(f"warning: {printable(str(message), multiline=True)}", err=True)
        else:
            shown(message, category, *args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("always", KsiWarning)
        warnings.showwarning = show
        yield


def stop_signals_as_interrupt() -> None:
    """SIGTERM and SIGHUP (the terminal was closed) stop a command like Ctrl-C.

    A run ends cleanly: its running agents killed, the journal kept, resumable;
    a grade kills its eval command. Without this, SIGHUP's default action
    killed KSI on the spot and left its agents (each in a session of its own)
    running.
    """

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def echo_json(data: Any) -> None:
    # ensure_ascii (the default) writes every control character as a \u escape.
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def is_tty() -> bool:
    return sys.stdout.isatty()
