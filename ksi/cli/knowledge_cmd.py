"""``ksi knowledge``: ask the knowledge store (search, one note, totals), or export notes.

Every command but ``export`` reads a store: ``--knowledge-db PATH``, or
``--run-dir RUN`` for the store that run used (a run made before the store is
read into one in memory). They only read, so they may run while runs write.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from ksi.knowledge.db import KnowledgeDB

knowledge_app = typer.Typer(
    help="Search the knowledge store, show a note and who received it, export notes.",
    no_args_is_help=True,
)

DbOption = Annotated[
    Path | None,
    typer.Option("--knowledge-db", metavar="PATH", help="The knowledge store (SQLite file)."),
]
RunDirOption = Annotated[
    Path | None,
    typer.Option("--run-dir", metavar="RUN", help="A run directory: the store that run used."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _open(knowledge_db: Path | None, run_dir: Path | None) -> tuple[KnowledgeDB, str | None]:
    """The store to read (read-only), and the run whose own note ids are understood."""
    # start-up: `ksi --help` and other commands import no store
    from ksi.errors import UserInputError
    from ksi.generations.run_store import open_run_store
    from ksi.knowledge.db import KnowledgeDB

    if (knowledge_db is None) == (run_dir is None):
        raise UserInputError("give the store as --knowledge-db PATH or a run as --run-dir RUN")
    if knowledge_db is not None:
        return KnowledgeDB.open(knowledge_db, readonly=True), None
    assert run_dir is not None
    return open_run_store(run_dir)


def _line(text: str) -> str:
    # start-up: `ksi --help` and other commands import no store
    from ksi.text import printable

    return printable(" ".join(text.split()))


@knowledge_app.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help="Words to find (all of them; word* for a prefix).")],
    task: Annotated[str | None, typer.Option(help="Only this task's.")] = None,
    kind: Annotated[
        str | None,
        typer.Option(help="Only notes of this kind (insight, eval_output...), or attempt, post."),
    ] = None,
    generation: Annotated[int | None, typer.Option(help="Only this generation's.")] = None,
    run: Annotated[str | None, typer.Option(help="Only this run's (its id, or its start).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="The most results.")] = 20,
    knowledge_db: DbOption = None,
    run_dir: RunDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Full-text search (BM25) over the store's notes, attempts' evidence and posts."""
    # start-up: `ksi --help` and other commands import no store
    from ksi.cli.common import echo_json
    from ksi.knowledge.queries import search
    from ksi.serialization import to_data

    db, _ = _open(knowledge_db, run_dir)
    with db:
        hits = search(db, query, task=task, kind=kind, generation=generation, run=run, limit=limit)
    if as_json:
        echo_json({"query": query, "hits": to_data(hits)})
        return
    if not hits:
        typer.echo(f"nothing matches {_line(query)!r}")
        return
    for hit in hits:
        where = f"task {hit.task_id}" if hit.task_id is not None else "all tasks"
        what = hit.kind if hit.source != "attempt" else f"attempt, score {hit.score:.2f}"
        status = f", {hit.status}" if hit.status and hit.status != "active" else ""
        typer.echo(
            f"{_line(hit.id)}  ({_line(what)}{status}; {_line(where)}, generation "
            f"{hit.generation}, relevance {hit.relevance:.2f})"
        )
        typer.echo(f"    {_line(hit.snippet)}")


@knowledge_app.command("show")
def show_command(
    note_id: Annotated[str, typer.Argument(help="A note id (a run's own id with --run-dir).")],
    knowledge_db: DbOption = None,
    run_dir: RunDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """One note: its text, where it comes from, what it cites, who received it and how
    they scored."""
    # start-up: `ksi --help` and other commands import no store
    from ksi.cli.common import echo_json
    from ksi.errors import UserInputError
    from ksi.knowledge.queries import note_detail
    from ksi.serialization import to_data
    from ksi.text import printable

    db, run_id = _open(knowledge_db, run_dir)
    with db:
        detail = note_detail(db, note_id, run_id=run_id)
    if detail is None:
        raise UserInputError(
            f"no note {note_id!r} in the store; `ksi knowledge search` finds notes by their words"
        )
    if as_json:
        echo_json({**to_data(detail), "solve_rate": detail.solve_rate})
        return
    note = detail.note
    echo = typer.echo
    echo(f"note {_line(detail.uid)} ({_line(note.kind)}, {detail.status})")
    task = "all tasks" if note.task_id is None else f"task {note.task_id}"
    echo(f"about: {_line(task)}" + (f" (content {detail.task_hash})" if detail.task_hash else ""))
    echo(
        f"from: run {detail.run_id} ({_line(detail.run_dir)}), generation {note.generation}, "
        f"distiller {_line(detail.distiller)}"
        + (f", model {_line(detail.model)}" if detail.model else "")
        + f", {detail.created_at}"
    )
    if note.applies_when:
        echo(f"applies when: {_line(note.applies_when)}")
    if detail.superseded_by:
        echo(f"superseded by: {detail.superseded_by}")
    if detail.supersedes:
        echo(f"supersedes: {', '.join(detail.supersedes)}")
    echo("")
    echo(printable(note.text.rstrip(), multiline=True))
    echo("")
    echo("cites:" if detail.cites else "cites: nothing")
    for cited in detail.cites:
        score = "not in the store" if cited.score is None else f"score {cited.score:.2f}"
        echo(f"  {_line(cited.attempt_id)}: {score}")
    rate = detail.solve_rate
    if rate is None:
        echo("received by: no scored attempt yet")
    else:
        solved = sum(1 for r in detail.receivers if r.solved)
        echo(
            f"received by: {len(detail.receivers)} scored attempt(s), {solved} solved ({rate:.0%})"
        )
    for r in detail.receivers:
        echo(
            f"  run {r.run_id} {_line(r.attempt_id)} (generation {r.generation}): "
            f"score {r.score:.2f}{', solved' if r.solved else ''}"
        )


@knowledge_app.command("stats")
def stats_command(
    knowledge_db: DbOption = None,
    run_dir: RunDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """What the store holds: runs, attempts, notes by kind and status, its size."""
    # start-up: `ksi --help` and other commands import no store
    from ksi.cli.common import echo_json
    from ksi.knowledge.queries import stats
    from ksi.serialization import to_data

    db, _ = _open(knowledge_db, run_dir)
    with db:
        figures = stats(db)
    if as_json:
        echo_json(to_data(figures))
        return
    echo = typer.echo
    echo(f"store: {_line(figures.path)} (schema {figures.schema_version})")
    echo(f"size on disk: {figures.size_bytes / 1024:.0f} KiB")
    echo(f"runs: {figures.runs}   tasks: {figures.tasks}   scored attempts: {figures.attempts}")
    echo(f"stored generations: {figures.stored_generations}   receipts: {figures.receipts}")
    statuses = ", ".join(f"{k} {v}" for k, v in figures.notes_by_status.items()) or "none"
    echo(f"notes: {figures.notes} ({statuses})")
    for kind, count in figures.notes_by_kind.items():
        echo(f"  {_line(kind)}: {count}")
    echo(f"posts: {figures.posts}")


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
