"""The ``local`` executor: attempt jobs in real threads, bounded, outcomes as they finish."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import attrs
import pytest

from ksi.attempt.job import ComponentSpec
from ksi.executors.local import LocalExecutor
from ksi.plugins import registry
from tests.job_helpers import command_job
from tests.run_helpers import pids_with_marker, wait_for_agents


def test_jobs_really_run_in_parallel(tmp_path: Path) -> None:
    """Two agents that each wait for the other's file can only finish if both run at once."""
    meet = tmp_path / "meet"
    meet.mkdir()
    wait_for = (
        "touch {me}; i=0; while [ ! -f {other} ] && [ $i -lt 200 ]; "
        "do sleep 0.05; i=$((i+1)); done; test -f {other}"
    )
    executor = LocalExecutor()
    executor.start(2)
    try:
        for me, other in (("a", "b"), ("b", "a")):
            cmd = wait_for.format(me=meet / me, other=meet / other)
            executor.submit(command_job(tmp_path / "run", cmd, task_id=me))
        outcomes = list(executor.as_completed())
    finally:
        executor.shutdown()
    assert sorted(o.job.task.id for o in outcomes) == ["a", "b"]
    assert all(o.record is not None and o.record.agent_exit_code == 0 for o in outcomes)


def test_concurrency_is_an_upper_bound(tmp_path: Path) -> None:
    """Six jobs submitted at once to a pool of three: never more than three agents at a time."""
    running = tmp_path / "running"
    running.mkdir()
    log = tmp_path / "counts"
    cmd = f"mkdir {running}/$$; ls {running} | wc -l >> {log}; sleep 0.3; rmdir {running}/$$"
    executor = LocalExecutor()
    executor.start(3)
    try:
        for i in range(6):
            executor.submit(command_job(tmp_path / "run", cmd, task_id=f"t{i}"))
        outcomes = list(executor.as_completed())
    finally:
        executor.shutdown()
    assert len(outcomes) == 6
    counts = [int(line) for line in log.read_text().split()]
    assert len(counts) == 6 and 1 <= max(counts) <= 3


def test_outcomes_arrive_as_they_finish_and_a_timeout_returns_early(tmp_path: Path) -> None:
    executor = LocalExecutor()
    executor.start(2)
    try:
        executor.submit(command_job(tmp_path / "run", "sleep 3", task_id="slow"))
        executor.submit(command_job(tmp_path / "run", "true", task_id="fast"))
        first = next(executor.as_completed())
        assert first.job.task.id == "fast" and first.record is not None
        assert list(executor.as_completed(timeout=0.2)) == [], "nothing else finished yet"
        (last,) = list(executor.as_completed())
        assert last.job.task.id == "slow" and last.record is not None
        assert last.record.status == "scored"
    finally:
        executor.shutdown()


def test_a_job_that_cannot_run_is_an_outcome_with_its_error(tmp_path: Path) -> None:
    job = attrs.evolve(
        command_job(tmp_path / "run", "true"), agent=ComponentSpec("agent", "no-such-agent")
    )
    executor = LocalExecutor()
    executor.start(1)
    try:
        assert list(executor.as_completed()) == [], "nothing submitted: nothing to yield"
        executor.submit(job)
        (outcome,) = list(executor.as_completed())
    finally:
        executor.shutdown()
    assert outcome.record is None
    assert "no-such-agent" in outcome.error


def test_cancel_kills_running_agents_and_their_attempts_leave_no_record(tmp_path: Path) -> None:
    marker = f"ksi-cancel-{uuid.uuid4().hex}"
    executor = LocalExecutor()
    executor.start(2)
    try:
        for i in range(2):
            executor.submit(
                command_job(tmp_path / "run", f"sleep 1000 # {marker}", task_id=f"t{i}")
            )
        wait_for_agents(marker, 2)
        started = time.monotonic()
        executor.cancel()
        outcomes = list(executor.as_completed())
        assert time.monotonic() - started < 20
        assert len(outcomes) == 2
        assert pids_with_marker(marker) == []
        assert not list((tmp_path / "run").rglob("record.json")), "cancelled: not a result"
    finally:
        executor.shutdown()
        for pid in pids_with_marker(marker):
            os.kill(pid, signal.SIGKILL)


def test_bad_concurrency_is_refused() -> None:
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        LocalExecutor().start(0)


def test_local_executor_is_registered() -> None:
    assert registry("executor").get("local").obj is LocalExecutor
