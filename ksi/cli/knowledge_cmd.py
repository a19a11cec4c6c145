"""``ksi knowledge``: the notes a run's generations distilled (export them to seed another run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

knowledge_app = typer.Typer(
    help="Export the notes a run's generations distilled, to seed another run.",
    no_args_is_help=True,
)


@knowledge_app.command("export")
def export_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the bundle (JSON).")
    ],
) -> None:
    """Write the run's newest notes to a bundle file for `ksi run --seed-knowledge`."""
    # start-up: not needed for `ksi knowledge --help`
    from ksi.knowledge.store import bundle_data, export_bundle
    from ksi.layout import RunLayout, refuse_own_file
    from ksi.rundir.run_state import load_run_state
    from ksi.serialization import write_json_atomic

    refuse_own_file(output, "--output", [run_dir])
    layout = RunLayout(run_dir.resolve())
    state = load_run_state(layout)
    bundle = export_bundle(layout.root, state.run_id)
    write_json_atomic(output, bundle_data(bundle))
    typer.echo(
        f"wrote {len(bundle.notes)} notes of generation {bundle.generation} of run "
        f"{bundle.source_run} to {output}"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(knowledge_app, name="knowledge")


__all__ = ["register"]
