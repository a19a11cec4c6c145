"""A run's per-task table as CSV or Markdown (``ksi report --format csv|markdown``).

CSV is for spreadsheets and scripts: one row per task, raw values, every
task. Markdown is for pasting into a pull request or a paper draft: the
totals in a sentence, then the table, with every cell escaped so a task id
holding ``|``, ``*`` or ``<b>`` stays one cell of plain text.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence

from ksi.records import RunSummary, TaskSummary
from ksi.text import printable
from ksi.view.generations import learning_tasks, newly_solved_ids
from ksi.view.verdict import task_state

CSV_COLUMNS = (
    "task_id",
    "status",
    "best_score",
    "solved",
    "attempts",
    "scored",
    "unscored",
    "errors",
    "successes",
    "pass_at_k",
    "input_tokens",
    "output_tokens",
    "cost_usd",
)


def _raw(value: object) -> str:
    return "" if value is None else str(value)


def task_csv(summary: RunSummary) -> str:
    """Every task of the run, one CSV row each, with a header row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for t in summary.tasks:
        writer.writerow(
            [
                t.task_id,
                task_state(t),
                _raw(t.best_score),
                "true" if t.solved else "false",
                t.attempts,
                t.scored,
                t.unscored,
                t.errors,
                t.successes,
                _raw(t.pass_at_k),
                t.input_tokens,
                t.output_tokens,
                _raw(t.cost_usd),
            ]
        )
    return out.getvalue()


#: Characters that are markup anywhere in a table cell (line-start ones cannot occur there).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_text(text: str) -> str:
    """``text`` as literal Markdown inline text: one line, markup and HTML neutralised."""
    one_line = printable(text)
    escaped = one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", escaped)


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"  # noqa: RUF001 - an en dash for "none"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _task_row(t: TaskSummary, with_cost: bool) -> list[str]:
    cells = [
        md_text(t.task_id),
        task_state(t),
        _score(t.best_score),
        str(t.attempts),
        str(t.scored),
        str(t.unscored),
        str(t.errors),
    ]
    if with_cost:
        cells.append("–" if t.cost_usd is None else f"${t.cost_usd:.4f}")  # noqa: RUF001
    return cells


def task_markdown(summary: RunSummary, *, name: str = "") -> str:
    """The run's totals as a sentence, then its per-task table (and generations, if any)."""
    label = md_text(name or summary.run_id)
    parts = [
        f"solved {summary.solved_tasks}/{summary.n_tasks} ({summary.solve_rate:.1%})",
        f"mean best score {_score(summary.mean_best_score)}",
    ]
    parts += [f"{k} {v:.3f}" for k, v in summary.pass_at_k.items()]
    parts.append(f"{summary.n_attempts} attempts")
    if summary.unscored_attempts or summary.error_attempts:
        parts.append(f"{summary.unscored_attempts} unscored, {summary.error_attempts} errors")
    if summary.total_cost_usd is not None:
        by_whom = ", ".join(
            f"{who} " + ("–" if usd is None else f"${usd:.2f}")  # noqa: RUF001
            for who, usd in summary.cost_parts
        )
        parts.append(f"cost ${summary.total_cost_usd:.2f}" + (f" ({by_whom})" if by_whom else ""))
    if not summary.run_complete:
        parts.append("run incomplete")
    lines = [f"**Run {label}**: " + ", ".join(parts) + ".", ""]
    with_cost = summary.attempts_cost_usd is not None  # the column: what attempts spent
    header = ["task", "status", "best", "attempts", "scored", "unscored", "errors"]
    align = [":--", ":--", "--:", "--:", "--:", "--:", "--:"]
    if with_cost:
        header.append("cost")
        align.append("--:")
    lines += [_row(header), _row(align)]
    lines += [_row(_task_row(t, with_cost)) for t in summary.tasks]
    gs = summary.generations
    if gs is not None and gs.generations:
        held = bool(gs.holdout_task_ids)
        header = ["generation", "attempted", "solved", "solve rate", "cumulative", "newly solved"]
        lines += ["", _row(header + (["hold-outs solved"] if held else []))]
        lines.append(_row(["--:", "--:", "--:", "--:", "--:", ":--"] + (["--:"] if held else [])))
        for g in gs.generations:
            new = newly_solved_ids(gs, g.generation)
            cells = [
                str(g.generation),
                g.tasks_shown,
                str(g.solved),
                f"{g.solve_rate:.1%}" if g.tasks_scored else "–",  # noqa: RUF001
                f"{g.cumulative_solved}/{learning_tasks(gs)}",
                ", ".join(md_text(t) for t in new) or "–",  # noqa: RUF001
            ]
            if held:
                cells.append(f"{g.holdout_solved}/{g.holdout_attempted}")
            lines.append(_row(cells))
        if held:
            ids = ", ".join(md_text(t) for t in gs.holdout_task_ids)
            lines += ["", f"Hold-outs (run every generation, never learned from): {ids}."]
    return "\n".join(lines) + "\n"
