"""``ksi.run()``: the whole of ``ksi run`` from Python."""

from __future__ import annotations

import datetime as dt
import difflib
import inspect
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi.attempt.components import spec_name
from ksi.errors import UserInputError
from ksi.models import TaskSpec
from ksi.options import options_from_python
from ksi.records import RunSummary
from ksi.rundir.config import RunConfig
from ksi.runs.driver import Driver
from ksi.runs.progress import Progress
from ksi.tasks.paths import one_tasks_path, recorded_tasks_path


def default_run_dir(runs_root: str | Path = "runs", run_name: str | None = None) -> Path:
    """``runs_root/run_name``, or a new name: the time (sortable) and a random suffix.

    The suffix keeps two runs started in the same second (two terminals, a
    script) from landing in one directory, where the second would be refused.
    """
    if run_name:
        return Path(runs_root) / run_name
    stamp = dt.datetime.now().strftime("run-%Y%m%d-%H%M%S")
    return Path(runs_root) / f"{stamp}-{secrets.token_hex(3)}"


def _unknown_options(unknown: Sequence[str], known: set[str] | frozenset[str]) -> str:
    """One line per unknown keyword, each with its "did you mean", then the valid ones."""
    lines = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        lines.append(f"ksi.run(): unknown option {name!r}{hint}")
    lines.append(f"valid options: {', '.join(sorted(known))}")
    return "\n".join(lines)


def run(
    tasks: Sequence[TaskSpec] | str | Path,
    *,
    agent: Any,
    evaluator: Any = None,
    environment: Any = "local",
    attempts: int = 1,
    concurrency: int | None = None,
    run_dir: str | Path | None = None,
    task_source: str = "custom",
    agent_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> RunSummary:
    """Run ``agent`` on every task and return the summary, with every attempt's record.

    ``tasks`` is a list of :class:`~ksi.models.TaskSpec` or a path for
    ``task_source``; ``agent``, ``evaluator`` and ``environment`` are names
    (as on the command line), component classes, or ready instances. Other
    keyword arguments are :class:`~ksi.rundir.config.RunConfig` fields
    (``timeout_sec``, ``retries``, ``wipe_workspace``, ``model``...), each the
    counterpart of a ``ksi run`` option (docs/python-api.md lists them, from the
    same declarations). Running again with the same ``run_dir`` resumes.
    """
    known = {f.name for f in attrs.fields(RunConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        own = set(inspect.signature(run).parameters) - {"tasks", "options"}
        raise UserInputError(_unknown_options(unknown, known | own))
    given_tasks: list[TaskSpec] | None = None
    tasks_path: str | None = None
    # `tasks_path=` is a RunConfig field too: the same rule as TASKS and --tasks-path.
    other_path = options.pop("tasks_path", None)
    if isinstance(tasks, (str, Path)):
        tasks_path = recorded_tasks_path(one_tasks_path(tasks, other_path, spelled="tasks_path="))
    else:
        # In-memory tasks may name the file `ksi regrade` reloads them from.
        given_tasks = list(tasks)
        if other_path is not None:
            tasks_path = recorded_tasks_path(Path(other_path))
    fields: dict[str, Any] = {
        "agent": spec_name(agent),
        "environment": spec_name(environment),
        "evaluator": None if evaluator is None else spec_name(evaluator),
        "task_source": task_source,
        "tasks_path": tasks_path,
        "attempts": attempts,
        "agent_options": dict(agent_options or {}),
        **options,
    }
    if concurrency is not None:
        fields["concurrency"] = concurrency
    config = RunConfig(**fields)
    with options_from_python():
        runner = Driver(
            config,
            Path(run_dir) if run_dir is not None else default_run_dir(),
            tasks=given_tasks,
            agent=agent,
            evaluator=evaluator,
            environment=environment,
            progress=progress,
        )
        return runner.run()
