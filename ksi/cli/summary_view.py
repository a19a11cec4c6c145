"""Printing a run summary: a rich table on a terminal, plain aligned text otherwise.

After the table come the sections that need the user's eyes (each from one
function, so views can be added or reordered without touching the others):
:func:`failure_lines` (per failing task: how the agent ended, why grading
failed, the attempt to open), :func:`capture_change_lines` (every file
capture dropped or restored) and :func:`unchanged_lines` (attempts that
changed nothing in repo/); then the totals, ending with the run's state.
"""

from __future__ import annotations

import os

import typer

from ksi.attempt.capture import MAX_LISTED_SKIPS
from ksi.provenance import Provenance
from ksi.records import GenerationsSummary, RunSummary, TaskGenerations, TaskSummary
from ksi.reporting.attention import (
    capture_changes,
    failing_tasks,
    suspect_scores,
    unchanged_attempts,
)
from ksi.text import printable

#: Failing tasks, and attempts of each, described; the rest are counted.
MAX_FAILING_TASKS = 10
MAX_ATTEMPTS_PER_TASK = 3
#: Files capture dropped or restored, listed; the rest are counted.
MAX_CAPTURE_LINES = 20


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
        estimated = ""
        if summary.estimated_cost_usd is not None:
            tables = ", ".join(summary.price_tables) or "a price table"
            estimated = f"   ({_money(summary.estimated_cost_usd)} of it estimated from {tables})"
        lines.append(
            f"cost: {_money(summary.total_cost_usd)}{_cost_parts(summary)}   "
            f"per solved task: {_money(summary.cost_per_solved_task)}" + estimated
        )
    if summary.skipped_files:
        lines.append(
            f"capture skipped {summary.skipped_files:,} paths in "
            f"{summary.attempts_with_skipped_files} attempt(s) (listed, up to "
            f"{MAX_LISTED_SKIPS} each, in skipped_files of the attempt's record.json)"
        )
    if summary.score_conflicts:
        suspect = suspect_scores(summary)
        shown = ", ".join(f"{r.task_id}/{r.attempt}" for r in suspect[:10])
        more = f" and {len(suspect) - 10} more" if len(suspect) > 10 else ""
        lines.append(
            f"suspect scores: {summary.score_conflicts} attempt(s) got full marks from "
            f"score.json while the eval command failed: {shown}{more} (the agent's code may "
            "have written it; docs/security.md)"
        )
    if summary.wall_time_sec is not None:
        lines.append(f"wall time: {summary.wall_time_sec:.1f}s")
    lines.extend(provenance_lines(summary.provenance))
    lines.append(f"run: {run_state(summary)}")
    return [printable(line) for line in lines]


def provenance_lines(provenance: Provenance) -> list[str]:
    """The tasks file's hash and the commits the run rests on, when run.json has them."""
    lines = []
    tasks = []
    if provenance.tasks_sha256:
        tasks.append(f"sha256 {provenance.tasks_sha256}")
    if provenance.tasks_git is not None:
        tasks.append(provenance.tasks_git.describe())
    if tasks:
        lines.append("tasks file: " + ", ".join(tasks))
    if provenance.ksi_git is not None:
        lines.append(f"ksi source: {provenance.ksi_git.describe()}")
    return lines


def run_state(summary: RunSummary) -> str:
    """``complete``/``incomplete``, and never plain ``complete`` when attempts ended in error."""
    state = "complete" if summary.run_complete else "incomplete"
    if summary.stopped_reason:
        state += f" (stopped: {summary.stopped_reason})"
    if summary.error_attempts:
        n = summary.error_attempts
        state += (
            f", but {n} attempt{'s' if n != 1 else ''} ended in error (see 'failing tasks' above)"
        )
    return state


def shown_path(path: str) -> str:
    """``path`` relative to the current directory when it is below it, else as it is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def failure_lines(summary: RunSummary) -> list[str]:
    """Per failing task: each attempt's agent ending, why grading failed, where to look."""
    failures = failing_tasks(summary)
    if not failures:
        return []
    lines = [f"failing tasks ({len(failures)}):"]
    for task in failures[:MAX_FAILING_TASKS]:
        lines.append(f"  {task.task_id}: best {_score(task.best_score)}")
        for a in task.attempts[:MAX_ATTEMPTS_PER_TASK]:
            lines.append(f"    attempt {a.attempt} ({a.status}): agent {a.agent}")
            lines.append(f"      grading: {a.grading}")
            lines.append(f"      open: {shown_path(a.path)}")
        hidden = len(task.attempts) - MAX_ATTEMPTS_PER_TASK
        if hidden > 0:
            lines.append(f"    ... {hidden} more attempts")
    hidden = len(failures) - MAX_FAILING_TASKS
    if hidden > 0:
        lines.append(
            f"  ... {hidden} more failing tasks (ksi report {summary.run_dir} --json has "
            "every record)"
        )
    return [printable(line) for line in lines]


def capture_change_lines(summary: RunSummary) -> list[str]:
    """Every file capture dropped (a new test file, score.json) or restored from the seed."""
    changes = capture_changes(summary)
    if not changes:
        return []
    lines = [
        f"capture dropped or restored {len(changes)} file(s) "
        "(tests come from the task; docs/capture.md):"
    ]
    for c in changes[:MAX_CAPTURE_LINES]:
        lines.append(f"  {c.task_id}/{c.attempt}: {c.file.path}: {c.file.reason}")
    hidden = len(changes) - MAX_CAPTURE_LINES
    if hidden > 0:
        lines.append(f"  ... {hidden} more (skipped_files in each attempt's record.json)")
    return [printable(line) for line in lines]


def unchanged_lines(summary: RunSummary) -> list[str]:
    """A warning for attempts whose graded repo/ equals the starting files."""
    idle = unchanged_attempts(summary)
    if not idle:
        return []
    shown = ", ".join(f"{r.task_id}/{r.attempt}" for r in idle[:10])
    more = f" and {len(idle) - 10} more" if len(idle) > 10 else ""
    return [
        printable(
            f"warning: {len(idle)} attempt(s) changed nothing in repo/: {shown}{more}. "
            "Agents start in the workspace, with the task's files in repo/ ($KSI_REPO): "
            "a command agent must write there (cd repo, or use $KSI_REPO)."
        )
    ]


def attention_lines(summary: RunSummary) -> list[str]:
    """The sections printed between the table and the totals (empty when all is well)."""
    lines: list[str] = []
    for section in (failure_lines, capture_change_lines, unchanged_lines):
        part = section(summary)
        if part:
            lines.extend(["", *part] if lines else part)
    return lines


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


def _cells(t: TaskSummary, with_cost: bool, progress: TaskGenerations | None = None) -> list[str]:
    """One task's row, the same in the rich and the plain view."""
    label = t.task_id + (" (hold-out)" if progress is not None and progress.holdout else "")
    cells = [
        printable(label),
        _score(t.best_score),
        "yes" if t.solved else "no",
        str(t.attempts),
        str(t.scored),
        str(t.unscored),
        str(t.errors),
    ]
    if progress is not None:
        cells.append("-" if progress.best_generation is None else str(progress.best_generation))
    return [*cells, _money(t.cost_usd)] if with_cost else cells


GENERATION_HEADER = (
    "gen",
    "tasks",
    "solved",
    "rate",
    "new",
    "cumulative",
    "cum. rate",
    "hold-outs",
    "notes from",
    "cost",
)


def _pct(value: float) -> str:
    return f"{value:.0%}"


def generation_rows(generations: GenerationsSummary) -> list[list[str]]:
    """One row per generation (hold-outs as ``solved/run``), the same in both views."""
    rows = []
    for g in generations.generations:
        held = f"{g.holdout_solved}/{g.holdout_attempted}" if g.holdout_attempted else "-"
        notes = "-" if g.knowledge_from is None else str(g.knowledge_from)
        rows.append(
            [
                str(g.generation),
                g.tasks_shown,
                str(g.solved),
                _pct(g.solve_rate) if g.tasks_scored else "-",
                str(g.newly_solved),
                str(g.cumulative_solved),
                _pct(g.cumulative_solve_rate),
                held,
                notes,
                _money(g.cost_usd),
            ]
        )
    return rows


def generation_lines(generations: GenerationsSummary) -> list[str]:
    """What the table cannot say: the loop's settings and each fallback."""
    lines = [
        f"generations: {len(generations.generations)} run of {generations.planned} "
        f"(strategy {generations.strategy}, knowledge {generations.knowledge}, "
        f"distiller {generations.distiller})"
    ]
    if generations.holdout_task_ids:
        lines.append("hold-outs (never learned from): " + ", ".join(generations.holdout_task_ids))
    for g in generations.generations:
        if g.forum_sessions:
            cost = f", cost {_money(g.forum_cost_usd)}" if g.forum_cost_usd is not None else ""
            lines.append(
                f"generation {g.generation} forum: {g.forum_sessions} session(s), "
                f"{g.forum_posts} post(s) kept, {g.forum_dropped} dropped{cost}"
            )
        if g.fallback:
            lines.append(f"generation {g.generation}: {g.fallback}")
    return [printable(line) for line in lines]


#: The notes ``ksi report`` lists (most received first; ``--json`` and the view have all).
MAX_NOTE_ROWS = 10
NOTE_HEADER = ("note", "kind", "task", "received", "solved", "rate", "compared", "solved", "rate")
#: What the notes table is, said above it: figures that invite a causal reading.
NOTES_TITLE = "Notes and solves (evidence, not proof)"


def _rate(value: float | None) -> str:
    return "-" if value is None else _pct(value)


def note_header(generations: GenerationsSummary) -> list[str]:
    with_control = any(e.control is not None for e in generations.notes)
    return [*NOTE_HEADER, "control", "solved", "rate"] if with_control else list(NOTE_HEADER)


def note_rows(generations: GenerationsSummary) -> list[list[str]]:
    """The most received notes: their receivers' solves, and comparable attempts' without
    (and the control run's, when one was given)."""
    with_control = any(e.control is not None for e in generations.notes)
    return [
        [
            printable(e.note_id),
            printable(e.kind) or "?",
            "all" if e.task_id is None else printable(e.task_id),
            str(e.received),
            str(e.received_solved),
            _rate(e.received_rate),
            str(e.compared),
            str(e.compared_solved),
            _rate(e.compared_rate),
            *(
                [str(e.control or 0), str(e.control_solved or 0), _rate(e.control_rate)]
                if with_control
                else []
            ),
        ]
        for e in generations.notes[:MAX_NOTE_ROWS]
    ]


def note_lines(generations: GenerationsSummary) -> list[str]:
    """How to read the notes table, and which notes preceded each task's first solve."""
    more = len(generations.notes) - MAX_NOTE_ROWS
    lines = [
        "received: scored attempts given the note; compared: scored attempts at the same "
        "tasks, in earlier generations, without it"
        + (
            "; control: the control run's (--control) at the same tasks and generations"
            if any(e.control is not None for e in generations.notes)
            else ""
        )
        + ". Attempts differ in more than their notes."
    ]
    if more > 0:
        lines.append(f"... and {more} more notes (--json, ksi view)")
    for t in generations.tasks:
        if t.solved_generation is None or t.holdout:
            continue
        ids = t.notes_before_solve
        shown = ", ".join(ids[:6]) + (f" (+{len(ids) - 6} more)" if len(ids) > 6 else "")
        lines.append(
            printable(
                f"{t.task_id}: first solved in generation {t.solved_generation}, "
                + (f"after notes {shown}" if ids else "with no notes")
            )
        )
    return lines


def print_summary(summary: RunSummary, *, rich_output: bool) -> None:
    _print_summary(summary, rich_output=rich_output)
    if summary.generations is not None:
        _print_table(
            "Per generation",
            list(GENERATION_HEADER),
            generation_rows(summary.generations),
            generation_lines(summary.generations),
            rich_output=rich_output,
        )
        if summary.generations.notes:
            _print_table(
                NOTES_TITLE,
                note_header(summary.generations),
                note_rows(summary.generations),
                note_lines(summary.generations),
                rich_output=rich_output,
            )
    # After the table, on stderr, so they are the last thing a user sees.
    for warning in summary.warnings:
        typer.echo(f"warning: {printable(warning)}", err=True)


def _print_table(
    title: str, header: list[str], rows: list[list[str]], lines: list[str], *, rich_output: bool
) -> None:
    if rich_output:
        # heavy (start-up): rich, only to print to a terminal
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title)
        for n, col in enumerate(header):
            table.add_column(col, justify="left" if n == 0 else "right")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console = Console()
        console.print(table)
        for line in lines:
            console.print(line, highlight=False, markup=False)
        return
    typer.echo("")
    typer.echo(title.lower() + ":")
    table_rows = [header, *rows]
    widths = [max(len(r[i]) for r in table_rows) for i in range(len(header))]
    for r in table_rows:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    for line in lines:
        typer.echo(line)


def _cost_parts(summary: RunSummary) -> str:
    """`` (attempts $x, distillation $y, forum $z)`` when more than attempts spent."""
    if not summary.cost_parts:
        return ""
    return " (" + ", ".join(f"{who} {_money(usd)}" for who, usd in summary.cost_parts) + ")"


def _print_summary(summary: RunSummary, *, rich_output: bool) -> None:
    # The per-task cost column holds what the attempts spent.
    with_cost = summary.attempts_cost_usd is not None
    header = list(HEADER)
    progress: dict[str, TaskGenerations] = {}
    if summary.generations is not None:
        header.append("best gen")
        progress = {t.task_id: t for t in summary.generations.tasks}
    header = [*header, "cost"] if with_cost else header
    rows = [_cells(t, with_cost, progress.get(t.task_id)) for t in summary.tasks[:MAX_TASK_ROWS]]
    more = _more_line(summary)
    if rich_output:
        # heavy (start-up): rich, only to print to a terminal
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
        attention = attention_lines(summary)
        for line in attention:
            console.print(line, highlight=False, markup=False)
        if attention:
            console.print("")
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
    attention = attention_lines(summary)
    for line in attention:
        typer.echo(line)
    if attention:
        typer.echo("")
    for line in summary_lines(summary):
        typer.echo(line)
