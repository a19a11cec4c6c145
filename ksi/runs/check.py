"""``ksi check``: is every task solvable by its own solution, and unsolved by doing nothing?

Two ordinary runs (agent ``oracle``, agent ``nop``) in their own run
directories; a task is broken when oracle's best score is below 1.0 (or
unscored), or when nop's reaches it. A task with no reference solution is
run by nop only and listed as not checked, so one such task does not stop
the check of the others. Task authors run this before paying for a model.

Files capture dropped or restored in the oracle's attempts are listed with
each task, OK or not: a reference solution that writes ``test_helpers.py``
passes only if the task's tests do not need it, and its author should know.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from ksi.kinds import AGENT
from ksi.options import create_component
from ksi.plugins import registry
from ksi.records import RunSummary, is_solved
from ksi.reporting.attention import capture_changes
from ksi.rundir.config import RunConfig
from ksi.runs.driver import Driver
from ksi.tasks.loaders import get_task_source
from ksi.tasks.selection import TaskSelection


@attrs.frozen
class TaskCheck:
    task_id: str
    oracle_score: float | None
    nop_score: float | None
    problems: tuple[str, ...]
    #: Why oracle could not attempt the task (no reference solution); "" when it did.
    not_checked: str = ""
    #: Files capture dropped or restored in the oracle's attempt (``path: why``).
    capture: tuple[str, ...] = ()


@attrs.frozen
class CheckResult:
    tasks: tuple[TaskCheck, ...]
    oracle_run: str
    nop_run: str

    @property
    def broken(self) -> list[TaskCheck]:
        return [t for t in self.tasks if t.problems]

    @property
    def not_checked(self) -> list[TaskCheck]:
        """Tasks oracle could not attempt (no reference solution): checked by nop alone."""
        return [t for t in self.tasks if t.not_checked]

    def lines(self) -> list[str]:
        out = []
        for t in self.broken:
            for p in t.problems:
                out.append(f"BROKEN {t.task_id}: {p}")
        for t in self.not_checked:
            out.append(f"NOT CHECKED {t.task_id}: {t.not_checked}")
        for t in self.tasks:
            for c in t.capture:
                out.append(f"CAPTURE {t.task_id}: oracle's {c}")
        ok = len([t for t in self.tasks if not t.problems and not t.not_checked])
        unchecked = f", {len(self.not_checked)} not checked" if self.not_checked else ""
        runs = (
            f"runs: {self.oracle_run}, {self.nop_run}"
            if self.oracle_run
            else "give --run-dir DIR to keep the runs and open their attempts"
        )
        out.append(
            f"{ok}/{len(self.tasks)} tasks OK, {len(self.broken)} broken{unchecked} ({runs})"
        )
        return out


def _best(summary: RunSummary | None) -> dict[str, float | None]:
    return {t.task_id: t.best_score for t in summary.tasks} if summary is not None else {}


def check_tasks(
    tasks_path: Path,
    *,
    task_source: str = "custom",
    task_source_options: Mapping[str, str] | None = None,
    environment: str = "local",
    environment_options: Mapping[str, str] | None = None,
    base_dir: Path,
    concurrency: int = 2,
    selection: TaskSelection | None = None,
) -> CheckResult:
    """Run oracle on the tasks it can attempt and nop on every task; judge each.

    A task without a reference solution does not stop the check: oracle
    skips it, nop still runs it, and it is listed as not checked.
    """
    path = Path(tasks_path).resolve()
    source = get_task_source(task_source, task_source_options)
    tasks = (selection or TaskSelection()).apply(source.load(path), where=str(tasks_path))
    oracle_agent = create_component(
        registry(AGENT).get("oracle").obj, {}, kind=AGENT.name, option_flag=AGENT.option_flag
    )
    why_not = {t.id: "; ".join(oracle_agent.check_tasks([t])) for t in tasks}
    runs = {"oracle": [t for t in tasks if not why_not[t.id]], "nop": tasks}
    results: dict[str, RunSummary | None] = {}
    for agent, agent_tasks in runs.items():
        config = RunConfig(
            agent=agent,
            task_source=task_source,
            task_source_options=dict(task_source_options or {}),
            tasks_path=str(path),
            # The tasks are handed over loaded: the source's evaluator must be named.
            evaluator=source.default_evaluator,
            environment=environment,
            environment_options=dict(environment_options or {}),
            concurrency=concurrency,
        )
        run = Driver(config, base_dir / agent, tasks=agent_tasks) if agent_tasks else None
        results[agent] = run.run() if run is not None else None
    oracle, nop = _best(results["oracle"]), _best(results["nop"])
    captured: dict[str, list[str]] = {}
    oracle_run = results["oracle"]
    for change in capture_changes(oracle_run) if oracle_run is not None else ():
        captured.setdefault(change.task_id, []).append(f"{change.file.path}: {change.file.reason}")
    checks = []
    for task in tasks:
        problems = []
        o, n = oracle.get(task.id), nop.get(task.id)
        if why_not[task.id]:
            pass  # listed as not checked, with the reason
        elif o is None:
            problems.append("its solution could not be graded (unscored: no eval, eval timeout?)")
        elif not is_solved(o, 1.0):
            problems.append(f"unsolvable by its own solution (oracle scored {o:.2f})")
        if is_solved(n, 1.0):
            problems.append("passes with no work (nop scored 1.00)")
        checks.append(
            TaskCheck(
                task.id, o, n, tuple(problems), why_not[task.id], tuple(captured.get(task.id, ()))
            )
        )
    return CheckResult(tuple(checks), str(base_dir / "oracle"), str(base_dir / "nop"))
