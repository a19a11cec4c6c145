"""What in a run needs the user's eyes: failing tasks, files capture changed, idle attempts.

A summary's totals say *that* something went wrong ("error attempts: 3");
these say *what*, from the same journal records, so nobody has to read
``journal.jsonl`` to learn that an evaluator raised on every attempt or that
capture dropped the file that held the answer:

* :func:`failing_tasks`: per unsolved task, how each attempt's agent ended
  (status, exit code, first line of its error), why grading failed, and the
  attempt directory to open;
* :func:`capture_changes`: every file capture dropped or restored (test
  files, ``score.json``), per attempt;
* :func:`unchanged_attempts`: attempts whose graded repo/ equals the task's
  starting files (the agent worked somewhere else, or did nothing);
* :func:`suspect_scores`: attempts given full marks by a ``score.json`` while
  their eval command failed (the agent's code may have written it).

Plain values, no printing: the CLI's summary view, ``ksi check`` and the JSON
report all read them.
"""

from __future__ import annotations

import os

import attrs

from ksi.models import EvalStatus
from ksi.records import AttemptRecord, AttemptStatus, RunSummary, SkippedFile
from ksi.reporting.summary import has_score_conflict
from ksi.rundir.journal import latest_by_attempt

#: Skip kinds that are capture's anti-tamper rules at work (not noise, not limits).
CAPTURE_RULE_KINDS = frozenset({"test_created", "test_restored", "score_json"})
#: Agents whose attempts are expected to leave repo/ untouched.
IDLE_AGENTS = frozenset({"nop", "noop"})


def first_line(text: str, limit: int = 200) -> str:
    """The first non-empty line of ``text``, at most ``limit`` characters."""
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def _last_line(text: str, limit: int = 200) -> str:
    """The last non-empty line (where a traceback or an assertion says what failed)."""
    return first_line("\n".join(reversed(text.splitlines())), limit)


@attrs.frozen
class AttemptFailure:
    """One attempt of a failing task, in the words a user needs."""

    task_id: str
    attempt: int
    #: The attempt's status (``scored``, ``unscored``, ``agent_error``, ``error``).
    status: str
    score: float | None
    #: How the agent ended: ``crashed, exit code 3: exited with code 3; stderr ...``.
    agent: str
    #: Why grading failed (or what it found): ``eval exited 1: AssertionError``.
    grading: str
    #: The attempt's directory (absolute), to open.
    path: str


@attrs.frozen
class TaskFailure:
    task_id: str
    best_score: float | None
    attempts: tuple[AttemptFailure, ...]


def describe_agent(record: AttemptRecord) -> str:
    """How the agent ended: its status, exit code, and the first line of its error."""
    parts = [record.agent_status or "did not run"]
    if record.agent_timed_out:
        parts.append("timed out")
    elif record.agent_exit_code is not None:
        parts.append(f"exit code {record.agent_exit_code}")
    text = ", ".join(parts)
    if record.status == AttemptStatus.ERROR:
        return text  # the error is KSI's, told as the grading's reason
    error = first_line(record.error)
    return f"{text}: {error}" if error else text


def describe_grading(record: AttemptRecord) -> str:
    """Why grading failed, or what it concluded."""
    if record.status == AttemptStatus.ERROR:
        return f"not graded: {first_line(record.error) or 'KSI failed on this attempt'}"
    if record.status == AttemptStatus.AGENT_ERROR:
        return "not graded: the agent never worked on the task"
    result = record.eval
    if result is None:
        return "not graded"
    if result.status == EvalStatus.NO_EVAL:
        return "not graded: the task has no eval command (unscored task)"
    head = f"{result.status}"
    if result.native_score is not None:
        head += f" {result.native_score:.2f}"
        if result.details.get("score_source") == "score.json":
            head += " from score.json"
    if result.exit_code is not None:
        head += f", eval exited {result.exit_code}"
    why = _last_line(result.stderr_tail) or _last_line(result.stdout_tail)
    if not why and result.notes:
        why = first_line(result.notes[0])
    return f"{head}: {why}" if why else head


def failing_tasks(summary: RunSummary) -> tuple[TaskFailure, ...]:
    """Every unsolved task with its latest attempts, described (in task order)."""
    latest: dict[str, list[AttemptRecord]] = {}
    for record in _latest(summary):
        latest.setdefault(record.task_id, []).append(record)
    out = []
    for task in summary.tasks:
        records = latest.get(task.task_id, [])
        if task.solved or not records:
            continue
        out.append(
            TaskFailure(
                task.task_id,
                task.best_score,
                tuple(_failure(summary.run_dir, r) for r in records),
            )
        )
    return tuple(out)


def _failure(run_dir: str, record: AttemptRecord) -> AttemptFailure:
    return AttemptFailure(
        task_id=record.task_id,
        attempt=record.attempt,
        status=record.status,
        score=record.score,
        agent=describe_agent(record),
        grading=describe_grading(record),
        path=os.path.join(run_dir, record.attempt_dir) if record.attempt_dir else run_dir,
    )


@attrs.frozen
class CaptureChange:
    """A file capture dropped or restored in one attempt."""

    task_id: str
    attempt: int
    file: SkippedFile


def capture_changes(summary: RunSummary) -> tuple[CaptureChange, ...]:
    """Every file capture's anti-tamper rules dropped or restored, in the latest attempts."""
    out = []
    for record in _latest(summary):
        for skipped in record.skipped_files:
            if skipped.kind in CAPTURE_RULE_KINDS:
                out.append(CaptureChange(record.task_id, record.attempt, skipped))
    return tuple(out)


def unchanged_attempts(summary: RunSummary) -> tuple[AttemptRecord, ...]:
    """Attempts whose graded repo/ is the task's starting files, unchanged (not ``nop``'s,
    nor an agent's that never worked on the task: an error says why)."""
    return tuple(
        r
        for r in _latest(summary)
        if r.repo_changed is False and r.agent.lower() not in IDLE_AGENTS and not r.status.is_error
    )


def suspect_scores(summary: RunSummary) -> tuple[AttemptRecord, ...]:
    """The latest attempts whose score.json gave full marks while the eval command failed."""
    return tuple(r for r in _latest(summary) if has_score_conflict(r))


def _latest(summary: RunSummary) -> list[AttemptRecord]:
    """The last try (or regrade) of every attempt, by task id and attempt number."""
    latest = latest_by_attempt(list(summary.records))
    return [latest[k] for k in sorted(latest)]
