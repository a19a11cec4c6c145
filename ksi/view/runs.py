"""Everything a view shows about a run, read from its run directory alone.

:func:`load_run_view` reuses the typed readers every command uses
(:func:`ksi.reporting.summary.summarize_run` for the journal and the figures,
:func:`ksi.rundir.run_state.load_run_state` for ``run.json``) and adds what
only a person looking at attempts needs: each attempt's prompt, diff, logs
and eval output as bounded excerpts, the reasons for its status, its earlier
tries, and links (relative to the run directory) to every file it wrote.

Size is bounded for the whole run, not per file: :data:`TEXT_BUDGET_BYTES`
of excerpts at most, shared out by :func:`fair_limit` so a run of a few
attempts shows long excerpts and a run of 10,000 shows short ones, and the
report stays a file a browser opens.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from ksi.errors import UserInputError
from ksi.fstree import open_dir_inside
from ksi.layout import RunLayout
from ksi.records import AttemptRecord, GenerationsSummary, RunSummary, TaskSummary
from ksi.reporting.summary import summarize_run
from ksi.rundir.journal import in_run
from ksi.rundir.run_state import RunState, load_run_state
from ksi.trajectories import TRAJECTORY_FILE
from ksi.view.diffs import DiffLine, FileChange, classify, file_changes
from ksi.view.excerpt import MISSING, Excerpt, read_excerpt_inside, text_excerpt
from ksi.view.forum import ThreadView, load_forum
from ksi.view.generations import notes_files
from ksi.view.steps import TRAJECTORY_BUDGET_BYTES, TrajectoryView, load_trajectory_view
from ksi.view.verdict import TaskState, Verdict, attempt_facts, task_state, verdict

#: Bytes of excerpts (prompts, diffs, logs, eval output) one run's view holds at most.
TEXT_BUDGET_BYTES = 12 * 1024 * 1024
#: The most of each piece an attempt shows when the budget allows.
PIECE_CAPS: dict[str, int] = {
    "prompt": 16 * 1024,
    "diff": 64 * 1024,
    "agent_stdout": 16 * 1024,
    "agent_stderr": 16 * 1024,
    "eval_stdout": 8 * 1024,
    "eval_stderr": 8 * 1024,
}
#: The files of an attempt directory each piece is read from (eval output comes from the record).
PIECE_FILES = {
    "prompt": "prompt.md",
    "diff": "diff.patch",
    "agent_stdout": "agent.stdout.log",
    "agent_stderr": "agent.stderr.log",
}


def fair_limit(sizes: Sequence[int], budget: int) -> int:
    """The largest per-piece limit ``L`` with ``sum(min(size, L)) <= budget``.

    Water-filling: small pieces are shown whole, and what is left is shared
    equally by the large ones. Returns a limit at least as large as every
    size when everything fits.
    """
    if sum(sizes) <= budget:
        return max(sizes, default=0)
    remaining = budget
    ordered = sorted(sizes)
    for i, size in enumerate(ordered):
        share = remaining // (len(ordered) - i)
        if size > share:
            return share
        remaining -= size
    return ordered[-1]  # not reached: the sizes did not fit


@attrs.frozen
class AttemptView:
    """One attempt (its latest try) as a person reads it."""

    record: AttemptRecord
    verdict: Verdict
    #: ``None`` when it is the task's prompt (shown once with the task).
    prompt: Excerpt | None
    diff: Excerpt
    diff_lines: tuple[DiffLine, ...]
    files_changed: tuple[FileChange, ...]
    agent_stdout: Excerpt
    agent_stderr: Excerpt
    eval_stdout: Excerpt
    eval_stderr: Excerpt
    #: The attempt directory's files (``record.json``, logs, ``eval/eval.stdout.log``...):
    #: name within the attempt directory -> path relative to the run directory.
    files: dict[str, str]
    #: Earlier tries of this attempt (retries, or the record a regrade replaced), oldest first.
    earlier: tuple[tuple[AttemptRecord, Verdict], ...] = ()
    #: Run-relative path of the ``KNOWLEDGE.md`` its notes came from (None: no notes, or gone).
    notes_link: str | None = None
    #: Its steps from ``trajectory.json`` (None: the attempt left none, or none was asked for).
    trajectory: TrajectoryView | None = None

    @property
    def label(self) -> str:
        """``1``, or ``1 (retry 2)``."""
        r = self.record
        return f"{r.attempt}" + (f" (retry {r.try_number})" if r.try_number else "")

    @property
    def facts(self) -> list[tuple[str, str]]:
        return attempt_facts(self.record)

    def link(self, name: str) -> str | None:
        """The run-relative path of the attempt's file ``name`` when it exists."""
        return self.files.get(name)


@attrs.frozen
class TaskView:
    summary: TaskSummary
    state: TaskState
    prompt: Excerpt
    attempts: tuple[AttemptView, ...]
    #: The generation whose attempt first reached the best score (None without a score).
    best_generation: int | None = None

    @property
    def task_id(self) -> str:
        return self.summary.task_id


@attrs.frozen
class RunView:
    root: Path
    state: RunState
    summary: RunSummary
    tasks: tuple[TaskView, ...]
    #: Components as the records name them (the config may leave them to the task source).
    components: dict[str, str]
    #: Generation -> run-relative path of the notes it distilled (``knowledge/<g>/KNOWLEDGE.md``).
    notes: dict[int, str] = attrs.field(factory=dict)
    #: The forum's rooms (``--forum-rounds``), every generation's, the cross-task room last.
    forum: tuple[ThreadView, ...] = ()

    def threads(self, task_id: str | None) -> tuple[ThreadView, ...]:
        """The rooms of a task's forum (``None``: the cross-task rooms), oldest first."""
        return tuple(t for t in self.forum if t.room.task_id == task_id)

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def settings(self) -> dict[str, Any]:
        """The run's configuration as ``run.json`` holds it (the page lists it)."""
        return attrs.asdict(self.state.config)

    @property
    def generations(self) -> GenerationsSummary | None:
        """The run's per-generation figures (``summary.generations``: one computation)."""
        return self.summary.generations

    @property
    def show_generations(self) -> bool:
        return self.generations is not None and bool(self.generations.generations)

    def task(self, task_id: str) -> TaskView:
        for task in self.tasks:
            if task.task_id == task_id:
                return task
        known = ", ".join(repr(t.task_id) for t in self.tasks[:20])
        more = " ..." if len(self.tasks) > 20 else ""
        raise UserInputError(
            f"{self.root}: no task {task_id!r} in this run (its tasks: {known}{more})"
        )


#: An attempt directory's files: name within it -> (path relative to the run, size in bytes).
Listing = dict[str, tuple[str, int]]


def _listing(root: str, attempt_dir: str) -> Listing:
    """The files of an attempt directory and of its ``eval/`` (one ``scandir`` each).

    Both directories are reached from the run directory through no symlink
    (:func:`ksi.fstree.open_dir_inside`), and only regular files are listed,
    so nothing outside the run is ever listed, linked or read.
    """
    found: Listing = {}
    for sub in ("", "eval/"):
        try:
            fd = open_dir_inside(root, f"{attempt_dir}/{sub}")
        except OSError:
            continue
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        rel = f"{attempt_dir}/{sub}{entry.name}"
                        found[sub + entry.name] = (rel, entry.stat(follow_symlinks=False).st_size)
        except OSError:
            continue
        finally:
            os.close(fd)
    return dict(sorted(found.items()))


def _piece_sizes(rec: AttemptRecord, files: Listing, with_prompt: bool) -> list[int]:
    sizes = []
    for piece, name in PIECE_FILES.items():
        if piece == "prompt" and not with_prompt:
            continue
        sizes.append(min(files[name][1] if name in files else 0, PIECE_CAPS[piece]))
    if rec.eval is not None:
        sizes.append(min(len(rec.eval.stdout_tail.encode()), PIECE_CAPS["eval_stdout"]))
        sizes.append(min(len(rec.eval.stderr_tail.encode()), PIECE_CAPS["eval_stderr"]))
    return sizes


def _read(root: str, files: Listing, piece: str, limit: int) -> Excerpt:
    name = PIECE_FILES[piece]
    if name not in files:
        return MISSING
    end: Literal["head", "tail"] = "head" if piece in ("prompt", "diff") else "tail"
    return read_excerpt_inside(root, files[name][0], min(limit, PIECE_CAPS[piece]), end=end)


def _attempt_view(
    root: str,
    rec: AttemptRecord,
    files: Listing,
    earlier: list[AttemptRecord],
    threshold: float,
    limit: int,
    task_prompt: Excerpt | None,
    notes: dict[int, str],
    read_steps: bool,
    steps_share: int | None,
) -> AttemptView:
    prompt = _read(root, files, "prompt", limit)
    diff = _read(root, files, "diff", limit)
    lines = tuple(classify(diff.text))
    ev = rec.eval
    return AttemptView(
        record=rec,
        verdict=verdict(rec, threshold),
        prompt=None if task_prompt is not None and prompt.text == task_prompt.text else prompt,
        diff=diff,
        diff_lines=lines,
        files_changed=tuple(file_changes(lines)),
        agent_stdout=_read(root, files, "agent_stdout", limit),
        agent_stderr=_read(root, files, "agent_stderr", limit),
        eval_stdout=text_excerpt(
            ev.stdout_tail if ev else "", min(limit, PIECE_CAPS["eval_stdout"]), end="tail"
        ),
        eval_stderr=text_excerpt(
            ev.stderr_tail if ev else "", min(limit, PIECE_CAPS["eval_stderr"]), end="tail"
        ),
        files={name: rel for name, (rel, _) in files.items()},
        earlier=tuple((r, verdict(r, threshold)) for r in earlier),
        notes_link=notes.get(rec.knowledge.generation) if rec.knowledge is not None else None,
        trajectory=load_trajectory_view(root, rec.attempt_dir, steps_share)
        if read_steps and TRAJECTORY_FILE in files
        else None,
    )


def load_run_view(
    run_dir: Path,
    *,
    task_ids: Sequence[str] | None = None,
    budget: int = TEXT_BUDGET_BYTES,
    solved_threshold: float | None = None,
    steps_budget: int | None = TRAJECTORY_BUDGET_BYTES,
) -> RunView:
    """The view of a run directory (of only ``task_ids`` when given).

    Each attempt's steps are read from its ``trajectory.json`` within a share of
    ``steps_budget`` (:mod:`ksi.view.steps`); ``None`` reads none.

    Raises :class:`~ksi.errors.UserInputError` for a directory that is not a
    run (no ``run.json``) or a task id the run does not have.
    """
    layout = RunLayout(Path(run_dir).resolve())
    root = layout.root
    if not root.is_dir():
        raise UserInputError(f"{run_dir}: no such run directory")
    state = load_run_state(layout)
    summary = summarize_run(root, solved_threshold=solved_threshold)
    threshold = summary.solved_threshold
    wanted = set(task_ids) if task_ids is not None else None
    if wanted is not None:
        missing = [t for t in task_ids or () if t not in state.task_ids]
        if missing:
            known = ", ".join(repr(t) for t in state.task_ids[:20])
            raise UserInputError(
                f"{run_dir}: no task {missing[0]!r} in this run (its tasks: {known}"
                f"{' ...' if len(state.task_ids) > 20 else ''})"
            )

    # Every try of every attempt, oldest first; the last one per attempt is the one that counts.
    tries: dict[tuple[str, int], list[AttemptRecord]] = defaultdict(list)
    for rec in summary.records:
        if wanted is None or rec.task_id in wanted:
            tries[(rec.task_id, rec.attempt)].append(in_run(rec))
    by_task: dict[str, list[list[AttemptRecord]]] = defaultdict(list)
    for (task_id, _), recs in sorted(tries.items(), key=lambda kv: kv[0][1]):
        by_task[task_id].append(recs)

    where = str(root)
    notes = notes_files(root)
    best_gen = (
        {t.task_id: t.best_generation for t in summary.generations.tasks}
        if summary.generations is not None
        else {}
    )
    listings: dict[str, Listing] = {}
    sizes: list[int] = []
    trajectory_sizes: list[int] = []
    for attempts in by_task.values():
        for i, recs in enumerate(attempts):
            rec = recs[-1]
            files = _listing(where, rec.attempt_dir) if rec.attempt_dir else {}
            listings[rec.attempt_dir] = files
            sizes.extend(_piece_sizes(rec, files, with_prompt=i == 0))
            if TRAJECTORY_FILE in files:
                trajectory_sizes.append(files[TRAJECTORY_FILE][1])
    limit = fair_limit(sizes, budget)
    # Everything fits: every step of every attempt, each text within its cap (share None).
    steps_share = (
        None
        if steps_budget is None or sum(trajectory_sizes) <= steps_budget
        else fair_limit(trajectory_sizes, steps_budget)
    )
    read_steps = steps_budget is not None

    tasks: list[TaskView] = []
    for task_summary in summary.tasks:
        if wanted is not None and task_summary.task_id not in wanted:
            continue
        attempts = by_task.get(task_summary.task_id, [])
        first = listings[attempts[0][-1].attempt_dir] if attempts else {}
        prompt = _read(where, first, "prompt", limit)
        views = tuple(
            _attempt_view(
                where,
                recs[-1],
                listings[recs[-1].attempt_dir],
                recs[:-1],
                threshold,
                limit,
                prompt,
                notes,
                read_steps,
                steps_share,
            )
            for recs in attempts
        )
        tasks.append(
            TaskView(
                summary=task_summary,
                state=task_state(task_summary),
                prompt=prompt,
                attempts=views,
                best_generation=best_gen.get(task_summary.task_id),
            )
        )
    return RunView(
        root=root,
        state=state,
        summary=summary,
        tasks=tuple(tasks),
        components=_components(state, summary.records),
        notes=notes,
        forum=load_forum(root, task_ids),
    )


def _components(state: RunState, records: Sequence[AttemptRecord]) -> dict[str, str]:
    """Agent, model, environment, evaluator, executor: the config's, else the records'."""
    config = state.config
    first = records[0] if records else None
    found: dict[str, str] = {}
    for key in ("agent", "model", "environment", "evaluator", "executor"):
        value = getattr(config, key)
        if not value and first is not None:
            value = getattr(first, key, None)
        if value:
            found[key] = str(value)
    return found
