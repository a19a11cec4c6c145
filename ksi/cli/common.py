"""What every command shares: error output, warnings, JSON output, TTY detection."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ksi.errors import KsiError, KsiWarning, UserInputError
from ksi.tasks.paths import one_tasks_path
from ksi.text import printable

if TYPE_CHECKING:
    from ksi.tasks.selection import TaskSelection

# -- component names: completion from the registry ---------------------------------------


def complete_names(kind: str) -> Callable[[str], list[tuple[str, str]]]:
    """A shell-completion callback offering the registered names of ``kind`` (with help).

    Completion must never fail in the user's shell: a broken plugin state
    offers nothing rather than a traceback.
    """

    def complete(incomplete: str) -> list[tuple[str, str]]:
        # start-up: only the commands that use it pay for it
        from ksi.plugins import registry

        try:
            regs = list(registry(kind))
        except Exception:
            return []
        return [
            (r.name, _first_sentence(r.description)) for r in regs if r.name.startswith(incomplete)
        ]

    complete.__name__ = f"complete_{kind.replace(' ', '_')}"
    return complete


def _first_sentence(text: str) -> str:
    """A component's description cut to fit a completion menu line."""
    flat = " ".join(text.split())
    sentence = flat.split(". ")[0].split(": ")[0].rstrip(".")
    return sentence if len(sentence) <= 70 else sentence[:69].rstrip() + "…"


# -- task selection: one vocabulary for run, check, grade, regrade, tasks validate/list --
# (the options themselves are the run's: ksi.cli.run_options)

#: The tasks file or directory, as the first argument.
TasksArg = Annotated[
    Path | None,
    typer.Argument(help="Tasks file or directory.", show_default=False),
]


def tasks_path_of(tasks: Path | None, tasks_path: Path | None) -> Path | None:
    """TASKS or ``--tasks-path`` (the same thing): both, and different, is a mistake."""
    return one_tasks_path(tasks, tasks_path, spelled="--tasks-path")


def require_tasks_path(tasks: Path | None, tasks_path: Path | None, command: str) -> Path:
    """The tasks path a command cannot do without, or exit 2 saying how to give it."""
    path = tasks_path_of(tasks, tasks_path)
    if path is None:
        raise UserInputError(f"give the tasks: ksi {command} TASKS ...")
    return path


def task_selection(
    task_id: list[str] | None, exclude: list[str] | None = None, limit: int | None = None
) -> TaskSelection:
    """The :class:`TaskSelection` the selection options of a command make."""
    # start-up: only the commands that use it pay for it
    from ksi.tasks.selection import TaskSelection

    return TaskSelection(include=tuple(task_id or ()), exclude=tuple(exclude or ()), limit=limit)


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
