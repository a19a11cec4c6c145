"""``ksi export``: a run's data as plain files other tools read (``trajectories``: ATIF).

It reads the run directory only; the output may not be one of the run's own
files (:func:`ksi.layout.refuse_own_file`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

export_app = typer.Typer(
    help="Export a run's trajectories (ATIF, one file per attempt) with an index.",
    no_args_is_help=True,
)


@export_app.command("trajectories")
def trajectories_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory.")],
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", metavar="DIR", help="The directory to write (created if needed)."
        ),
    ],
) -> None:
    """Write one ATIF file per attempt and index.jsonl (task, score, generation, steps...).

    Each attempt's trajectory.json (its latest try) is copied as DIR/TASK/ATTEMPT.json;
    DIR/index.jsonl has one line per file with the task, attempt, generation, status,
    score, whether it solved the task, and its counts of steps, tool calls and tool
    errors. Attempts that left no trajectory are counted, not written.
    """
    # start-up: not needed for `ksi export --help`
    from ksi.errors import UserInputError
    from ksi.text import printable
    from ksi.view.export import INDEX_FILE, export_trajectories

    if output.exists() and not output.is_dir():
        raise UserInputError(f"--output {output}: is a file; name a directory to write into")
    if not (run_dir / "run.json").is_file():
        raise UserInputError(f"{run_dir}: not a run directory (no run.json)")
    done = export_trajectories(run_dir, output)
    typer.echo(
        f"wrote {len(done.entries)} trajectories and {output / INDEX_FILE}"
        + (f"; {len(done.missing)} attempt(s) left none" if done.missing else "")
    )
    for line in done.unreadable:
        typer.echo(printable(f"warning: not exported, unreadable: {line}"), err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")


__all__ = ["register"]
