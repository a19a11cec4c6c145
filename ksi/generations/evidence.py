"""Evidence for a distiller, read off a generation's attempts: **scored ones only**.

This module is the one place that decides what a distiller may see, so the
rule the task spec states ("an unscored attempt is excluded from best-score
tracking, distillation, and forum context") holds for every distiller,
built-in or not: a record whose status is not ``scored`` never becomes
evidence, and neither does a hold-out task's attempt (hold-outs measure
transfer; learning from them would spoil the measurement).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ksi.attempt.evidence import DiffEvidence, diff_bytes_needed, diff_evidence
from ksi.fstree import open_file_inside
from ksi.knowledge.models import AttemptEvidence, TaskEvidence
from ksi.models import is_solved
from ksi.records import AttemptRecord, AttemptStatus
from ksi.rundir.journal import in_run, latest_by_attempt
from ksi.trajectories import TRAJECTORY_FILE, TrajectoryDigest, digest
from ksi.trajectories.writer import MAX_READ_BYTES, parse_trajectory


def scored(records: Iterable[AttemptRecord]) -> list[AttemptRecord]:
    """The records evidence may come from: the last try of each attempt, and scored.

    Regraded attempts count with their newest score; a try that was retried
    is superseded by its retry.
    """
    latest = latest_by_attempt(list(records))
    return [
        r
        for r in sorted(latest.values(), key=lambda r: (r.generation, r.attempt))
        if r.status == AttemptStatus.SCORED and r.score is not None
    ]


def _read_inside(run_dir: Path, rel: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the file ``rel`` of the run, reached through no symlink
    (b"" when there is none): the journal naming the attempt's directory is data."""
    if not rel:
        return b""
    try:
        fd = open_file_inside(run_dir, rel)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


def read_diff_evidence(run_dir: Path, attempt_dir: str, budget_bytes: int) -> DiffEvidence:
    """The pieces of an attempt's ``diff.patch`` its evidence holds, read from the file
    (for a record that came without them: see :mod:`ksi.attempt.evidence`)."""
    rel = f"{attempt_dir}/diff.patch" if attempt_dir else ""
    return diff_evidence(_read_inside(run_dir, rel, diff_bytes_needed(budget_bytes)), budget_bytes)


def trajectory_digest(run_dir: Path, attempt_dir: str, limit: int) -> TrajectoryDigest | None:
    """The digest of an attempt's ``trajectory.json`` within ``limit`` bytes; ``None``
    when it has none, or one KSI cannot read (the evidence goes on without it)."""
    rel = f"{attempt_dir}/{TRAJECTORY_FILE}" if attempt_dir else ""
    data = _read_inside(run_dir, rel, MAX_READ_BYTES + 1)
    if not data:
        return None
    try:
        return digest(parse_trajectory(data, TRAJECTORY_FILE), max_bytes=limit)
    except ValueError:
        return None


def _tail(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return "..." + data[-limit:].decode("utf-8", "replace")


def eval_output_tail(record: AttemptRecord, limit: int) -> str:
    """The end of the eval command's output (stdout, then stderr) as the record keeps it."""
    result = record.eval
    if result is None:
        return ""
    parts = [p.strip() for p in (result.stdout_tail, result.stderr_tail) if p and p.strip()]
    return _tail("\n".join(parts), limit)


def best_first(records: Iterable[AttemptRecord]) -> list[AttemptRecord]:
    """Scored records, the highest score first (ties: the earlier attempt)."""
    return sorted(records, key=lambda r: (-(r.score or 0.0), r.attempt))


def attempt_evidence(
    rec: AttemptRecord,
    run_dir: Path,
    *,
    solved_threshold: float,
    budget_bytes: int,
    eval_output: bool,
    with_diff: bool,
    with_trajectory: bool = True,
    diff: DiffEvidence | None = None,
) -> AttemptEvidence:
    """What one **scored** attempt showed, each piece cut to its share of the budget: the
    diff (``with_diff``) to half of it, an eval output tail, a final message or the
    digest of its trajectory (``with_trajectory``) to an eighth; ``eval_output=False``
    leaves eval output out. ``diff``: the pieces of its ``diff.patch`` its worker cut
    (the file is read when they are not given, or were cut for another budget)."""
    assert rec.score is not None, "evidence comes from scored attempts only"
    piece = max(64, budget_bytes // 8)
    score = float(rec.score)
    solved = is_solved(score, solved_threshold)
    inside = in_run(rec).attempt_dir
    if diff is None or diff.budget_bytes != budget_bytes:
        diff = read_diff_evidence(run_dir, inside, budget_bytes)
    return AttemptEvidence(
        attempt_id=rec.attempt_dir,
        generation=rec.generation,
        attempt=rec.attempt,
        score=score,
        solved=solved,
        final_message=_tail(rec.final_message.strip(), piece),
        eval_output=eval_output_tail(rec, piece) if eval_output and not solved else "",
        files_touched=diff.files_touched,
        diff=diff.diff if with_diff else "",
        trajectory=trajectory_digest(run_dir, inside, piece) if with_trajectory else None,
    )


def build_evidence(
    records: Sequence[AttemptRecord],
    *,
    generation: int,
    run_dir: Path,
    prompts: Mapping[str, str],
    holdouts: Iterable[str],
    solved_threshold: float,
    budget_bytes: int,
    eval_output: bool,
) -> tuple[TaskEvidence, ...]:
    """Evidence of generation ``generation`` per task, from scored, non-hold-out attempts.

    Each piece is cut to a share of the one budget (``budget_bytes``): a diff
    to half of it, an eval output tail, a final message or a trajectory's
    digest to an eighth.
    ``eval_output=False`` (``--knowledge-eval-output none``) leaves eval output
    out entirely, for tasks whose eval output would reveal hidden tests.
    """
    held = set(holdouts)
    usable = [r for r in scored(records) if r.task_id not in held and r.generation <= generation]
    history: dict[str, list[tuple[int, str, float]]] = defaultdict(list)
    current: dict[str, list[AttemptRecord]] = defaultdict(list)
    for rec in usable:
        assert rec.score is not None  # scored() keeps only scored records
        history[rec.task_id].append((rec.generation, rec.attempt_dir, rec.score))
        if rec.generation == generation:
            current[rec.task_id].append(rec)
    out = []
    for task_id in sorted(current):
        attempts = [
            attempt_evidence(
                rec,
                run_dir,
                solved_threshold=solved_threshold,
                budget_bytes=budget_bytes,
                eval_output=eval_output,
                with_diff=n == 0,
            )
            for n, rec in enumerate(best_first(current[task_id]))
        ]
        out.append(
            TaskEvidence(
                task_id=task_id,
                prompt=prompts.get(task_id, ""),
                attempts=tuple(attempts),
                score_history=tuple(history[task_id]),
            )
        )
    return tuple(out)
