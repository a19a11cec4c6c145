"""Printing a run summary: a rich table on a terminal, plain aligned text otherwise."""

from __future__ import annotations

import typer

from ksi.runner.capture import MAX_LISTED_SKIPS
from ksi.runner.models import RunSummary, TaskSummary
from ksi.text import printable


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def summary_lines(summary: RunSummary) -> list[str]:
    """The totals, one ``label: value`` line each (also used for the plain view).

    Escaped for the terminal: the run directory and a stop reason quote user text.
    """
    lines = [
        f"run: {summary.run_id}  ({summary.run_dir})",
        f"tasks: {summary.n_tasks}   attempts journalled: {summary.n_attempts}",
        f"solved: {summary.solved_tasks}/{summary.n_tasks} "
        f"(solve rate {summary.solve_rate:.1%}, threshold {summary.solved_threshold:g})",
        f"mean best score: {_score(summary.mean_best_score)}",
        f"unscored attempts: {summary.unscored_attempts}   "
        f"error attempts: {summary.error_attempts}",
    ]
    if summary.pass_at_k:
        lines.append("pass@k: " + "  ".join(f"{k}={v:.3f}" for k, v in summary.pass_at_k.items()))
    if summary.input_tokens or summary.output_tokens or summary.total_cost_usd is not None:
        lines.append(
            f"tokens: in {summary.input_tokens:,}  out {summary.output_tokens:,}  "
            f"cache read {summary.cache_read_tokens:,}  cache write {summary.cache_write_tokens:,}"
        )
        lines.append(
            f"cost: {_money(summary.total_cost_usd)}   "
            f"per solved task: {_money(summary.cost_per_solved_task)}"
        )
    if summary.skipped_files:
        lines.append(
            f"capture skipped {summary.skipped_files:,} paths in "
            f"{summary.attempts_with_skipped_files} attempt(s) (listed, up to "
            f"{MAX_LISTED_SKIPS} each, in skipped_files of the attempt's record.json)"
        )
    if summary.wall_time_sec is not None:
        lines.append(f"wall time: {summary.wall_time_sec:.1f}s")
    state = "complete" if summary.run_complete else "incomplete"
    if summary.stopped_reason:
        state += f" (stopped: {summary.stopped_reason})"
    lines.append(f"run: {state}")
    return [printable(line) for line in lines]


#: Per-task rows shown on the terminal; the JSON report always has every task.
MAX_TASK_ROWS = 50


def _more_line(summary: RunSummary) -> str | None:
    hidden = len(summary.tasks) - MAX_TASK_ROWS
    if hidden <= 0:
        return None
    return printable(
        f"... {hidden} more tasks (ksi report {summary.run_dir} --json lists every one)"
    )


HEADER = ("task", "best", "solved", "attempts", "scored", "unscored", "errors")


def _cells(t: TaskSummary, with_cost: bool) -> list[str]:
    """One task's row, the same in the rich and the plain view."""
    cells = [
        printable(t.task_id),
        _score(t.best_score),
        "yes" if t.solved else "no",
        str(t.attempts),
        str(t.scored),
        str(t.unscored),
        str(t.errors),
    ]
    return [*cells, _money(t.cost_usd)] if with_cost else cells


def print_summary(summary: RunSummary, *, rich_output: bool) -> None:
    _print_summary(summary, rich_output=rich_output)
    # After the table, on stderr, so they are the last thing a user sees.
    for warning in summary.warnings:
        typer.echo(f"warning: {printable(warning)}", err=True)


def _print_summary(summary: RunSummary, *, rich_output: bool) -> None:
    with_cost = summary.total_cost_usd is not None
    header = [*HEADER, "cost"] if with_cost else list(HEADER)
    rows = [_cells(t, with_cost) for t in summary.tasks[:MAX_TASK_ROWS]]
    more = _more_line(summary)
    if rich_output:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title="Per task")
        table.add_column(header[0], overflow="fold")  # ids are never cut short
        for col in header[1:]:
            table.add_column(col, justify="right")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))  # Text: "[x]" in an id is no markup
        console = Console()
        console.print(table)
        if more:
            console.print(more, highlight=False, markup=False)
        for line in summary_lines(summary):
            console.print(line, highlight=False, markup=False)
        return
    table_rows = [header, *rows]
    widths = [max(len(r[i]) for r in table_rows) for i in range(len(header))]
    for r in table_rows:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if more:
        typer.echo(more)
    typer.echo("")
    for line in summary_lines(summary):
        typer.echo(line)
