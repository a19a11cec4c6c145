"""Grading a finished run again from its captured repos (``ksi regrade``).

Each attempt's ``captured/repo`` is copied and graded afresh; the new record
is appended to the journal (marked ``regraded_at``) and supersedes the old
one in every summary, while the old one stays for the record.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi.attempt.capture import copy_tree
from ksi.attempt.components import component_name, resolve, resolve_host_evaluator
from ksi.attempt.safety import configure_host_grading, decide_eval_isolation
from ksi.errors import UserInputError
from ksi.fstree import open_dir_inside
from ksi.interfaces import Evaluator
from ksi.kinds import ENVIRONMENT
from ksi.layout import RunLayout
from ksi.models import TaskSpec
from ksi.records import AttemptRecord, AttemptStatus, RunSummary, Timings, now
from ksi.reporting.summary import summarize_run
from ksi.rundir.journal import Journal, in_run, latest_by_attempt, read_records
from ksi.rundir.run_state import load_run_state
from ksi.tasks.loaders import get_task_source
from ksi.tasks.selection import TaskSelection


def regrade_run(
    run_dir: Path,
    *,
    evaluator: str | None = None,
    evaluator_options: Mapping[str, Any] | None = None,
    eval_env: Sequence[str] | None = None,
    eval_isolation: str | None = None,
    selection: TaskSelection | None = None,
) -> RunSummary:
    """Grade every attempt of ``run_dir`` again (of the tasks ``selection`` keeps);
    ``eval_env``/``eval_isolation`` default to the run's own (``auto`` isolates when
    the run's agent ran isolated)."""
    layout = RunLayout(Path(run_dir).resolve())
    state = load_run_state(layout)
    config = state.config
    wanted = set((selection or TaskSelection()).select_ids(state.task_ids, where=str(run_dir)))
    tasks_path = config.tasks_path
    if not tasks_path:
        raise UserInputError(
            f"{run_dir}: the run was started from Python with in-memory tasks; "
            "regrade needs a tasks file"
        )
    # The source as the run built it: a plugin source's options may decide the task ids.
    source = get_task_source(config.task_source, config.task_source_options)
    tasks = {t.id: t for t in source.load(Path(tasks_path))}
    name = evaluator or config.evaluator or source.default_evaluator
    # The run's evaluator options belong to the run's evaluator, not to another one.
    same = evaluator is None or evaluator == config.evaluator
    stored_options = config.evaluator_options if same else None
    grader, _ = resolve_host_evaluator(
        name,
        evaluator_options or stored_options,
        refusal="grades inside the attempt's environment, which no longer exists; regrade "
        "works with host evaluators only",
    )
    # The run's environment, as the run built it: whether it isolated the agent decides `auto`.
    environment, _ = resolve(ENVIRONMENT, config.environment, config.environment_options)
    isolation = decide_eval_isolation(eval_isolation or config.eval_isolation, environment)
    names = eval_env if eval_env is not None else config.eval_env
    grader = configure_host_grading(grader, isolation=isolation, pass_env=names)
    # A run still going would append to the same journal while we read it.
    skipped: list[str] = []
    gone: dict[str, int] = {}
    regraded = 0
    with layout.lock_exclusive():
        journal = Journal(layout.journal)
        try:
            for rec in latest_by_attempt(read_records(layout.journal)).values():
                if rec.task_id not in wanted:
                    continue
                task = tasks.get(rec.task_id)
                if task is None:
                    gone[rec.task_id] = gone.get(rec.task_id, 0) + 1
                    continue
                gradable, why_not = _captured_inside(layout.root, rec)
                if why_not:
                    skipped.append(
                        f"task {rec.task_id} attempt {rec.attempt} not regraded: {why_not}"
                    )
                if not gradable:
                    continue
                attempt_dir = layout.root / rec.attempt_dir
                captured = attempt_dir / "captured" / "repo"
                journal.append(_regrade_one(rec, task, captured, grader, attempt_dir))
                regraded += 1
        finally:
            journal.close()
    summary = summarize_run(layout.root)
    if skipped:
        skipped.append(
            f"ksi regrade: {regraded} attempt(s) regraded, {len(skipped)} not (above): their "
            "directory is outside the run or reached through a symlink, and a run directory "
            "from elsewhere must not have other files graded; restore the attempt directories"
        )
    if gone:
        skipped.append(_missing_tasks_warning(gone, tasks_path))
    return attrs.evolve(summary, warnings=(*summary.warnings, *skipped))


MAX_TASKS_NAMED = 10


def _missing_tasks_warning(gone: Mapping[str, int], tasks_path: str) -> str:
    """The attempts left as they were because their task is no longer in the tasks file
    (removed, renamed, or another file at that path): fewer regraded attempts than the run
    has must never pass unsaid."""
    ids = sorted(gone)
    named = ", ".join(ids[:MAX_TASKS_NAMED])
    more = f" and {len(ids) - MAX_TASKS_NAMED} more" if len(ids) > MAX_TASKS_NAMED else ""
    return (
        f"ksi regrade: {sum(gone.values())} attempt(s) of {len(ids)} task(s) not regraded: "
        f"their task is no longer in {tasks_path}: {named}{more}; they keep their old "
        "records (restore the tasks in the file to regrade them)"
    )


def _captured_inside(root: Path, rec: AttemptRecord) -> tuple[bool, str]:
    """Whether the attempt's captured repo is a directory of the run reached through no
    symlink, and if it is elsewhere, why (a journal naming another directory would have
    it graded, and its grading logs written there). An attempt that captured nothing
    (its directory has no ``captured/repo``) is not regraded, and that is no news."""
    if not rec.attempt_dir:
        return False, ""
    if not in_run(rec).attempt_dir:
        return False, f"its journal record names {rec.attempt_dir!r}, outside the run directory"
    where = f"{rec.attempt_dir}/captured/repo"
    try:
        os.close(open_dir_inside(root, where))
    except FileNotFoundError:
        return False, ""
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            return False, f"{where} is reached through a symlink (or a file stands in its way)"
        return False, f"{where}: {exc.strerror}"
    return True, ""


def _regrade_one(
    rec: AttemptRecord, task: TaskSpec, captured: Path, grader: Evaluator, attempt_dir: Path
) -> AttemptRecord:
    with tempfile.TemporaryDirectory(prefix="ksi-regrade-") as tmp:
        workdir = Path(tmp) / "repo"
        copy_tree(captured, workdir)
        result = grader.grade(task, workdir, log_dir=attempt_dir / "regrade")
    status: AttemptStatus
    if rec.status == AttemptStatus.AGENT_ERROR:
        status, score = rec.status, None
    elif result.native_score is None:
        status, score = AttemptStatus.UNSCORED, None
    else:
        status, score = AttemptStatus.SCORED, result.native_score
    return attrs.evolve(
        rec,
        status=status,
        score=score,
        evaluator=component_name(grader),
        eval=result,
        timings=attrs.evolve(rec.timings, eval=result.duration_sec) if rec.timings else Timings(),
        regraded_at=now(),
        # A scored attempt is never retried.
        retryable=rec.retryable and status != AttemptStatus.SCORED,
    )
