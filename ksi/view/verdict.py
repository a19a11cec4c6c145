"""What happened to an attempt, in words: the status and why, for the report and ``ksi show``.

A user looking at a failed attempt wants the reason before the evidence:
"the eval command exited 1", "the eval command timed out after 60 s", "the
agent hit a rate limit". :func:`verdict` turns a record into a short label
and the reasons, from the record alone, so every view says the same thing.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ksi.models import EvalStatus
from ksi.records import AttemptRecord, AttemptStatus, ErrorKind, TaskSummary, is_solved
from ksi.view import fmt

Tone = Literal["good", "partial", "bad", "unscored", "error"]
TaskState = Literal["solved", "partial", "failed", "unscored", "error", "not run"]

#: What an evaluator status other than ``scored`` means, for the user.
_EVAL_STATUS_WORDS: dict[str, str] = {
    EvalStatus.TIMEOUT: "the eval command timed out",
    EvalStatus.MISSING_WORKSPACE: "there was no workspace to grade",
    EvalStatus.SPAWN_FAILED: "the eval command could not be started",
    EvalStatus.NO_EVAL: "the task has no eval command",
    EvalStatus.EVAL_ERROR: "KSI could not prepare the grading",
}


@attrs.frozen
class Verdict:
    #: One or two words: ``solved``, ``failed``, ``partial 0.70``, ``unscored``...
    label: str
    tone: Tone
    #: Reasons, most important first; each one line.
    reasons: tuple[str, ...]


def _score(value: float) -> str:
    return f"{value:.2f}"


def verdict(record: AttemptRecord, solved_threshold: float = 1.0) -> Verdict:
    """The label, tone and reasons of one attempt."""
    reasons: list[str] = []
    tone: Tone
    ev = record.eval
    if record.status == AttemptStatus.SCORED and record.score is not None:
        if is_solved(record.score, solved_threshold):
            label, tone = f"solved ({_score(record.score)})", "good"
        elif record.score > 0:
            label, tone = f"partial ({_score(record.score)})", "partial"
        else:
            label, tone = "failed (0.00)", "bad"
        if ev is not None and ev.details.get("score_conflict") is True:
            # Full marks from a score.json while the tests failed: it stays the score (the
            # contract), but nobody should take it for a solve without looking.
            label, tone = f"{label}, suspect", "partial"
        if ev is not None:
            source = ev.details.get("score_source")
            if source == "score.json":
                reasons.append(f"score {_score(record.score)} from the score.json the eval wrote")
            if ev.exit_code is not None:
                reasons.append(f"the eval command exited with code {ev.exit_code}")
    elif record.status == AttemptStatus.UNSCORED:
        label, tone = "unscored", "unscored"
        if ev is None:
            reasons.append("no evaluator result")
        else:
            what = _EVAL_STATUS_WORDS.get(ev.status, f"eval status {ev.status!r}")
            timeout = ev.details.get("timeout_sec")
            if ev.status == EvalStatus.TIMEOUT and isinstance(timeout, (int, float)):
                what += f" after {timeout:g} s"
            reasons.append(what)
    elif record.status == AttemptStatus.AGENT_ERROR:
        label, tone = "agent error", "error"
        reasons.append(
            f"the agent failed for a reason outside the task ({record.agent_status or 'error'})"
        )
    else:
        label, tone = "error", "error"
        kind = " (the disk was full)" if record.error_kind == ErrorKind.DISK_FULL else ""
        reasons.append(f"KSI could not finish this attempt{kind}")
    if record.error:
        reasons.append(record.error)
    if record.agent_timed_out:
        reasons.append("the agent was stopped at its timeout")
    elif record.agent_exit_code not in (None, 0):
        reasons.append(f"the agent exited with code {record.agent_exit_code}")
    if ev is not None:
        reasons.extend(ev.notes)
    if record.log_truncated:
        reasons.append("the agent's output was cut at the log size cap")
    skipped = sum(record.skipped_counts.values()) or len(record.skipped_files)
    if skipped:
        reasons.append(f"capture skipped or restored {skipped} path(s): listed with the attempt")
    if record.regraded_at:
        reasons.append(f"regraded at {record.regraded_at}")
    return Verdict(label, tone, tuple(reasons))


def task_state(summary: TaskSummary) -> TaskState:
    """A task in one word: solved, partial (best above 0), failed, unscored, error, not run."""
    if summary.solved:
        return "solved"
    if summary.best_score is not None:
        return "partial" if summary.best_score > 0 else "failed"
    if summary.unscored:
        return "unscored"
    if summary.errors:
        return "error"
    return "not run"


def attempt_facts(record: AttemptRecord) -> list[tuple[str, str]]:
    """The facts of an attempt as ``(label, text)`` pairs: who ran it, grading, time, usage."""
    r, ev, t, u = record, record.eval, record.timings, record.usage
    agent = (
        r.agent + (f" (model {r.model})" if r.model else "") + f" \u00b7 {r.agent_status or '-'}"
    )
    if r.agent_exit_code is not None:
        agent += f", exit {r.agent_exit_code}"
    if r.agent_timed_out:
        agent += ", timed out"
    grading = "not graded"
    if ev is not None:
        grading = ev.status + (f", exit {ev.exit_code}" if ev.exit_code is not None else "")
        source = ev.details.get("score_source")
        if source:
            grading += f", score from {'the exit code' if source == 'exit_code' else source}"
    status: str = r.status
    if r.retryable and r.status != AttemptStatus.SCORED:
        status += " (a resume or --retries runs it again)"
    usage = f"{fmt.num(u.input_tokens)} in \u00b7 {fmt.num(u.output_tokens)} out"
    if u.cache_read_tokens or u.cache_write_tokens:
        usage += f" \u00b7 cache {fmt.num(u.cache_read_tokens)}/{fmt.num(u.cache_write_tokens)}"
    usage += f" \u00b7 {fmt.money(u.cost_usd)}" + (f" \u00b7 {u.turns} turns" if u.turns else "")
    return [
        ("status", status),
        ("agent", agent),
        ("eval", grading),
        ("where", f"{r.environment} environment \u00b7 {r.evaluator} evaluator"),
        (
            "time",
            f"total {fmt.secs(t.total)} \u00b7 agent {fmt.secs(t.agent)} \u00b7 "
            f"eval {fmt.secs(t.eval)} \u00b7 seed {fmt.secs(t.seed)} \u00b7 "
            f"capture {fmt.secs(t.capture)}",
        ),
        ("usage", usage),
        (
            "when",
            f"{r.started_at or '?'} \u2192 {r.finished_at or '?'}"
            + (f" (generation {r.generation})" if r.generation > 1 else ""),
        ),
    ]
