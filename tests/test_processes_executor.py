"""The built-in ``processes`` executor: attempts in worker processes, and what a user sees
when a worker dies or a component cannot reach one. Real runs, real worker processes.

That a run journals exactly what a ``local`` run does, and that Ctrl-C stops the
workers' agents, is in tests/test_job_portability.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest

import ksi
from ksi.hookspecs import Register, hookimpl
from ksi.records import WORKER_LOST
from ksi.runs.driver import RunInterrupted
from tests.run_helpers import journal_lines, pids_with_marker, wait_for_agents, write_tasks
from tests.run_helpers import ksi as ksi_cli


def _tasks(tmp_path: Path, n: int) -> Path:
    return write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"task_id": f"t{i}", "prompt": "p", "eval": {"command": "test -s f.txt"}}
            for i in range(n)
        ],
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_attempts_run_in_worker_processes_that_end_with_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = ksi.run(
        _tasks(tmp_path, 6),
        agent="command",
        agent_options={"cmd": "echo $PPID > repo/f.txt"},  # the agent's parent: a worker
        run_dir=run_dir,
        concurrency=2,
        executor="processes",
    )
    assert [r.score for r in summary.records] == [1.0] * 6
    parents = {
        int((run_dir / r.attempt_dir / "captured" / "repo" / "f.txt").read_text())
        for r in summary.records
    }
    assert os.getpid() not in parents, "the attempts ran in worker processes"
    assert len(parents) <= 2, "at most --concurrency workers, kept for the whole run"
    assert not [pid for pid in parents if _alive(pid)], "no worker outlives the run"


#: A ``sitecustomize`` that leaves a file named after each worker process that starts.
_COUNT_WORKERS = """
import os
if "KSI_WORKER_SYS_PATH" in os.environ:  # a processes-executor worker, starting up
    open(os.path.join(os.environ["STARTED_WORKERS_DIR"], str(os.getpid())), "w").close()
"""


def test_a_run_starts_no_more_workers_than_it_has_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker costs a fresh interpreter (KSI and the plugins imported): a one-attempt
    run at --concurrency 4 starts one, not four."""
    hooks, started = tmp_path / "hooks", tmp_path / "started"
    hooks.mkdir()
    started.mkdir()
    (hooks / "sitecustomize.py").write_text(_COUNT_WORKERS)
    python_path = [str(hooks), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(python_path))
    monkeypatch.setenv("STARTED_WORKERS_DIR", str(started))
    summary = ksi.run(
        _tasks(tmp_path, 1),
        agent="command",
        agent_options={"cmd": "echo $PPID > repo/f.txt"},
        run_dir=tmp_path / "run",
        concurrency=4,
        executor="processes",
    )
    (record,) = summary.records
    assert record.score == 1.0
    worker = (tmp_path / "run" / record.attempt_dir / "captured" / "repo" / "f.txt").read_text()
    assert [path.name for path in started.iterdir()] == [worker.strip()]


def test_a_worker_that_dies_loses_only_its_attempt(tmp_path: Path) -> None:
    """The dead worker's attempt says so (a resume runs it again); a new worker runs the rest."""
    once = tmp_path / "killed-once"  # the first try of t1 kills its worker; the resume's does not
    kill = f'if [ "$KSI_TASK_ID" = t1 ] && mkdir {once}; then kill -9 $PPID; fi'
    cmd = f"{kill}; echo hi > repo/f.txt"
    run_dir = tmp_path / "run"

    def run() -> Any:
        return ksi.run(
            _tasks(tmp_path, 5),
            agent="command",
            agent_options={"cmd": cmd},
            run_dir=run_dir,
            concurrency=2,
            executor="processes",
        )

    summary = run()
    by_task = {r.task_id: r for r in summary.records}
    lost = by_task.pop("t1")
    assert lost.status == "error" and lost.error_kind == WORKER_LOST
    assert "worker process running this attempt died (signal 9)" in lost.error
    assert [r.score for r in by_task.values()] == [1.0] * 4
    assert not summary.run_complete

    resumed = run()  # the same run directory: a resume
    assert resumed.run_complete
    assert {r.task_id: r.score for r in resumed.records}["t1"] == 1.0


class _InProcessAgent:
    """An agent class registered by a plugin object in this process only."""

    name: ClassVar[str] = "in-process-only"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "exists in the test's process"

    def setup(self, ctx: Any) -> None:
        pass

    def invocation(self, ctx: Any) -> Any:
        return None

    def outcome(self, ctx: Any, result: Any) -> Any:
        from ksi.interfaces import AgentOutcome

        return AgentOutcome()


class _InProcessPlugin:
    @hookimpl
    def ksi_register_agents(self, register: Register) -> None:
        register(_InProcessAgent)


def test_a_plugin_registered_in_process_only_is_named_in_the_error(
    tmp_path: Path, ksi_plugin: Any
) -> None:
    ksi_plugin(_InProcessPlugin())
    summary = ksi.run(
        _tasks(tmp_path, 1),
        agent="in-process-only",
        run_dir=tmp_path / "run",
        executor="processes",
    )
    (record,) = summary.records
    assert record.status == "error"
    assert "in-process-only" in record.error
    assert "register_plugin is not there" in record.error and "--executor local" in record.error


class _PrintingAgent(_InProcessAgent):
    """Given as a class (pickled by reference): its setup prints, in the worker."""

    name: ClassVar[str] = "printing"

    def setup(self, ctx: Any) -> None:
        print("STRAY-PRINT-FROM-A-WORKER", flush=True)


def test_a_workers_stray_print_goes_to_stderr_not_stdout(tmp_path: Path, capfd: Any) -> None:
    """``ksi run``'s stdout is its report (``--output-json -`` style consumers read it)."""
    ksi.run(
        _tasks(tmp_path, 1), agent=_PrintingAgent, run_dir=tmp_path / "run", executor="processes"
    )
    out, err = capfd.readouterr()
    assert "STRAY-PRINT-FROM-A-WORKER" not in out
    assert "STRAY-PRINT-FROM-A-WORKER" in err


def test_the_cli_runs_attempts_in_worker_processes(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, 3)
    # fmt: off
    proc = ksi_cli(
        "run", str(tasks), "--agent", "command", "--agent-option", "cmd=echo hi > repo/f.txt",
        "--executor", "processes", "--concurrency", "2", "--run-dir", str(tmp_path / "run"),
    )
    # fmt: on
    assert proc.returncode == 0, proc.stderr
    assert "solved: 3/3" in proc.stdout


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _stats(pids: list[int]) -> dict[int, str]:
    """What /proc says of each (its state, parent, signals): why it did not die is there."""
    found = {}
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        keep = ("State", "PPid", "SigPnd", "ShdPnd", "SigBlk", "SigIgn")
        found[pid] = "; ".join(line for line in status if line.split(":")[0] in keep)
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for a reaper here)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.serial  # timing: failed beside other tests on 2 loaded cores
def test_workers_die_with_a_killed_ksi(tmp_path: Path) -> None:
    """kill -9 of ``ksi`` takes its workers too, as it would take its threads."""
    marker = f"ksi-pdeath-{uuid.uuid4().hex}"
    run_dir = tmp_path / "run"
    # fmt: off
    ksi_proc = subprocess.Popen(
        [
            sys.executable, "-m", "ksi", "run", str(_tasks(tmp_path, 2)),
            "--agent", "command", "--agent-option", f"cmd=sleep 1000 # {marker}",
            "--executor", "processes", "--concurrency", "2", "--run-dir", str(run_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # fmt: on
    try:
        # ksi itself (the marker is in its arguments) and both agents: each worker holds a job
        wait_for_agents(marker, 3, timeout=60)
        workers = [
            pid
            for pid in _children(ksi_proc.pid)
            if b"ksi.executors.processes" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(workers) == 2
        ksi_proc.kill()
        ksi_proc.wait()
        alive = _wait_for_the_end_of(workers)
        assert not alive, f"a worker outlived ksi: {_stats(alive)}"
    finally:
        for pid in pids_with_marker(marker):
            os.kill(pid, signal.SIGKILL)
        ksi_proc.kill()
        ksi_cli("cleanup", str(run_dir))  # the killed run's cgroups


def test_a_worker_started_before_a_refused_run_ends_with_ksi(tmp_path: Path) -> None:
    """``ksi run --executor processes`` starts its first worker as it reads its options:
    a run refused after that (tasks it cannot read) leaves no worker behind."""
    hooks, started = tmp_path / "hooks", tmp_path / "started"
    hooks.mkdir()
    started.mkdir()
    (hooks / "sitecustomize.py").write_text(_COUNT_WORKERS)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("{not json\n")
    python_path = [str(hooks), *filter(None, [os.environ.get("PYTHONPATH")])]
    # fmt: off
    proc = ksi_cli(
        "run", str(tasks), "--agent", "command", "--agent-option", "cmd=true",
        "--executor", "processes", "--run-dir", str(tmp_path / "run"),
        env={"PYTHONPATH": os.pathsep.join(python_path), "STARTED_WORKERS_DIR": str(started)},
    )
    # fmt: on
    assert proc.returncode != 0, proc.stdout
    workers = [int(path.name) for path in started.iterdir()]
    assert len(workers) == 1, "the worker started as ksi read its options"
    alive = _wait_for_the_end_of(workers)
    assert not alive, f"a worker outlived ksi: {_stats(alive)}"


def _wait_for_the_end_of(workers: list[int]) -> list[int]:
    """Those of ``workers`` still running after a generous wait (a loaded machine is slow to
    schedule a dying process; one that missed its parent's death runs its 1000 s agent)."""
    deadline = time.monotonic() + 60
    while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in workers if _running(pid)]


#: A ``sitecustomize`` that holds each starting worker, before KSI is imported, until its
#: first job is in its pipe (it says so in a file) and then until its driver is gone.
_HOLD_WORKER_STARTUP = """
import os, select, sys, time
if "KSI_WORKER_SYS_PATH" in os.environ:  # a processes-executor worker, starting up
    parent = os.getppid()
    select.select([int(sys.argv[1])], [], [])  # argv[1]: its job pipe
    open(os.path.join(os.environ["HELD_WORKERS_DIR"], str(os.getpid())), "w").close()
    while os.getppid() == parent:
        time.sleep(0.05)
"""


@pytest.mark.serial  # timing: as the test above
def test_a_worker_still_starting_when_ksi_is_killed_does_not_run_its_job(tmp_path: Path) -> None:
    """The first job is in the pipe before the worker's interpreter is up (seconds on a loaded
    machine), before it can ask for the parent-death signal: if ``ksi`` is killed meanwhile,
    the worker ends instead of running the attempt with nobody to report to."""
    marker = f"ksi-pdeath-{uuid.uuid4().hex}"
    run_dir = tmp_path / "run"
    hooks, held = tmp_path / "hooks", tmp_path / "held"
    hooks.mkdir()
    held.mkdir()
    (hooks / "sitecustomize.py").write_text(_HOLD_WORKER_STARTUP)
    python_path = [str(hooks), *filter(None, [os.environ.get("PYTHONPATH")])]
    # fmt: off
    ksi_proc = subprocess.Popen(
        [
            sys.executable, "-m", "ksi", "run", str(_tasks(tmp_path, 2)),
            "--agent", "command", "--agent-option", f"cmd=sleep 1000 # {marker}",
            "--executor", "processes", "--concurrency", "2", "--run-dir", str(run_dir),
        ],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(python_path),
            "HELD_WORKERS_DIR": str(held),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # fmt: on
    try:
        deadline = time.monotonic() + 60
        while len(list(held.iterdir())) < 2:
            assert ksi_proc.poll() is None, "ksi ended before its workers had a job"
            assert time.monotonic() < deadline, "the workers were never given a job"
            time.sleep(0.05)
        workers = [int(path.name) for path in held.iterdir()]
        ksi_proc.kill()
        ksi_proc.wait()
        alive = _wait_for_the_end_of(workers)
        assert not alive, f"a worker outlived ksi: {_stats(alive)}"
        assert pids_with_marker(marker) == [], "a worker ran its attempt after ksi was killed"
    finally:
        for pid in pids_with_marker(marker):
            os.kill(pid, signal.SIGKILL)
        ksi_proc.kill()
        ksi_cli("cleanup", str(run_dir))  # the killed run's cgroups, if an attempt started


# -- a stop: the next job never starts in a worker -------------------------------------
#
# At --concurrency 1 the attempt that stops the run is the only one running, so exactly
# the attempts before it exist. An executor that ships a job to a worker before it is
# submitted (tried for issue 30: docs/running.md, "Threads or worker processes") must
# not start it there: a worker starting it on its own fails these.


class _SetupAgent:
    """An agent whose attempt of task ``t0`` reports an auth error (fail-fast stops the run)
    unless ``fixed``, and reports $1 of spend each time (``--max-cost`` stops the run)."""

    name: ClassVar[str] = "setup-failing"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "test agent"
    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()

    def __init__(self, fixed: bool = False) -> None:
        self.fixed = fixed

    def check_tasks(self, tasks: Any) -> list[str]:
        return []

    def setup(self, ctx: Any) -> None:
        pass

    def invocation(self, ctx: Any) -> Any:
        from ksi.interfaces import Invocation

        return Invocation(argv=("sh", "-c", "echo hi > repo/f.txt"))

    def outcome(self, ctx: Any, result: Any) -> Any:
        from ksi.interfaces import AgentOutcome, Usage

        if ctx.task.id == "t0" and not self.fixed:
            return AgentOutcome(status="auth_error", error="401 invalid x-api-key")
        return AgentOutcome(usage=Usage(cost_usd=1.0))


def _attempted(run_dir: Path) -> list[str]:
    """The tasks with an attempt directory: every attempt that started has one."""
    return sorted(path.name for path in (run_dir / "attempts").iterdir())


def _journalled(run_dir: Path) -> list[tuple[str, str]]:
    return [(line["task_id"], line["status"]) for line in journal_lines(run_dir)]


def test_a_fail_fast_stop_starts_no_further_job_in_a_worker(tmp_path: Path) -> None:
    tasks, run_dir = _tasks(tmp_path, 4), tmp_path / "run"
    summary = ksi.run(
        tasks, agent=_SetupAgent(), run_dir=run_dir, concurrency=1, executor="processes"
    )
    assert summary.stopped_reason.startswith("auth_error")
    assert _attempted(run_dir) == ["t0"], "t1 never started"
    assert _journalled(run_dir) == [("t0", "agent_error")]
    # The resume runs what the stop left out, each once, as for a job never dispatched.
    again = ksi.run(
        tasks, agent=_SetupAgent(fixed=True), run_dir=run_dir, concurrency=1, executor="processes"
    )
    assert again.run_complete and again.solved_tasks == 4
    assert sorted(_journalled(run_dir)[1:]) == [(f"t{i}", "scored") for i in range(4)]


def test_a_max_cost_stop_starts_no_further_job_in_a_worker(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = ksi.run(
        _tasks(tmp_path, 5),
        agent=_SetupAgent(fixed=True),
        run_dir=run_dir,
        concurrency=1,
        max_cost_usd=2.5,
        executor="processes",
    )
    assert "max_cost" in summary.stopped_reason
    assert _attempted(run_dir) == ["t0", "t1", "t2"], "t3 never started"
    assert _journalled(run_dir) == [("t0", "scored"), ("t1", "scored"), ("t2", "scored")]


def test_a_killed_worker_loses_no_job_but_its_own(tmp_path: Path) -> None:
    """The worker running t0 is killed: t1 and the rest run in the next worker, each once."""
    cmd = 'if [ "$KSI_TASK_ID" = t0 ]; then kill -9 $PPID; fi; echo hi > repo/f.txt'
    run_dir = tmp_path / "run"
    summary = ksi.run(
        _tasks(tmp_path, 4),
        agent="command",
        agent_options={"cmd": cmd},
        run_dir=run_dir,
        concurrency=1,
        executor="processes",
    )
    by_task = {r.task_id: r for r in summary.records}
    assert by_task.pop("t0").error_kind == WORKER_LOST
    assert [r.score for r in by_task.values()] == [1.0] * 3
    assert _journalled(run_dir) == [("t0", "error")] + [(f"t{i}", "scored") for i in (1, 2, 3)]


@pytest.mark.serial  # timing: as the Ctrl-C test of tests/test_job_portability.py
def test_ctrl_c_starts_no_further_job_in_a_worker(tmp_path: Path) -> None:
    marker = f"ksi-next-{uuid.uuid4().hex}"
    release = tmp_path / "release"  # once it exists, the agent does not wait (the resume)
    cmd = f"[ -e {release} ] || sleep 1000; echo hi > repo/f.txt # {marker}"
    tasks, run_dir = _tasks(tmp_path, 3), tmp_path / "run"

    def run() -> Any:
        return ksi.run(
            tasks,
            agent="command",
            agent_options={"cmd": cmd},
            run_dir=run_dir,
            concurrency=1,
            executor="processes",
        )

    def interrupt() -> None:
        wait_for_agents(marker, 1, timeout=60)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        with pytest.raises(RunInterrupted):
            run()
        assert pids_with_marker(marker) == []
        assert _attempted(run_dir) == ["t0"], "t1 never started"
        assert journal_lines(run_dir) == []
        release.touch()
        assert run().run_complete
        assert sorted(_journalled(run_dir)) == [(f"t{i}", "scored") for i in range(3)]
    finally:
        for pid in pids_with_marker(marker):
            os.kill(pid, signal.SIGKILL)
