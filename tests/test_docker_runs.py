"""Whole ``ksi run``s in real containers, including runs killed with SIGKILL mid-attempt.

What a user relies on: the agent really runs in the image, grading happens
on the host, nothing the agent wrote is left root-owned, and a killed run
leaves containers that ``ksi cleanup`` (or simply resuming the run) removes,
down to zero. Skipped, with the reason, without a Docker engine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

import ksi
from ksi.environments.docker import DockerEnvironment
from ksi.models import TaskSpec
from ksi.task_parts import Runtime
from tests.docker_support import TEST_IMAGE, needs_docker
from tests.run_helpers import ROOT, journal_lines, write_tasks
from tests.run_helpers import ksi as ksi_cli
from tests.test_sandbox_network import Server

pytestmark = [pytest.mark.docker, needs_docker]

DOCKER = os.environ.get("KSI_DOCKER_BINARY", "").strip() or "docker"
RUN_OPTIONS = ("--environment", "docker", "--image", TEST_IMAGE, "--network", "none")
TASK = {
    "task_id": "hello",
    "prompt": "Create hello.txt containing hi.",
    "files": {"README.md": "start\n"},
    # Runs on the host: the host has /etc/os-release, the test image does not.
    "eval": {"command": "grep -qx hi hello.txt && test -e /etc/os-release", "timeout_sec": 60},
}


def _labelled(run_id: str) -> list[str]:
    res = subprocess.run(
        [DOCKER, "ps", "-aq", "--filter", f"label=ksi.run={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return res.stdout.split()


def _networks(run_id: str) -> list[str]:
    res = subprocess.run(
        [DOCKER, "network", "ls", "-q", "--filter", f"label=ksi.run={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return res.stdout.split()


def _run_id(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["run_id"])


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    """The run directory; any container or network its run left is removed after the test."""
    path = tmp_path / "run"
    yield path
    if (path / "run.json").exists():
        ids = _labelled(_run_id(path))
        if ids:
            subprocess.run([DOCKER, "rm", "-f", *ids], capture_output=True)
        nets = _networks(_run_id(path))
        if nets:
            subprocess.run([DOCKER, "network", "rm", *nets], capture_output=True)


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_the_agent_runs_in_the_container_and_is_graded_on_the_host(
    tmp_path: Path, run_dir: Path, executor: str
) -> None:
    """Also from worker processes: each resolves the environment and starts its containers."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK])
    cmd = (
        "echo hi > repo/hello.txt; mkdir -p repo/made/deep; echo x > repo/made/deep/f; "
        "test -e /etc/os-release || echo in-image > repo/where.txt; pwd"
    )
    res = ksi_cli(
        "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={cmd}",
        *RUN_OPTIONS, "--run-dir", str(run_dir), "--executor", executor,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    [record] = journal_lines(run_dir)
    assert (record["status"], record["score"], record["environment"]) == ("scored", 1.0, "docker")
    attempt = run_dir / "attempts" / "hello" / "1"
    assert (attempt / "agent.stdout.log").read_text().strip() == "/workspace"
    captured = attempt / "captured" / "repo"
    assert (captured / "where.txt").read_text() == "in-image\n"
    for path in [captured / "hello.txt", captured / "made", captured / "made" / "deep" / "f"]:
        assert path.stat().st_uid == os.getuid(), f"{path} is not owned by the host user"
    assert not (attempt / "workspace").exists(), "the workspace is wiped"
    assert _labelled(_run_id(run_dir)) == []


def test_task_metadata_sets_the_containers_cpus_memory_and_user(tmp_path: Path) -> None:
    """A task source's ``cpus``/``memory_mb``/``docker_user`` win over the run's options."""
    repo = tmp_path / "seed"
    repo.mkdir()
    task = TaskSpec(
        id="limits",
        prompt="report",
        metadata={
            "repo_path": str(repo),
            "eval_command": "true",
            "cpus": 0.5,
            "memory_mb": 64,
            "docker_user": "4321:4321",
        },
    )
    # cgroup v2 files first, then v1.
    cmd = (
        "id -u; cat /sys/fs/cgroup/memory.max 2>/dev/null "
        "|| cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
        "cut -d' ' -f1 /sys/fs/cgroup/cpu.max 2>/dev/null "
        "|| cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us"
    )
    env = DockerEnvironment(image=TEST_IMAGE, network="none", cpus=2.0, memory="1g")
    summary = ksi.run(
        [task],
        agent="command",
        agent_options={"cmd": cmd},
        environment=env,
        run_dir=tmp_path / "run",
    )
    [record] = summary.records
    assert record.status == "scored", record
    out = (tmp_path / "run" / "attempts" / "limits" / "1" / "agent.stdout.log").read_text()
    assert out.split() == ["4321", str(64 * 1024 * 1024), "50000"]


def test_bad_task_resources_stop_the_run_before_any_attempt(tmp_path: Path) -> None:
    # The bad value is refused when the task is built, so no run (and no attempt) starts.
    with pytest.raises(ksi.errors.UserInputError, match=r"task 'bad': metadata memory_mb"):
        task = TaskSpec(
            id="bad", prompt="p", metadata={"eval_command": "true", "memory_mb": "lots"}
        )
        ksi.run(
            [task],
            agent="command",
            agent_options={"cmd": "true"},
            environment=DockerEnvironment(image=TEST_IMAGE),
            run_dir=tmp_path / "run",
        )


def test_by_default_agents_reach_their_declared_endpoint_and_nothing_else(
    tmp_path: Path, run_dir: Path
) -> None:
    """The default network through ``ksi run``, two attempts at once in worker processes:
    the mock model (declared) answers, another local server is refused, with the reason in
    the agent's log, and the run's network goes with the run."""
    model, other = Server("model").start(), Server("other").start()
    fetch = (
        "p=${HTTP_PROXY#http://}; get() { printf "
        '"GET http://127.0.0.1:$1/$KSI_TASK_ID HTTP/1.0\\r\\n\\r\\n" '
        '| nc -w 5 "${p%:*}" "${p##*:}"; }; '
        f"get {model.port} > repo/model.txt; get {other.port} > repo/other.txt"
    )
    graded = (
        "grep -q served:model model.txt && grep -q '403 Forbidden' other.txt "
        "&& ! grep -q served:other other.txt"
    )
    both = [
        {"task_id": t, "prompt": "p", "files": {"a": "\n"}, "eval": {"command": graded}}
        for t in ("one", "two")
    ]
    tasks = write_tasks(tmp_path / "tasks.jsonl", both)
    try:
        res = ksi_cli(
            "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={fetch}",
            "--agent-option", f"endpoints=127.0.0.1:{model.port}",
            "--environment", "docker", "--image", TEST_IMAGE, "--run-dir", str(run_dir),
            "--executor", "processes", "--concurrency", "2",
        )  # fmt: skip
    finally:
        for server in (model, other):
            assert server.httpd is not None
            server.httpd.shutdown()
            server.httpd.server_close()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning:" not in res.stderr, res.stderr
    records = journal_lines(run_dir)
    scores = sorted((r["task_id"], r["score"]) for r in records)
    assert scores == [("one", 1.0), ("two", 1.0)], [(r["error"], r["eval"]) for r in records]
    assert sorted(model.paths) == ["/one", "/two"] and other.paths == []
    log = (run_dir / "attempts" / "one" / "1" / "agent.stderr.log").read_text()
    assert f"docker: refused connection to 127.0.0.1:{other.port}" in log, log
    run_id = _run_id(run_dir)
    assert _labelled(run_id) == [] and _networks(run_id) == []


def test_network_bridge_is_warned_about_and_gives_the_whole_network(
    tmp_path: Path, run_dir: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK])
    res = ksi_cli(
        "run", str(tasks), "--agent", "command", "--agent-option", "cmd=echo hi > repo/hello.txt",
        "--environment", "docker", "--image", TEST_IMAGE, "--network", "bridge",
        "--run-dir", str(run_dir),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning: docker environment: network=bridge:" in res.stderr, res.stderr
    assert "get the whole network" in res.stderr
    assert _networks(_run_id(run_dir)) == []  # no internal network for it


def test_ksi_cleanup_removes_the_network_of_a_run_killed_with_sigkill(
    tmp_path: Path, run_dir: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK])
    options = ("--environment", "docker", "--image", TEST_IMAGE)  # network=endpoints
    proc = _start_run(tasks, run_dir, "1000", options=options)
    run_id = _kill_mid_attempt(proc, run_dir, containers=1)
    assert len(_networks(run_id)) == 1, "the killed run should have left its network"
    res = ksi_cli("cleanup", str(run_dir))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "removed 2 " in res.stdout, res.stdout  # its container and its network
    assert _labelled(run_id) == [] and _networks(run_id) == []


def _start_run(
    tasks: Path, run_dir: Path, sleep: str, *extra: str, options: Sequence[str] = RUN_OPTIONS
) -> subprocess.Popen[str]:
    cmd = 'sleep "$KSI_TEST_SLEEP"; echo hi > repo/hello.txt'
    argv = [
        sys.executable, "-m", "ksi", "run", str(tasks), "--agent", "command",
        "--agent-option", f"cmd={cmd}", "--agent-env", "KSI_TEST_SLEEP",
        *options, "--run-dir", str(run_dir), *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, "KSI_TEST_SLEEP": sleep},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _kill_mid_attempt(proc: subprocess.Popen[str], run_dir: Path, containers: int) -> str:
    """Wait until ``containers`` attempt containers run, then SIGKILL ``ksi run``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if (run_dir / "run.json").exists() and len(_labelled(_run_id(run_dir))) >= containers:
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"ksi run ended early: {proc.communicate()[0]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    run_id = _run_id(run_dir)
    assert len(_labelled(run_id)) == containers, "the killed run should have left its containers"
    return run_id


def test_ksi_cleanup_removes_the_containers_of_a_run_killed_with_sigkill(
    tmp_path: Path, run_dir: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK])
    proc = _start_run(tasks, run_dir, "1000")
    run_id = _kill_mid_attempt(proc, run_dir, containers=1)
    res = ksi_cli("cleanup", str(run_dir))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "removed 1 " in res.stdout, res.stdout
    assert _labelled(run_id) == []
    res = ksi_cli("cleanup", str(run_dir))
    assert "removed 0 " in res.stdout, res.stdout


def test_resuming_a_killed_run_removes_its_leftovers_and_finishes_it(
    tmp_path: Path, run_dir: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK, {**TASK, "task_id": "second"}])
    proc = _start_run(tasks, run_dir, "1000", "--concurrency", "2")
    run_id = _kill_mid_attempt(proc, run_dir, containers=2)
    leftovers = set(_labelled(run_id))

    resumed = _start_run(tasks, run_dir, "0", "--concurrency", "2")
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out
    records: list[dict[str, Any]] = journal_lines(run_dir)
    keys = sorted((r["task_id"], r["attempt"]) for r in records)
    assert keys == [("hello", 1), ("second", 1)], keys
    assert all(r["status"] == "scored" and r["score"] == 1.0 for r in records), records
    assert json.loads((run_dir / "run.json").read_text())["run_complete"] is True
    assert _labelled(run_id) == []
    still_there = subprocess.run(
        [DOCKER, "ps", "-aq", "--no-trunc"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert not leftovers & {c for c in still_there for x in leftovers if c.startswith(x)}


def test_the_engine_api_and_the_cli_start_identical_containers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both start paths (API socket for docker, CLI for podman & co.) apply the same settings."""
    from ksi.interfaces import AttemptContext

    monkeypatch.delenv("KSI_DOCKER_API", raising=False)
    if DOCKER != "docker":
        pytest.skip(f"the Engine API path is for docker itself, not {DOCKER}")

    task = TaskSpec(id="same", metadata={"cpus": 0.5, "memory_mb": 64})
    seen = {}
    for use_api in (True, False):
        env = DockerEnvironment(image=TEST_IMAGE, network="none", use_engine_api=use_api)
        assert (env._engine_api() is not None) is use_api
        workspace = tmp_path / str(use_api) / "workspace"
        workspace.mkdir(parents=True)
        ctx = AttemptContext(f"same-{use_api}", task, 1, workspace.parent, workspace, {})
        handle = env.start(ctx)
        try:
            res = subprocess.run(
                [DOCKER, "inspect", handle.container], capture_output=True, text=True, check=True
            )
        finally:
            handle.stop()
        assert (
            subprocess.run([DOCKER, "inspect", handle.container], capture_output=True).returncode
            != 0
        ), "stop() returned with the container still there"
        [info] = json.loads(res.stdout)
        host = info["HostConfig"]
        seen[use_api] = {
            "caps": host["CapDrop"],
            "security": host["SecurityOpt"],
            "pids": host["PidsLimit"],
            "network": host["NetworkMode"],
            "init": host["Init"],
            "memory": host["Memory"],
            "cpus": host["NanoCpus"],
            "user": info["Config"]["User"],
            "workdir": info["Config"]["WorkingDir"],
            "cmd": [*info["Config"]["Entrypoint"], *info["Config"]["Cmd"]],
            "mounts": [(m["Type"], m["Destination"]) for m in info["Mounts"]],
            "labels": sorted(k for k in info["Config"]["Labels"] if k.startswith("ksi.")),
        }
    assert seen[True] == seen[False]
    assert seen[True]["caps"] == ["ALL"] and seen[True]["memory"] == 64 * 1024 * 1024


def _engine_config(container: str) -> dict[str, Any]:
    """``docker inspect``'s Config and HostConfig, minus what differs between any two containers.

    Left out: the hostname (the container's id), unset settings (the CLI sends
    ``[]``/``{}`` where the API body sends nothing), and the CLI's spelling of
    the default restart policy (``no``, the API's empty name).
    """
    res = subprocess.run([DOCKER, "inspect", container], capture_output=True, text=True, check=True)
    [info] = json.loads(res.stdout)
    config = {k: v for k, v in info["Config"].items() if k != "Hostname"}
    host = {k: v for k, v in info["HostConfig"].items() if v not in (None, [], {})}
    if host.get("RestartPolicy", {}).get("Name") == "":
        host["RestartPolicy"] = {**host["RestartPolicy"], "Name": "no"}
    return {"Config": config, "HostConfig": host}


@pytest.mark.parametrize(
    ("options", "runtime"),
    [
        ({"network": "none"}, Runtime(cpus=0.5, memory_mb=64)),
        (
            {"network": "bridge", "user": "image", "init": False, "pids_limit": 64},
            Runtime(cpus=1.5, memory_mb=256, capabilities="default"),
        ),
    ],
)
def test_one_container_spec_gives_the_same_container_by_cli_and_by_engine_api(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, Any],
    runtime: Runtime,
) -> None:
    """The hardening is declared once: the engine's whole config of both containers agrees."""
    from ksi.environments.engine_api import engine_api_for
    from ksi.interfaces import AttemptContext

    monkeypatch.delenv("KSI_DOCKER_API", raising=False)
    if DOCKER != "docker":
        pytest.skip(f"the Engine API path is for docker itself, not {DOCKER}")
    env = DockerEnvironment(image=TEST_IMAGE, **options)
    api = engine_api_for(env._resolve())
    assert api is not None, "the CLI's own daemon socket is not usable"
    task = TaskSpec(id="spec", runtime=runtime)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    ctx = AttemptContext(f"spec-{os.getpid()}", task, 1, tmp_path, workspace, {})
    spec = env.container_spec(ctx, env.settings_for(task), env._resolve())
    by_cli = attrs.evolve(spec, name=spec.name + "-cli")
    by_api = attrs.evolve(spec, name=spec.name + "-api")
    body = by_api.api_body()
    assert body is not None
    try:
        subprocess.run([DOCKER, *by_cli.cli_args()], capture_output=True, check=True)
        api.run_detached(by_api.name, body)
        cli_config, api_config = _engine_config(by_cli.name), _engine_config(by_api.name)
    finally:
        subprocess.run([DOCKER, "rm", "-f", by_cli.name, by_api.name], capture_output=True)
    assert cli_config == api_config
    host = cli_config["HostConfig"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["PidsLimit"] == options.get("pids_limit", 2048)
    assert host.get("CapDrop") == (None if runtime.capabilities == "default" else ["ALL"])
    assert host["Memory"] == (runtime.memory_mb or 0) * 1024 * 1024
    assert host["NanoCpus"] == int((runtime.cpus or 0) * 1e9)
    assert host["Init"] is options.get("init", True)


def test_a_run_that_cannot_get_its_image_leaves_no_run_directory(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "a", "prompt": "p", "eval": {"command": "true"}}\n')
    result = subprocess.run(
        [sys.executable, "-m", "ksi", "run", str(tasks), "--agent", "nop",
         "--environment", "docker", "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "no image for task 'a'" in result.stderr and "--image" in result.stderr
    assert not (tmp_path / "run").exists()
