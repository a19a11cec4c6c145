"""``ksi export trajectories``: a run's trajectories as plain files, for training or analysis.

One ATIF file per attempt (its latest try: a retry or a regrade replaces
the earlier ones, as everywhere else), named ``<task>/<attempt>.json`` with
the task's directory name (:func:`ksi.layout.task_dirname`, safe on any
filesystem), and ``index.jsonl``: one line per file with what a training or
analysis script selects on (task, attempt, generation, status, score,
solved, steps, tool calls and errors) and the file's path relative to the
index. The files are the attempts' own ``trajectory.json``, byte for byte;
one that is not a trajectory KSI can read is left out and reported, as are
attempts without one.

The run directory is read only inside itself, as the viewer reads it
(:func:`ksi.fstree.open_file_inside`); nothing is written to it.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from ksi.fileops import write_text_atomic
from ksi.layout import RunLayout, refuse_own_file, task_dirname
from ksi.reporting.summary import summarize_run
from ksi.rundir.journal import in_run, latest_by_attempt
from ksi.rundir.run_state import load_run_state
from ksi.serialization import dumps_line
from ksi.trajectories import TRAJECTORY_FILE
from ksi.trajectories.writer import parse_trajectory
from ksi.view.steps import trajectory_bytes

#: The index beside the exported files.
INDEX_FILE = "index.jsonl"


@attrs.frozen
class IndexEntry:
    """One line of ``index.jsonl``: an exported trajectory and what its attempt came to."""

    #: The file, relative to the index (``<task>/<attempt>.json``).
    file: str
    run_id: str
    task_id: str
    attempt: int
    try_number: int
    generation: int
    status: str
    score: float | None
    #: Whether the score reached the run's solved threshold (``None``: unscored).
    solved: bool | None
    agent: str
    model: str | None
    steps: int
    tool_calls: int
    tool_errors: int


@attrs.frozen
class Export:
    """What an export wrote, and what it could not."""

    out_dir: Path
    entries: tuple[IndexEntry, ...]
    #: ``task/attempt`` of attempts that left no ``trajectory.json``.
    missing: tuple[str, ...] = ()
    #: ``task/attempt: why`` of files that are not trajectories KSI can read.
    unreadable: tuple[str, ...] = ()


def export_trajectories(run_dir: Path, out_dir: Path) -> Export:
    """Write the run's trajectories and their index into ``out_dir`` (see the module docstring).

    Every path is checked before anything is written: none may be a run
    directory's own file (:func:`ksi.layout.refuse_own_file`), so exporting
    into the run directory itself cannot overwrite its journal or attempts.
    """
    layout = RunLayout(Path(run_dir).resolve())
    state = load_run_state(layout)
    summary = summarize_run(layout.root)
    latest = latest_by_attempt(list(summary.records))
    root = str(layout.root)
    refuse_own_file(out_dir, "--output", [layout.root])
    refuse_own_file(out_dir / INDEX_FILE, "--output", [layout.root])

    targets = {
        key: f"{task_dirname(rec.task_id)}/{rec.attempt}.json"
        for key, rec in latest.items()
        if rec.attempt_dir
    }
    for rel in targets.values():
        refuse_own_file(out_dir / rel, "--output", [layout.root])

    entries: list[IndexEntry] = []
    missing: list[str] = []
    unreadable: list[str] = []
    for key in sorted(latest):
        rec = in_run(latest[key])
        label = f"{rec.task_id}/{rec.attempt}"
        try:
            data = trajectory_bytes(root, rec.attempt_dir) if rec.attempt_dir else None
            if data is None:
                missing.append(label)
                continue
            traj = parse_trajectory(data, TRAJECTORY_FILE)
        except ValueError as exc:
            unreadable.append(f"{label}: {exc}")
            continue
        entry = IndexEntry(
            file=targets[key],
            run_id=state.run_id,
            task_id=rec.task_id,
            attempt=rec.attempt,
            try_number=rec.try_number,
            generation=rec.generation,
            status=str(rec.status),
            score=rec.score,
            solved=None if rec.score is None else rec.score >= summary.solved_threshold,
            agent=rec.agent,
            model=traj.model or rec.model,
            steps=len(traj.steps),
            tool_calls=traj.call_count,
            tool_errors=traj.failure_count,
        )
        write_text_atomic(out_dir / entry.file, data.decode("utf-8", "replace"), durable=False)
        entries.append(entry)
    index = "".join(dumps_line(e) + "\n" for e in entries)
    write_text_atomic(out_dir / INDEX_FILE, index, durable=False)
    return Export(out_dir, tuple(entries), tuple(missing), tuple(unreadable))
