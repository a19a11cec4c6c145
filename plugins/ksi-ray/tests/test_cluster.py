"""The ``ray`` executor on a simulated three-node cluster: exactly once, whatever happens.

Every agent here is a shell command that leaves a marker file per execution
(its working directory, which names the node, and when it started and ended),
so the tests count how many times each attempt's body really ran, where, and
how many ran at once on each node.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest
from ksi_ray.executor import RayExecutor, job_key

import ksi
from ksi.errors import KsiWarning, UserInputError
from ksi.jobs import ComponentSpec
from ksi.rundir.journal import latest_by_attempt, read_records
from ksi.serialization import to_data
from tests.job_helpers import command_job
from tests.run_helpers import journal_lines, write_tasks

pytestmark = pytest.mark.ray_cluster

REPO = Path(__file__).resolve().parents[3]

TASKS = [
    {  # solved
        "task_id": "hello",
        "prompt": "Create hello.txt containing hi.",
        "files": {"README.md": "start\n", "test_hello.sh": "grep -q hi hello.txt\n"},
        "eval": {"command": "sh test_hello.sh", "timeout_sec": 30},
    },
    {  # scored 0
        "task_id": "wrong",
        "prompt": "Create hello.txt containing bye.",
        "files": {"check.sh": "grep -q bye hello.txt\n"},
        "eval": {"command": "sh check.sh", "timeout_sec": 30},
    },
    {  # unscored and retried: the eval times out
        "task_id": "slow-eval",
        "prompt": "anything",
        "eval": {"command": "sleep 5", "timeout_sec": 1},
    },
    {"task_id": "manual", "prompt": "no eval: unscored, final"},
]

#: Record fields that differ from one run to the next whatever runs them.
VOLATILE = {"timings", "started_at", "finished_at"}


def marking_agent(mark: Path, seconds: float) -> str:
    """A ``command`` agent: marks its execution, works ``seconds``, writes hello.txt."""
    return (
        f'm=$(mktemp {mark}/run.XXXXXX); echo "$PWD $(date +%s.%N)" > "$m"; '
        f'sleep {seconds}; echo hi > repo/hello.txt; date +%s.%N >> "$m"; echo done'
    )


@attrs.frozen
class Execution:
    """One run of an agent's body, from its marker file."""

    workdir: str
    start: float
    end: float | None

    @property
    def node(self) -> str:
        """The Ray node id (12 digits) of the scratch dir it ran in ("" when not on a node)."""
        parts = Path(self.workdir).parts
        return parts[parts.index("ksi-ray") + 1] if "ksi-ray" in parts else ""

    @property
    def key(self) -> tuple[str, int, int]:
        task, name = Path(self.workdir).parts[-3:-1]
        attempt, _, retry = name.partition("-retry")
        return (task, int(attempt), int(retry or 0))


def executions(mark: Path) -> list[Execution]:
    found = []
    for path in mark.glob("run.*"):
        lines = path.read_text().split("\n")
        if len(lines) < 2:
            continue  # created, its first line not written yet
        workdir, start = lines[0].rsplit(" ", 1)
        end = float(lines[1]) if len(lines) > 1 and lines[1] else None
        found.append(Execution(workdir, float(start), end))
    return found


def most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def keys(run_dir: Path) -> list[tuple[str, int, int]]:
    return [(r["task_id"], r["attempt"], r["try_number"]) for r in journal_lines(run_dir)]


def normalized_journal(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for line in journal_lines(run_dir):
        rec = {k: v for k, v in line.items() if k not in VOLATILE}
        if rec.get("eval"):
            rec["eval"] = {k: v for k, v in rec["eval"].items() if k != "duration_sec"}
        out.append(json.loads(json.dumps(rec).replace(str(run_dir.resolve()), "RUN")))
    return sorted(out, key=lambda r: (r["task_id"], r["attempt"], r["try_number"]))


def normalized_summary(summary: Any) -> dict[str, Any]:
    data = to_data(summary)
    for name in ("run_id", "run_dir", "wall_time_sec", "records"):
        data.pop(name, None)
    return data


def ksi_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ksi", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_markers(mark: Path, count: int, timeout: float = 90) -> list[Execution]:
    deadline = time.monotonic() + timeout
    while True:
        found = executions(mark)
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"only {len(found)} of {count} agents started"
        time.sleep(0.1)


def processes_of_run(run_id: str) -> list[int]:
    """Live processes (on any simulated node: they share this machine) tagged with the run."""
    tag = f"KSI_RUN_ID={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if tag in environ and state != "Z":
            found.append(int(entry))
    return found


def run_id_of(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["run_id"])


# -- the tests ----------------------------------------------------------------------------


def test_each_attempt_runs_once_on_the_nodes_and_the_run_equals_a_local_one(
    sim_cluster: Any, tmp_path: Path
) -> None:
    mark = tmp_path / "mark"
    mark.mkdir()
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS)
    common: dict[str, Any] = {
        "agent": "command",
        "agent_options": {"cmd": marking_agent(mark, 1)},
        "attempts": 3,
        "retries": 1,
        "concurrency": 6,
    }
    on_ray = ksi.run(
        tasks,
        run_dir=tmp_path / "ray",
        executor="ray",
        executor_options={"address": sim_cluster.address},
        **common,
    )
    local = ksi.run(tasks, run_dir=tmp_path / "local", **common)

    recorded = keys(tmp_path / "ray")
    # 4 tasks x 3 attempts, plus one retry of each slow-eval attempt.
    assert len(recorded) == 15 and len(set(recorded)) == 15
    remote = [e for e in executions(mark) if e.node]
    assert Counter(e.key for e in remote) == Counter(recorded), "each body ran exactly once"
    by_node: dict[str, list[tuple[float, float]]] = {}
    for e in remote:
        assert e.end is not None
        by_node.setdefault(e.node, []).append((e.start, e.end))
    assert len(by_node) == 3, "the attempts spread over the three nodes"
    assert max(most_at_once(spans) for spans in by_node.values()) <= 2, "2 slots per node"

    assert normalized_journal(tmp_path / "ray") == normalized_journal(tmp_path / "local")
    assert normalized_summary(on_ray) == normalized_summary(local)
    assert on_ray.run_complete
    # Attempt directories came back whole: the logs and the captured repo are on the driver.
    attempt = tmp_path / "ray" / "attempts" / "hello" / "1"
    assert (attempt / "captured" / "repo" / "hello.txt").read_text() == "hi\n"
    assert (attempt / "agent.stdout.log").read_text() == "done\n"


def test_a_dead_node_is_an_error_naming_it_and_retries_run_elsewhere(
    sim_cluster: Any, tmp_path: Path
) -> None:
    mark = tmp_path / "mark"
    mark.mkdir()
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": f"t{i}", "prompt": "p", "eval": {"command": "true"}} for i in range(6)],
    )
    run_dir = tmp_path / "run"
    args = [
        "run",
        str(tasks),
        "--agent",
        "command",
        "--agent-option",
        f"cmd={marking_agent(mark, 6)}",
        "--concurrency",
        "6",
        "--executor",
        "ray",
        "--executor-option",
        f"address={sim_cluster.address}",
        "--run-dir",
        str(run_dir),
    ]
    proc = ksi_cli(*args)
    started = wait_for_markers(mark, 6)
    dead = started[0].node
    victim = next(n.node_id for n in sim_cluster.workers if n.node_id.startswith(dead))
    resources = sim_cluster.kill(victim)
    try:
        _out, err = proc.communicate(timeout=180)
        # --retries 0: the two attempts of the dead node stay errors; the run is incomplete.
        errors = [r for r in journal_lines(run_dir) if r["status"] == "error"]
        on_dead = {e.key for e in started if e.node == dead}
        assert {(r["task_id"], r["attempt"], r["try_number"]) for r in errors} == on_dead, err
        for rec in errors:
            assert dead in rec["error"] and "died" in rec["error"], rec["error"]
        assert len(keys(run_dir)) == 6
        assert json.loads((run_dir / "run.json").read_text())["run_complete"] is False

        resumed = ksi_cli("run", "--resume", "--run-dir", str(run_dir), "--retries", "1")
        _out, err = resumed.communicate(timeout=180)
        assert resumed.returncode == 0, err
        recorded = keys(run_dir)
        assert len(recorded) == len(set(recorded)) == 8, "no (task, attempt, try) twice"
        latest = latest_by_attempt(read_records(run_dir / "journal.jsonl"))
        assert all(r.status == "scored" and r.score == 1.0 for r in latest.values())
        retried = [e for e in executions(mark) if e.key[2] == 1]
        assert len(retried) == 2 and all(e.node != dead for e in retried)
        assert json.loads((run_dir / "run.json").read_text())["run_complete"] is True
        assert not processes_of_run(run_id_of(run_dir)), "the dead node's agents were ended"
    finally:
        proc.kill()
        sim_cluster.workers.append(sim_cluster.add(resources))
        sim_cluster.cluster.wait_for_nodes()


def test_a_killed_driver_resumes_without_duplicates(sim_cluster: Any, tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    mark.mkdir()
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": f"t{i}", "prompt": "p", "eval": {"command": "true"}} for i in range(4)],
    )
    run_dir = tmp_path / "run"
    proc = ksi_cli(
        "run",
        str(tasks),
        "--agent",
        "command",
        "--agent-option",
        f"cmd={marking_agent(mark, 4)}",
        "--attempts",
        "3",
        "--concurrency",
        "4",
        "--executor",
        "ray",
        "--executor-option",
        f"address={sim_cluster.address}",
        "--run-dir",
        str(run_dir),
    )
    # The first four finish, the next ones are running: then the driver dies.
    wait_for_markers(mark, 6)
    deadline = time.monotonic() + 60
    while len(keys(run_dir)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = keys(run_dir)
    assert 0 < len(before) < 12

    resumed = ksi_cli("run", "--resume", "--run-dir", str(run_dir))
    _out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    recorded = keys(run_dir)
    assert len(recorded) == len(set(recorded)) == 12, "each attempt recorded once"
    assert recorded[: len(before)] == before, "the finished ones were not run again"
    assert json.loads((run_dir / "run.json").read_text())["run_complete"] is True
    assert not processes_of_run(run_id_of(run_dir)), "the killed session's agents were ended"


def test_ctrl_c_leaves_no_process_of_the_run_on_any_node(sim_cluster: Any, tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    mark.mkdir()
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": f"t{i}", "prompt": "p", "eval": {"command": "true"}} for i in range(6)],
    )
    run_dir = tmp_path / "run"
    proc = ksi_cli(
        "run",
        str(tasks),
        "--agent",
        "command",
        "--agent-option",
        f"cmd={marking_agent(mark, 120)}",
        "--concurrency",
        "6",
        "--executor",
        "ray",
        "--executor-option",
        f"address={sim_cluster.address}",
        "--run-dir",
        str(run_dir),
    )
    started = wait_for_markers(mark, 6)
    assert len({e.node for e in started}) == 3
    run_id = run_id_of(run_dir)
    assert processes_of_run(run_id), "the agents run with the run's id"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert processes_of_run(run_id) == []
    assert keys(run_dir) == [], "the cancelled attempts' late results were dropped"
    assert all(e.end is None for e in executions(mark)), "no agent finished its work"


def test_docker_marked_attempts_run_only_on_the_marked_node(
    sim_cluster: Any, tmp_path: Path
) -> None:
    mark = tmp_path / "mark"
    mark.mkdir()
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": f"t{i}", "prompt": "p", "eval": {"command": "true"}} for i in range(5)],
    )
    marked = {
        n.node_id[:12]
        for n in sim_cluster.workers
        if "fakedocker" in sim_cluster.resources[n.node_id]
    }
    assert len(marked) == 1
    summary = ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": marking_agent(mark, 1)},
        run_dir=tmp_path / "run",
        concurrency=6,
        executor="ray",
        executor_options={"address": sim_cluster.address, "require_resource": "fakedocker"},
    )
    assert summary.solved_tasks == 5
    ran = executions(mark)
    assert len(ran) == 5 and {e.node for e in ran} == marked
    assert most_at_once([(e.start, e.end or e.start) for e in ran]) <= 2

    with pytest.raises(UserInputError, match="resource 'gpu-box'"):
        ksi.run(
            tasks,
            agent="command",
            agent_options={"cmd": "true"},
            run_dir=tmp_path / "none",
            executor="ray",
            executor_options={"address": sim_cluster.address, "require_resource": "gpu-box"},
        )


@pytest.mark.parametrize("shared", [False, True], ids=["shipped", "shared-run-dir"])
def test_large_starting_files_and_captured_repos_round_trip_byte_identical(
    sim_cluster: Any, tmp_path: Path, shared: bool
) -> None:
    start = tmp_path / "start"
    (start / "data" / "deep").mkdir(parents=True)
    big = os.urandom(24 * 1024 * 1024)
    (start / "data" / "big.bin").write_bytes(big)
    (start / "data" / "deep" / "note.txt").write_text("ünïcode\n")
    (start / "run.sh").write_text("#!/bin/sh\necho ok\n")
    (start / "run.sh").chmod(0o755)
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": "big",
                "prompt": "copy it",
                "workspace_dir": str(start),
                "eval": {"command": "cmp data/big.bin copy.bin"},
            }
        ],
    )
    summary = ksi.run(
        tasks,
        agent="command",
        agent_options={
            "cmd": "cp repo/data/big.bin repo/copy.bin && head -c 3000000 "
            "repo/data/big.bin > repo/part.bin"
        },
        run_dir=tmp_path / "run",
        capture_max_file_bytes=64 * 1024 * 1024,
        executor="ray",
        executor_options={"address": sim_cluster.address, "shared_run_dir": str(shared)},
    )
    assert summary.solved_tasks == 1
    captured = tmp_path / "run" / "attempts" / "big" / "1" / "captured" / "repo"
    assert (captured / "copy.bin").read_bytes() == big
    assert (captured / "data" / "big.bin").read_bytes() == big
    assert (captured / "part.bin").read_bytes() == big[:3000000]
    assert (captured / "data" / "deep" / "note.txt").read_text() == "ünïcode\n"
    assert os.access(captured / "run.sh", os.X_OK)


def test_starting_files_go_to_the_object_store_once_per_task(
    sim_cluster: Any, tmp_path: Path
) -> None:
    executor = RayExecutor(address=sim_cluster.address)
    executor.start(3)
    try:
        jobs = [
            command_job(tmp_path / "run", "echo hi > repo/hello.txt", task_id=f"t{t}", attempt=a)
            for t in range(2)
            for a in (1, 2, 3)
        ]
        jobs = [attrs.evolve(j, session_id=jobs[0].session_id) for j in jobs]
        for job in jobs[:3]:
            executor.submit(job)
        outcomes = list(executor.as_completed())
        for job in jobs[3:]:
            executor.submit(job)
        outcomes += list(executor.as_completed())
    finally:
        executor.shutdown()
    assert sorted(o.job.key for o in outcomes) == sorted(j.key for j in jobs)
    assert all(o.record is not None and o.record.score == 1.0 for o in outcomes)
    assert executor.seeds_put == 2


def test_credentials_travel_in_the_job_and_are_written_nowhere(
    sim_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-" + os.urandom(12).hex()
    # Set on the driver only: the nodes were started without it.
    monkeypatch.setenv("KSI_RAY_TEST_TOKEN", secret)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"task_id": "s", "prompt": "p"}])
    ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": 'printf %s "$KSI_RAY_TEST_TOKEN" | sha256sum > repo/got'},
        agent_env=["KSI_RAY_TEST_TOKEN"],
        run_dir=tmp_path / "run",
        executor="ray",
        executor_options={"address": sim_cluster.address},
    )
    got = tmp_path / "run" / "attempts" / "s" / "1" / "captured" / "repo" / "got"
    digest = hashlib.sha256(secret.encode()).hexdigest()
    assert got.read_text().split()[0] == digest, "the agent on the node had the driver's variable"
    session_dir = Path(sim_cluster.cluster.head_node.get_session_dir_path())
    for root in (tmp_path / "run", session_dir):
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"


def test_a_node_without_the_agent_cli_is_refused_with_a_warning(
    sim_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = REPO / "tests" / "fakes"
    monkeypatch.setenv("PATH", f"{fakes}{os.pathsep}{os.environ['PATH']}")
    plain_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != str(fakes))
    extra = sim_cluster.add({"ksi_slot": 2}, env={"PATH": plain_path})
    sim_cluster.cluster.wait_for_nodes()
    job = attrs.evolve(command_job(tmp_path / "run", "true"), agent=ComponentSpec("agent", "aider"))
    executor = RayExecutor(address=sim_cluster.address)
    executor.start(2)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            executor._begin(job)
        used = set(executor._nodes)
    finally:
        executor.shutdown()
        sim_cluster.cluster.remove_node(extra)
    messages = [str(w.message) for w in caught if issubclass(w.category, KsiWarning)]
    assert len(messages) == 1, messages
    assert extra.node_id[:12] in messages[0] and "aider" in messages[0], messages[0]
    assert "not on its PATH" in messages[0]
    assert extra.node_id not in used
    assert used == {n.node_id for n in sim_cluster.workers}, (caught, sim_cluster.resources)


@pytest.mark.docker
def test_a_real_docker_attempt_runs_on_the_docker_node(sim_cluster: Any, tmp_path: Path) -> None:
    from tests.docker_support import TEST_IMAGE, docker_unavailable

    why = docker_unavailable()
    if why:
        if os.environ.get("KSI_REQUIRE_RAY") == "1":
            raise AssertionError(f"KSI_REQUIRE_RAY=1 needs Docker for this test: {why}")
        pytest.skip(why)
    job = attrs.evolve(
        command_job(
            tmp_path / "run", "echo hi > repo/hello.txt", eval_command="grep -q hi hello.txt"
        ),
        environment=ComponentSpec(
            "environment", "docker", {"image": TEST_IMAGE, "network": "none"}
        ),
    )
    executor = RayExecutor(address=sim_cluster.address, docker_resource="fakedocker")
    executor.start(2)
    try:
        executor.submit(job)
        (outcome,) = list(executor.as_completed())
    finally:
        executor.shutdown()
    assert outcome.record is not None, outcome.error
    assert (outcome.record.environment, outcome.record.score) == ("docker", 1.0)
    docker_node = next(
        n.node_id for n in sim_cluster.workers if "fakedocker" in sim_cluster.resources[n.node_id]
    )
    assert executor.placements == [(job_key(job), docker_node)]
