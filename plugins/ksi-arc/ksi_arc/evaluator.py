"""The ``arc`` evaluator: exact match of ``repo/answer.json`` against the test outputs, on the host.

No command runs: the answer file is read as data. Score = the fraction of
the task's test inputs solved (a test input is solved when any of its up to
two candidates equals the output exactly), as ARC-AGI's official scoring
counts a task. A missing or malformed answer file is the agent's failure,
not KSI's: it scores 0.0 (status ``no_answer`` or ``bad_answer``) with
notes saying what was wrong. A task without published test outputs cannot
be graded: unscored, status ``no_eval``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs

from ksi.interfaces import EnvironmentHandle
from ksi.models import EvalResult, TaskSpec
from ksi_arc.answer import MalformedAnswer, judge, read_answer
from ksi_arc.grids import Grid
from ksi_arc.prompt import ANSWER_FILE


@attrs.define
class ArcEvaluator:
    """Exact match per test input (any of up to 2 candidates); score = fraction solved."""

    name: ClassVar[str] = "arc"
    aliases: ClassVar[tuple[str, ...]] = ("arc-exact",)
    description: ClassVar[str] = (
        "ARC exact match: repo/answer.json against the test outputs (up to 2 candidates per "
        "test input); score = fraction of test inputs solved; no command"
    )
    grades_in: ClassVar[Literal["host", "environment"]] = "host"

    def grade(
        self,
        task: TaskSpec,
        workdir: Path,
        *,
        env: EnvironmentHandle | None = None,
        log_dir: Path | None = None,
    ) -> EvalResult:
        arc: dict[str, Any] = task.metadata.get("arc") or {}
        expected: list[Grid] | None = arc.get("test_outputs")
        if not expected:
            return EvalResult(
                status="no_eval",
                native_score=None,
                eval_workdir=str(workdir),
                notes=(
                    f"task {task.id!r} has no published test outputs (or is not an ARC task); "
                    "it cannot be graded",
                ),
            )
        try:
            answers = read_answer(Path(workdir), len(expected))
        except MalformedAnswer as exc:
            missing = not (Path(workdir) / ANSWER_FILE).exists()
            return _logged(
                log_dir,
                EvalResult(
                    status="no_answer" if missing else "bad_answer",
                    native_score=0.0,
                    eval_workdir=str(workdir),
                    notes=tuple(exc.problems),
                    details={"solved": 0, "n_tests": len(expected)},
                ),
            )
        verdicts = [
            judge(candidates, want, i)
            for i, (candidates, want) in enumerate(zip(answers, expected, strict=True), 1)
        ]
        solved = sum(v.solved for v in verdicts)
        return _logged(
            log_dir,
            EvalResult(
                status="scored",
                native_score=solved / len(expected),
                eval_workdir=str(workdir),
                notes=tuple(v.note for v in verdicts),
                details={
                    "solved": solved,
                    "n_tests": len(expected),
                    "solved_by_candidate": [v.candidate for v in verdicts],
                },
            ),
        )


def _logged(log_dir: Path | None, result: EvalResult) -> EvalResult:
    """``result``, its notes also written to ``log_dir/arc-verdicts.txt`` when there is one."""
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "arc-verdicts.txt").write_text("\n".join(result.notes) + "\n", encoding="utf-8")
    return result
