"""``ksi cleanup``: remove what killed runs left behind.

An attempt's container or processes are removed when the attempt ends, but a
run killed with SIGKILL (or a machine that lost power) cannot remove anything.
Every container carries a ``ksi.run`` label and every ``local`` process a
``KSI_RUN_ID`` variable, so the leftovers of a run are found from those
alone. Each registered
environment is asked through :meth:`ksi.interfaces.Environment.cleanup`, so
third-party environments take part too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ksi.cli.common import complete_names
from ksi.errors import EnvironmentFailure, KsiError, UserInputError
from ksi.options import create_component
from ksi.text import printable


def run_id_of(run_dir: Path) -> str:
    """The run id of ``run_dir``: ``run_id`` in its ``run.json``, else the directory's name."""
    # start-up: not needed for `ksi cleanup --help`
    from ksi.layout import RunLayout
    from ksi.rundir.run_state import load_run_state

    if not run_dir.is_dir():
        raise UserInputError(
            f"{run_dir}: no such run directory; pass an existing run directory, --run-id ID, "
            "or --all"
        )
    layout = RunLayout(run_dir)
    if layout.run_json.is_file():
        value = load_run_state(layout).run_id.strip()
        if value:
            return value
    return run_dir.resolve().name


def _environments(only: list[str]) -> list[tuple[str, Any]]:
    # start-up: not needed for `ksi cleanup --help`
    from ksi.plugins import registry

    reg = registry("environment")
    chosen = [reg.get(name) for name in only] if only else list(reg)
    found = []
    for entry in chosen:
        try:
            env = create_component(entry.obj, {}, kind="environment", option_flag="--environment")
        except KsiError:
            continue  # needs options to exist at all; it cannot have leftovers we can find
        found.append((entry.name, env))
    return found


def cleanup(
    run_dir: Annotated[
        Path | None,
        typer.Argument(
            metavar="RUN_DIR",
            help="Run directory whose leftovers to remove (its run.json names the run).",
        ),
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all", help="Remove the leftovers of every KSI run on this machine.")
    ] = False,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run id, when the run directory is gone.")
    ] = None,
    environment: Annotated[
        list[str] | None,
        typer.Option(
            "--environment",
            autocompletion=complete_names("environment"),
            metavar="NAME",
            help="Only this environment (repeatable; default: all).",
        ),
    ] = None,
) -> None:
    """Remove what killed runs left (containers, local processes): of RUN_DIR, --run-id or --all."""
    given = sum(x for x in (run_dir is not None, all_runs, run_id is not None))
    if given != 1:
        raise UserInputError(
            "ksi cleanup: give exactly one of RUN_DIR, --run-id ID or --all "
            "(e.g. `ksi cleanup runs/2024-06-01-abc` or `ksi cleanup --all`)"
        )
    target: str | None
    if all_runs:
        target = None
    elif run_id is not None:
        target = run_id.strip()
        if not target:
            raise UserInputError("--run-id: empty run id")
    else:
        assert run_dir is not None
        target = run_id_of(run_dir)
    total = 0
    parts = []
    for name, env in _environments(list(environment or [])):
        try:
            removed = int(env.cleanup(target))
        except EnvironmentFailure as exc:
            if environment:
                raise
            typer.echo(printable(f"note: {name}: skipped: {exc}", multiline=True), err=True)
            continue
        total += removed
        if removed:
            parts.append(f"{name}: {removed}")
    scope = "every ksi run" if target is None else f"run {target!r}"
    detail = f" ({', '.join(parts)})" if parts else ""
    typer.echo(printable(f"removed {total} leftover{'s' if total != 1 else ''} of {scope}{detail}"))


def register(app: typer.Typer) -> None:
    """Add ``ksi cleanup`` to ``app``."""
    app.command("cleanup")(cleanup)
