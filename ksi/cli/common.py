"""What every command shares: error handling, JSON output, TTY detection."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, ParamSpec, TypeVar

import typer

from ksi.errors import KsiError, KsiWarning
from ksi.text import printable

P = ParamSpec("P")
R = TypeVar("R")


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a :class:`KsiError` into ``error: ...`` lines on stderr and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except KsiError as exc:
            fail(exc)

    return wrapper


def fail(exc: KsiError) -> NoReturn:
    # Messages quote task ids, paths and file contents: never let them drive the terminal.
    for line in str(exc).splitlines() or [type(exc).__name__]:
        typer.echo(f"error: {printable(line, multiline=True)}", err=True)
    raise typer.Exit(exc.exit_code)


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


def echo_json(data: Any) -> None:
    # ensure_ascii (the default) writes every control character as a \u escape.
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def is_tty() -> bool:
    return sys.stdout.isatty()
