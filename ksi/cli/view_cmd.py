"""``ksi view`` (the HTML report), ``ksi show`` and ``ksi compare`` (the terminal views).

All three read run directories only (``ksi.view``); none writes to a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ksi.cli.common import echo_json
from ksi.errors import UserInputError

#: Bytes of steps ``ksi show RUN TASK`` reads per task: it prints only their counts.
TASK_STEPS_BUDGET = 1024 * 1024

ThresholdOption = Annotated[float | None, typer.Option(help="Override the runs' solved threshold.")]


def _default_output(runs: list[Path]) -> Path:
    """One run: ``<run>/report.html`` (links stay valid when the run moves); several: cwd."""
    return runs[0] / "report.html" if len(runs) == 1 else Path("compare.html")


def view_command(
    runs: Annotated[
        list[Path], typer.Argument(metavar="RUNS...", help="One or more run directories.")
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Where to write the HTML file (default: RUN/report.html for one run, "
            "compare.html here for several).",
        ),
    ] = None,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the report in a web browser.")
    ] = False,
    solved_threshold: ThresholdOption = None,
) -> None:
    """Write one self-contained HTML report of a run, or a comparison of several runs.

    The page needs no server and no network (open it from disk or keep it as a CI
    artifact): the overview, a sortable and filterable task table, every attempt's
    prompt, diff, eval output and logs, per-generation figures, and with several runs
    each task's score in each run, flipped tasks first. Needs Jinja2: pip install
    'ksi[view]'.
    """
    # start-up: not needed for `ksi view --help`
    from ksi.layout import refuse_own_file
    from ksi.view.html import write_report
    from ksi.view.runs import load_run_view

    target = output if output is not None else _default_output(runs)
    if target.is_dir():
        raise UserInputError(f"--output {target}: is a directory; name the HTML file to write")
    refuse_own_file(target, "--output", runs)
    views = [load_run_view(run, solved_threshold=solved_threshold) for run in runs]
    written = write_report(views, target)
    size = written.stat().st_size
    typer.echo(f"wrote {written} ({size / 1024:.0f} KB)")
    uri = written.resolve().as_uri()
    if open_browser:
        # start-up: not needed for `ksi view --help`
        import webbrowser

        if not webbrowser.open(uri):
            typer.echo(f"warning: no browser could be started; open {uri}", err=True)
    else:
        typer.echo(f"open it in a browser: {uri}")


def show_command(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory.")],
    task: Annotated[
        str | None, typer.Argument(metavar="TASK", help="A task id: its attempts.")
    ] = None,
    attempt: Annotated[
        int | None, typer.Argument(metavar="ATTEMPT", help="An attempt number: all of it.")
    ] = None,
    solved_threshold: ThresholdOption = None,
    steps: Annotated[
        bool,
        typer.Option(
            "--steps",
            help="With TASK ATTEMPT: print the attempt's steps (trajectory.json) instead: "
            "each tool call with its arguments and output, failures marked.",
        ),
    ] = False,
    forum: Annotated[
        bool,
        typer.Option(
            "--forum",
            help="The forum's threads (--forum-rounds): of TASK (its room and the cross-task "
            "room), or every room: who posted what, in which round, citing which attempts, "
            "and the notes made of each post.",
        ),
    ] = False,
) -> None:
    """Show a run, one of its tasks, or one attempt (status and why, diff, eval output, logs).

    ksi show RUN prints the summary; ksi show RUN TASK lists the task's attempts with why
    each ended as it did, with their steps and tool errors; ksi show RUN TASK ATTEMPT shows
    that attempt in full (long logs are cut, with the path of the whole file), and with
    --steps its timeline of steps; ksi show RUN [TASK] --forum prints the forum's threads.
    """
    # start-up: not needed for `ksi view --help`
    from ksi.cli.show_view import print_attempt, print_forum, print_run, print_steps, print_task
    from ksi.view.forum import load_forum
    from ksi.view.runs import load_run_view

    if forum:
        if attempt is not None:
            raise UserInputError("--forum shows a task's threads: give RUN [TASK], no ATTEMPT")
        # Checks the run and the task id (no attempt is read: no task, or only this one).
        view = load_run_view(run, task_ids=[] if task is None else [task])
        print_forum(view.root, load_forum(view.root, None if task is None else [task]), task)
        return
    if steps and attempt is None:
        raise UserInputError("--steps shows one attempt's steps: name it (ksi show RUN TASK N)")
    if task is None:
        print_run(load_run_view(run, task_ids=[], solved_threshold=solved_threshold))
        return
    view = load_run_view(
        run,
        task_ids=[task],
        solved_threshold=solved_threshold,
        steps_budget=None if steps else TASK_STEPS_BUDGET,
    )
    task_view = view.task(task)
    if attempt is None:
        print_task(view, task_view)
        return
    for item in task_view.attempts:
        if item.record.attempt == attempt:
            if steps:
                print_steps(view, task_view, item)
            else:
                print_attempt(view, task_view, item)
            return
    numbers = ", ".join(str(a.record.attempt) for a in task_view.attempts) or "none finished"
    raise UserInputError(f"{run}: task {task!r} has no attempt {attempt} (its attempts: {numbers})")


def compare_command(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUNS...", help="Two or more run directories; the first is the baseline."
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    show_all: Annotated[
        bool, typer.Option("--all", help="List every task (default: the first 50 rows).")
    ] = False,
    solved_threshold: ThresholdOption = None,
) -> None:
    """Compare runs task by task: best score in each, the change, flipped tasks first."""
    # start-up: not needed for `ksi view --help`
    from ksi.layout import RunLayout
    from ksi.reporting.summary import summarize_run
    from ksi.rundir.run_state import load_run_state
    from ksi.serialization import to_data
    from ksi.view.compare import compare_runs, run_labels

    if len(runs) < 2:
        raise UserInputError("ksi compare needs at least two run directories (RUN_A RUN_B)")
    for run in runs:
        if not run.is_dir():
            raise UserInputError(f"{run}: no such run directory")
    summaries = [summarize_run(run, solved_threshold=solved_threshold) for run in runs]
    states = [load_run_state(RunLayout(run.resolve())) for run in runs]
    labels = run_labels([run.resolve().name for run in runs])
    comparison = compare_runs(list(zip(labels, summaries, states, strict=True)))
    if as_json:
        data = to_data(comparison)
        data["gained"] = list(comparison.gained)
        data["lost"] = list(comparison.lost)
        echo_json(data)
        return
    # start-up: not needed for `ksi view --help`
    from ksi.cli.show_view import print_comparison

    print_comparison(comparison, show_all=show_all)


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)
    app.command("show")(show_command)
    app.command("compare")(compare_command)


__all__ = ["register"]
