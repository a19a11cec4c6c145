"""``ksi check``: is every task solvable by its own solution, and unsolved by doing nothing?

Two ordinary runs (agent ``oracle``, agent ``nop``) in their own run
directories; a task is broken when oracle's best score is below 1.0 (or
unscored), or when nop's reaches it. Task authors run this before paying for
a model.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from ksi.runner.config import RunConfig
from ksi.runner.driver import Driver
from ksi.runner.models import RunSummary


@attrs.frozen
class TaskCheck:
    task_id: str
    oracle_score: float | None
    nop_score: float | None
    problems: tuple[str, ...]


@attrs.frozen
class CheckResult:
    tasks: tuple[TaskCheck, ...]
    oracle_run: str
    nop_run: str

    @property
    def broken(self) -> list[TaskCheck]:
        return [t for t in self.tasks if t.problems]

    def lines(self) -> list[str]:
        out = []
        for t in self.broken:
            for p in t.problems:
                out.append(f"BROKEN {t.task_id}: {p}")
        out.append(
            f"{len(self.tasks) - len(self.broken)}/{len(self.tasks)} tasks OK, "
            f"{len(self.broken)} broken (runs: {self.oracle_run}, {self.nop_run})"
        )
        return out


def _best(summary: RunSummary) -> dict[str, float | None]:
    return {t.task_id: t.best_score for t in summary.tasks}


def check_tasks(
    tasks_path: Path,
    *,
    task_source: str = "custom",
    environment: str = "local",
    base_dir: Path,
    concurrency: int = 2,
) -> CheckResult:
    results = {}
    for agent in ("oracle", "nop"):
        config = RunConfig(
            agent=agent,
            task_source=task_source,
            tasks_path=str(Path(tasks_path).resolve()),
            environment=environment,
            concurrency=concurrency,
        )
        results[agent] = Driver(config, base_dir / agent).run()
    oracle, nop = _best(results["oracle"]), _best(results["nop"])
    checks = []
    for task_id in oracle:
        problems = []
        o, n = oracle[task_id], nop.get(task_id)
        if o is None:
            problems.append("its solution could not be graded (unscored: no eval, eval timeout?)")
        elif o < 1.0:
            problems.append(f"unsolvable by its own solution (oracle scored {o:.2f})")
        if n is not None and n >= 1.0:
            problems.append("passes with no work (nop scored 1.00)")
        checks.append(TaskCheck(task_id, o, n, tuple(problems)))
    return CheckResult(tuple(checks), str(base_dir / "oracle"), str(base_dir / "nop"))
