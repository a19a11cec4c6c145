"""Printing ``ksi show`` and ``ksi compare`` with rich: colours on a terminal, plain text otherwise.

The facts are the HTML report's (:mod:`ksi.view`): the same verdicts, the same
diff classification, the same bounded excerpts. Every string that came from a
run (task ids, logs, errors) is passed through :func:`ksi.text.printable` and
printed as :class:`rich.text.Text`, so it can neither drive the terminal nor be
read as rich markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ksi.cli.common import is_tty
from ksi.cli.summary_view import print_summary
from ksi.text import printable
from ksi.trajectories import TRAJECTORY_FILE
from ksi.view import fmt
from ksi.view.compare import Comparison
from ksi.view.excerpt import Excerpt
from ksi.view.forum import ThreadView
from ksi.view.generations import notes_given
from ksi.view.runs import AttemptView, RunView, TaskView
from ksi.view.steps import StepView, TrajectoryView, load_trajectory_view

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

#: Lines of a log shown in the terminal (the end of it); the path names the whole file.
LOG_LINES = 40
#: Comparison rows shown without --all.
COMPARE_ROWS = 50

_TONE_STYLE = {
    "good": "bold green",
    "partial": "bold yellow",
    "bad": "bold red",
    "unscored": "bold",
    "error": "bold magenta",
}
_STATE_TONE = {
    "solved": "good",
    "partial": "partial",
    "failed": "bad",
    "unscored": "unscored",
    "error": "error",
    "not run": "unscored",
}
_DIFF_STYLE = {
    "file": "bold",
    "meta": "dim",
    "hunk": "cyan",
    "add": "green",
    "del": "red",
    "context": "",
    "note": "yellow italic",
}


def _console() -> Console:
    # heavy (start-up): rich, only to print to a terminal
    from rich.console import Console

    return Console(highlight=False, width=None if is_tty() else 120)


def _text(value: object, style: str = "") -> Text:
    # heavy (start-up): rich, only to print to a terminal
    from rich.text import Text

    return Text(printable(str(value)), style=style)


def print_run(view: RunView) -> None:
    """The summary as ``ksi report`` prints it (generations, hold-outs), components, next."""
    print_summary(view.summary, rich_output=is_tty())
    console = _console()
    parts = ", ".join(f"{k} {v}" for k, v in view.components.items())
    console.print(_text(f"components: {parts}"))
    console.print(
        _text(f"next: ksi show {view.root} TASK (a task's attempts), ksi view {view.root} (HTML)"),
        style="dim",
        soft_wrap=True,
    )


def print_task(view: RunView, task: TaskView) -> None:
    """A task: its state, its prompt's start, and one line per attempt with why it ended so."""
    # heavy (start-up): rich, only to print to a terminal
    from rich.table import Table

    console = _console()
    s = task.summary
    console.print(
        _text(f"task {task.task_id}:", "bold"),
        _text(task.state, _TONE_STYLE[_STATE_TONE[task.state]]),
        _text(f"  best {fmt.score(s.best_score)}, {s.attempts} attempt(s), {s.errors} error(s)"),
    )
    if task.prompt.exists:
        lines = task.prompt.text.splitlines()
        console.print(_text("prompt:", "bold"))
        for line in lines[:8]:
            console.print(_text("  " + line), soft_wrap=True)
        if len(lines) > 8:
            console.print(_text(f"  ... ({len(lines) - 8} more lines)"), style="dim")
    table = Table(box=None)
    for col in ("attempt", "result", "why", "time", "cost", "changed", "steps"):
        table.add_column(col, overflow="fold")
    for a in task.attempts:
        rec = a.record
        changed = (
            f"+{sum(f.added for f in a.files_changed)} -{sum(f.removed for f in a.files_changed)}"
            f" in {len(a.files_changed)} file(s)"
            if a.files_changed
            else "nothing"
        )
        table.add_row(
            _text(a.label),
            _text(a.verdict.label, _TONE_STYLE[a.verdict.tone]),
            _text(a.verdict.reasons[0] if a.verdict.reasons else ""),
            fmt.secs(rec.timings.total),
            fmt.money(rec.usage.cost_usd),
            changed,
            _text(_step_counts(a.trajectory)),
        )
    console.print(table)
    if not task.attempts:
        console.print("no attempt of this task finished")
    else:
        console.print(
            _text(f"next: ksi show {view.root} {task.task_id} N (attempt N in full)"),
            style="dim",
            soft_wrap=True,
        )


def _step_counts(traj: TrajectoryView | None) -> str:
    """``12 (2 tool errors)``, ``unreadable``, or the dash without a trajectory."""
    if traj is None:
        return fmt.NONE
    if traj.problem:
        return "unreadable"
    errors = f" ({traj.tool_errors} tool error{'' if traj.tool_errors == 1 else 's'})"
    return f"{traj.total_steps}{errors if traj.tool_errors else ''}"


def _log(console: Console, title: str, excerpt: Excerpt, root: Path, path: str | None) -> None:
    """The end of a log (at most :data:`LOG_LINES` lines), with the whole file's path."""
    where = f" ({root / path})" if path else ""
    if not excerpt.exists:
        console.print(_text(f"{title}: no file", "bold"))
        return
    if excerpt.size == 0:
        console.print(_text(f"{title}: empty{where}", "bold"))
        return
    lines = excerpt.text.splitlines()
    hidden = len(lines) - LOG_LINES
    console.print(_text(f"{title}{where}:", "bold"))
    if hidden > 0 or excerpt.cut:
        console.print(
            _text(f"  ... earlier output not shown: the whole file has {excerpt.size:,} bytes"),
            style="yellow",
        )
    for line in lines[-LOG_LINES:]:
        console.print(_text("  " + line), soft_wrap=True)


def print_attempt(view: RunView, task: TaskView, attempt: AttemptView) -> None:
    """One attempt in full: status and why, facts, final message, diff, eval output, logs."""
    console = _console()
    rec = attempt.record
    v = attempt.verdict
    console.print(
        _text(f"task {task.task_id}, attempt {attempt.label}:", "bold"),
        _text(v.label, _TONE_STYLE[v.tone]),
    )
    for reason in v.reasons:
        console.print(_text("  - " + reason), soft_wrap=True)
    ev = rec.eval
    for label, value in attempt.facts:
        console.print(_text(f"{label}: {value}"), soft_wrap=True)
    if rec.knowledge is not None:
        link = f" ({view.root / attempt.notes_link})" if attempt.notes_link else ""
        console.print(_text(f"notes given: {notes_given(rec.knowledge)}{link}"), soft_wrap=True)
    where = view.root / rec.attempt_dir if rec.attempt_dir else None
    console.print(_text(f"files: {where or 'none'}"))
    if rec.final_message:
        console.print(_text("final message:", "bold"))
        for line in printable(rec.final_message, multiline=True).splitlines()[-LOG_LINES:]:
            console.print(_text("  " + line), soft_wrap=True)
    if attempt.prompt is not None:
        _log(console, "own prompt", attempt.prompt, view.root, attempt.link("prompt.md"))
    console.print(_text("diff against the starting files:", "bold"))
    if not attempt.diff.exists or attempt.diff.size == 0:
        # An attempt that changed nothing has no diff.patch (only a difference writes one).
        unchanged = attempt.diff.exists or rec.repo_changed is False
        console.print("  (no changes)" if unchanged else "  (no diff.patch)")
    else:
        for diff_line in attempt.diff_lines:
            console.print(_text(diff_line.text, _DIFF_STYLE[diff_line.kind]), soft_wrap=True)
        if attempt.diff.cut:
            console.print(
                _text(f"  ... cut: {attempt.diff.omitted:,} more bytes in diff.patch"),
                style="yellow",
            )
    logs = [
        ("agent stdout (end)", attempt.agent_stdout, "agent.stdout.log"),
        ("agent stderr (end)", attempt.agent_stderr, "agent.stderr.log"),
    ]
    if ev is not None:
        logs[:0] = [
            ("eval stdout (end)", attempt.eval_stdout, "eval/eval.stdout.log"),
            ("eval stderr (end)", attempt.eval_stderr, "eval/eval.stderr.log"),
        ]
    for title, excerpt, name in logs:
        _log(console, title, excerpt, view.root, attempt.link(name))
    skipped = sum(rec.skipped_counts.values()) or len(rec.skipped_files)
    if skipped:
        console.print(_text(f"capture skipped or restored {skipped} path(s):", "bold"))
        for f in rec.skipped_files[:LOG_LINES]:
            console.print(_text(f"  {f.path}: {f.reason}"), soft_wrap=True)
        if skipped > LOG_LINES:
            console.print(_text(f"  ... {skipped - LOG_LINES} more (record.json)"), style="dim")
    for earlier, ev_verdict in attempt.earlier:
        why = "; ".join(ev_verdict.reasons[:2])
        console.print(
            _text(f"earlier try {earlier.try_number}: {ev_verdict.label}: {why}"), soft_wrap=True
        )
    if attempt.trajectory is not None:
        console.print(
            _text(
                f"steps: {_step_counts(attempt.trajectory)} "
                f"(ksi show {view.root} {task.task_id} {rec.attempt} --steps)"
            ),
            soft_wrap=True,
        )


#: Lines of one text (a message, arguments, an output) ``--steps`` prints; the file has all.
STEP_LINES = 20


def _block(console: Console, title: str, text: str, style: str = "") -> None:
    lines = text.splitlines()
    console.print(_text(f"    {title}:", style or "dim"))
    for line in lines[:STEP_LINES]:
        console.print(_text("      " + line), soft_wrap=True)
    if len(lines) > STEP_LINES:
        console.print(_text(f"      ... {len(lines) - STEP_LINES} more lines"), style="dim")


def _print_step(console: Console, step: StepView) -> None:
    head = f"{step.number:>4} {step.source:<6} {step.headline}"
    tokens = f"  ({fmt.num(step.tokens)} tokens)" if step.tokens is not None else ""
    console.print(
        _text(head, "bold red" if step.failed else "bold"),
        _text("FAILED", "bold red") if step.failed else "",
        _text(tokens, "dim"),
        soft_wrap=True,
    )
    if step.reasoning:
        _block(console, "reasoning", step.reasoning)
    # A short one-line message without calls is the headline already.
    if step.message and (step.calls or step.message.strip() != step.headline):
        _block(console, "message", step.message)
    for call in step.calls:
        if call.name is not None:
            _block(console, f"{call.name} arguments", call.arguments)
        if call.output is not None:
            exit_code = f", exit {call.exit_code}" if call.exit_code is not None else ""
            what = "observation" if call.name is None else f"{call.name} output"
            label = f"{what}{exit_code}{', failed' if call.failed else ''}"
            _block(console, label, call.output, "red" if call.failed else "")
    if step.cut:
        console.print(_text("    (cut: trajectory.json holds the step whole)"), style="yellow")


def print_steps(view: RunView, task: TaskView, attempt: AttemptView) -> None:
    """An attempt's timeline: one line per step (failures in red), then its message, each
    tool call's arguments and output, bounded as on the page (:mod:`ksi.view.steps`)."""
    console = _console()
    rec = attempt.record
    traj = (
        load_trajectory_view(str(view.root), rec.attempt_dir)
        if attempt.link(TRAJECTORY_FILE)
        else None
    )
    console.print(
        _text(f"task {task.task_id}, attempt {attempt.label}:", "bold"),
        _text(attempt.verdict.label, _TONE_STYLE[attempt.verdict.tone]),
    )
    if traj is None:
        console.print(_text("no trajectory.json: the agent left no steps KSI could read"))
        return
    console.print(_text(f"file: {view.root / traj.file}"), soft_wrap=True)
    if traj.problem:
        console.print(_text(f"unreadable: {traj.problem}", "bold red"), soft_wrap=True)
        return
    model = f", model {traj.model}" if traj.model else ""
    console.print(
        _text(
            f"{traj.total_steps} steps, {traj.tool_calls} tool calls, "
            f"{traj.tool_errors} failed (agent {traj.agent}{model})"
        ),
        soft_wrap=True,
    )
    for note in traj.notes:
        console.print(_text(f"note: {note}"), style="dim", soft_wrap=True)
    for step in traj.steps:
        _print_step(console, step)


def print_forum(root: Path, threads: Sequence[ThreadView], task_id: str | None) -> None:
    """Each room's thread, round by round: every session (how it ended, its posts, the post
    files dropped and why), every post (kind, what it rests on, its text) and the notes made
    of it."""
    console = _console()
    if not threads:
        which = f"task {task_id}" if task_id is not None else "this run"
        console.print(
            _text(f"no forum for {which} (the run had no --forum-rounds, or it has not run yet)")
        )
        return
    for thread in threads:
        ended = f"; ended: {thread.ended}" if thread.ended else ""
        console.print(
            _text(
                f"generation {thread.generation}, {thread.label}: "
                f"{len(thread.room.seats)} participant(s), {len(thread.rounds)} round(s), "
                f"{thread.post_count} post(s){ended}",
                "bold",
            ),
            soft_wrap=True,
        )
        for seat in thread.room.seats:
            task = f"task {seat.task_id}, " if thread.room.task_id is None else ""
            console.print(
                _text(
                    f"  participant {seat.participant}: {task}{seat.attempt} "
                    f"(score {fmt.score(seat.score)})"
                ),
                soft_wrap=True,
            )
        for rnd in thread.rounds:
            console.print(_text(f"  round {rnd.round}", "bold"))
            for sv in rnd.sessions:
                s = sv.session
                console.print(
                    _text(
                        f"    participant {s.participant}: {s.agent_status or s.status}, "
                        f"{len(s.posts)} post(s), cost {fmt.money(s.usage.cost_usd)}"
                        + (f", session {root / s.session_dir}" if s.session_dir else "")
                    ),
                    soft_wrap=True,
                )
                for d in s.dropped:
                    console.print(
                        _text(f"      dropped {d.file}: {d.reason}", "yellow"), soft_wrap=True
                    )
                for pv in sv.posts:
                    p = pv.post
                    reply = f", replying to {p.reply_to}" if p.reply_to else ""
                    notes = f"; notes {', '.join(pv.notes)}" if pv.notes else ""
                    console.print(
                        _text(
                            f"      [{p.id}] {p.kind}, citing {', '.join(p.attempts)}{reply}"
                            f"{notes}",
                            "bold" if p.kind != "done" else "dim",
                        ),
                        soft_wrap=True,
                    )
                    for line in printable(p.text, multiline=True).splitlines()[:LOG_LINES]:
                        console.print(_text("        " + line), soft_wrap=True)
        if thread.record:
            console.print(_text(f"  the whole forum: {root / thread.record}"), style="dim")


def print_comparison(comparison: Comparison, *, show_all: bool) -> None:
    """Per-run totals, what differs in the configs, then one row per task (flipped first)."""
    # heavy (start-up): rich, only to print to a terminal
    from rich.table import Table

    console = _console()
    for col in comparison.runs:
        s = col.summary
        console.print(
            _text(
                f"{col.label}: solved {s.solved_tasks}/{s.n_tasks} ({s.solve_rate:.1%}), "
                f"mean best {fmt.score(s.mean_best_score)}, cost {fmt.money(s.total_cost_usd)}"
                f"  ({s.run_dir})"
            ),
            soft_wrap=True,
        )
    for key, values in comparison.differences.items():
        shown = " | ".join(f"{c.label}: {v}" for c, v in zip(comparison.runs, values, strict=True))
        console.print(_text(f"differs: {key}: {shown}"), soft_wrap=True)
    first, last = comparison.runs[0].label, comparison.runs[-1].label
    console.print(
        _text(
            f"flipped: {len(comparison.gained)} gained (solved in {last}, not in {first}), "
            f"{len(comparison.lost)} lost"
        ),
        style="bold",
    )
    table = Table(box=None)
    table.add_column("task", overflow="fold")
    for col in comparison.runs:
        table.add_column(_text(col.label), justify="right", overflow="fold")
    table.add_column("change", justify="right")
    table.add_column("what happened")
    rows = comparison.tasks if show_all else comparison.tasks[:COMPARE_ROWS]
    styles = {"gained": "green", "lost": "red", "better": "green", "worse": "red"}
    for t in rows:
        cells = [
            "not in run" if solved is None else fmt.score(score) + (" ok" if solved else "")
            for score, solved in zip(t.scores, t.solved, strict=True)
        ]
        table.add_row(
            _text(t.task_id),
            *cells,
            "-" if t.change is None else f"{t.change:+.2f}",
            _text(t.direction, styles.get(t.direction, "")),
        )
    console.print(table)
    hidden = len(comparison.tasks) - len(rows)
    if hidden:
        console.print(f"... {hidden} more tasks (--all lists every one, --json too)", style="dim")
