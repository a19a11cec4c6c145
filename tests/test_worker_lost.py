"""An attempt whose worker died (a cluster node gone) is an error a resume runs again.

The executor says so with ``JobOutcome.error_kind = WORKER_LOST``; the driver
records it, retries it under ``--retries`` as a new try, and otherwise leaves
the run incomplete so that a plain resume runs it again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import attrs

import ksi
from ksi.attempt.job import AttemptJob, JobOutcome
from ksi.executors.local import LocalExecutor
from ksi.hookspecs import Register, hookimpl
from ksi.records import WORKER_LOST
from tests.run_helpers import journal_lines, write_tasks


@attrs.define
class LosingExecutor(LocalExecutor):
    """The local executor, except that try 0 of task ``lost`` dies with its 'node'."""

    name: ClassVar[str] = "losing"
    aliases: ClassVar[tuple[str, ...]] = ()
    _lost: list[AttemptJob] = attrs.field(factory=list, init=False)

    def submit(self, job: AttemptJob) -> None:
        if job.task.id == "lost" and job.try_number == 0:
            self._lost.append(job)
        else:
            super().submit(job)

    def as_completed(self, timeout: float | None = None) -> Iterator[JobOutcome]:
        while self._lost:
            yield JobOutcome(self._lost.pop(), error="node n1 died", error_kind=WORKER_LOST)
        yield from super().as_completed(timeout)


class _Plugin:
    @hookimpl
    def ksi_register_executors(self, register: Register) -> None:
        register(LosingExecutor)


def test_a_lost_worker_is_an_error_that_a_resume_runs_again(
    tmp_path: Path, ksi_plugin: Any
) -> None:
    ksi_plugin(_Plugin(), name="losing-executor")
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [{"task_id": t, "prompt": "p", "eval": {"command": "true"}} for t in ("lost", "fine")],
    )
    run_dir = tmp_path / "run"
    first = ksi.run(tasks, agent="nop", run_dir=run_dir, executor="losing")
    lines = {line["task_id"]: line for line in journal_lines(run_dir)}
    assert lines["lost"]["status"] == "error" and lines["lost"]["error"] == "node n1 died"
    assert lines["lost"]["error_kind"] == WORKER_LOST
    assert lines["fine"]["status"] == "scored"
    # --retries 0: the error stands in this session, and the run is not complete.
    assert not first.run_complete
    assert json.loads((run_dir / "run.json").read_text())["run_complete"] is False

    again = ksi.run(tasks, agent="nop", run_dir=run_dir, executor="losing")
    keys = [(r["task_id"], r["try_number"]) for r in journal_lines(run_dir)]
    assert sorted(keys) == [("fine", 0), ("lost", 0), ("lost", 1)]
    assert again.run_complete


def test_with_retries_a_lost_worker_is_retried_in_the_same_session(
    tmp_path: Path, ksi_plugin: Any
) -> None:
    ksi_plugin(_Plugin(), name="losing-executor")
    tasks = write_tasks(
        tmp_path / "t.jsonl", [{"task_id": "lost", "prompt": "p", "eval": {"command": "true"}}]
    )
    summary = ksi.run(tasks, agent="nop", run_dir=tmp_path / "run", executor="losing", retries=1)
    assert [(r["status"], r["try_number"]) for r in journal_lines(tmp_path / "run")] == [
        ("error", 0),
        ("scored", 0 + 1),
    ]
    assert summary.run_complete


@attrs.define
class LosingInGenerationTwo(LosingExecutor):
    """Loses try 0 of every job of generation 2."""

    name: ClassVar[str] = "losing-late"

    def submit(self, job: AttemptJob) -> None:
        if job.generation == 2 and job.try_number == 0:
            self._lost.append(job)
        else:
            LocalExecutor.submit(self, job)


class _LatePlugin:
    @hookimpl
    def ksi_register_executors(self, register: Register) -> None:
        register(LosingInGenerationTwo)


def test_a_lost_worker_is_recorded_in_the_generation_it_ran_in(
    tmp_path: Path, ksi_plugin: Any
) -> None:
    ksi_plugin(_LatePlugin(), name="losing-late-executor")
    tasks = write_tasks(
        tmp_path / "t.jsonl", [{"task_id": "t", "prompt": "p", "eval": {"command": "true"}}]
    )
    run_dir = tmp_path / "run"
    ksi.run(
        tasks,
        agent="nop",
        run_dir=run_dir,
        executor="losing-late",
        generations=2,
        strategy="all",
        retries=1,
    )
    lost, retried = [line for line in journal_lines(run_dir) if line["generation"] == 2]
    assert (lost["status"], lost["error_kind"], retried["status"]) == (
        "error",
        WORKER_LOST,
        "scored",
    )
    assert lost["knowledge"] == retried["knowledge"] is not None
