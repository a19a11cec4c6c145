"""What every command shares: error handling, JSON output, TTY detection."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, ParamSpec, TypeVar

import typer

from ksi.errors import KsiError

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
    for line in str(exc).splitlines() or [type(exc).__name__]:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(exc.exit_code)


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def is_tty() -> bool:
    return sys.stdout.isatty()
