"""Issue 11's docker escape, replayed: an agent's background process races capture.

A process started with ``env -u KSI_PROC_TAG`` is not found by the sweep
that ends each ``docker exec``, so it outlives the agent. Left running, it
swapped ``repo/<dir>`` with symlinks to host paths while capture read the
tree, and host files and KSI's own environment (``/proc/self/environ`` seen
from the host) landed in ``captured/`` and ``diff.patch``. Now the container
is halted (every process in it killed) before capture, and capture itself
never follows a swapped path. Skipped, with the reason, without Docker.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ksi.environments.docker import LABEL_RUN, DockerEnvironment
from ksi.interfaces import AttemptContext, Invocation
from ksi.models import TaskSpec
from tests.docker_support import TEST_IMAGE, needs_docker
from tests.run_helpers import journal_lines, pids_with_marker, wait_for_no_agents, write_tasks
from tests.run_helpers import ksi as ksi_cli

pytestmark = [pytest.mark.docker, needs_docker]

DOCKER = os.environ.get("KSI_DOCKER_BINARY", "").strip() or "docker"
SECRET = "host-secret-41c9e2"
KEY = "sk-ant-test-key-7d1f0b"


def _labelled(run_id: str) -> list[str]:
    res = subprocess.run(
        [DOCKER, "ps", "-aq", "--filter", f"label={LABEL_RUN}={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return res.stdout.split()


@pytest.fixture
def run_id() -> Iterator[str]:
    rid = f"test-race-{uuid.uuid4().hex[:10]}"
    yield rid
    ids = _labelled(rid)
    if ids:
        subprocess.run([DOCKER, "rm", "-f", *ids], capture_output=True)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def test_halt_kills_a_process_that_escaped_the_exec_sweep(tmp_path: Path, run_id: str) -> None:
    env = DockerEnvironment(image=TEST_IMAGE, network="none")
    task = TaskSpec(id="t1", prompt="p")
    env.prepare([task])
    workspace = tmp_path / "workspace"
    (workspace / "repo").mkdir(parents=True)
    handle = env.start(
        AttemptContext(
            run_id=run_id,
            task=task,
            attempt=1,
            attempt_dir=tmp_path,
            host_workspace=workspace,
            base_env={},
        )
    )
    marker = f"ksi-escapee-{uuid.uuid4().hex[:8]}"
    beat = workspace / "beat"
    try:
        loop = "while :; do echo x >> /workspace/beat; sleep 0.05; done"
        res = handle.exec(
            Invocation(("sh", "-c", f"env -u KSI_PROC_TAG sh -c '{loop}' {marker} &")),
            timeout=60,
            stdout_path=tmp_path / "out",
            stderr_path=tmp_path / "err",
            log_cap_bytes=100_000,
        )
        assert res.exit_code == 0, (tmp_path / "err").read_text()
        # The escape is real: the exec returned and its background process still runs.
        # (waited for, not slept on: on a loaded machine the loop may take seconds to start)
        before = _size(beat)
        deadline = time.monotonic() + 15
        while _size(beat) <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _size(beat) > before, "the background process did not outlive its exec"
        assert pids_with_marker(marker), "the escaped process is not visible on the host"
        handle.halt()
        assert pids_with_marker(marker) == [], "a process of the container survived halt()"
        after = _size(beat)
        time.sleep(0.4)
        assert _size(beat) == after, "something still writes to the workspace after halt()"
        assert (workspace / "repo").is_dir(), "halt() keeps the workspace"
        handle.halt()  # idempotent
    finally:
        handle.stop()
    assert _labelled(run_id) == []


#: Directories the swapper exchanges with a symlink, and where each symlink points.
SWAPPED = {"d1": "{host}", "d2": "{host}", "d3": "{host}", "e": "/proc/self"}
AGENT_FILES = {"own.txt": b"mine\n", "sub/more.txt": b"more\n", "environ": b"env\n"}
FILLER = 500


def _captured_files(captured: Path) -> dict[str, bytes]:
    found = {}
    for dirpath, _dirs, files in os.walk(captured):
        for name in files:
            path = Path(dirpath, name)
            if not path.is_symlink():
                found[str(path.relative_to(captured))] = path.read_bytes()
    return found


def test_a_background_swapper_gets_nothing_outside_repo_into_the_capture(
    tmp_path: Path,
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text(SECRET + "\n")
    (host / "own.txt").write_text(SECRET + "\n")  # the agent's file name, the host's content
    marker = f"ksi-swapper-{uuid.uuid4().hex[:8]}"
    # Runs as long as it is let. /proc/self, resolved on the host, is KSI itself: its environ
    # holds the API key.
    swaps = "".join(
        f"mv {d} {d}.real && ln -s {target.format(host=host)} {d} && rm {d} && mv {d}.real {d}; "
        for d, target in SWAPPED.items()
    )
    swap = f"cd /workspace/repo; while :; do {swaps}done"
    make = "".join(
        f"mkdir -p repo/{d}/sub && echo mine > repo/{d}/own.txt && "
        f"echo more > repo/{d}/sub/more.txt && echo env > repo/{d}/environ && "
        for d in SWAPPED
    )
    agent = (
        f"{make}(env -u KSI_PROC_TAG sh -c '{swap}' {marker} &) ; "
        # Files beside the swapped directories: a capture walking by path spent a while
        # between listing repo/ and entering them, time enough for the swapper.
        f"i=0; while [ $i -lt {FILLER} ]; do echo $i > repo/f$i; i=$((i+1)); done; echo done"
    )
    task = {
        "task_id": "race",
        "prompt": "p",
        "files": {"README.md": "start\n"},
        "eval": {"command": "test -f README.md", "timeout_sec": 60},
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    run_dir = tmp_path / "run"
    expected = {"README.md": b"start\n", **{f"f{i}": f"{i}\n".encode() for i in range(FILLER)}}
    for d in SWAPPED:  # wherever the halt caught a directory: in place or mid-swap
        for top in (d, f"{d}.real"):
            expected.update({f"{top}/{rel}": data for rel, data in AGENT_FILES.items()})
    try:
        res = ksi_cli(
            "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={agent}",
            "--environment", "docker", "--image", TEST_IMAGE, "--network", "none",
            "--attempts", "2", "--run-dir", str(run_dir),
            env={"ANTHROPIC_API_KEY": KEY}, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        assert wait_for_no_agents(marker, timeout=5) == [], "the swapper outlived the attempt"
        records = journal_lines(run_dir)
        assert [r["status"] for r in records] == ["scored", "scored"], records
        for n in (1, 2):
            attempt = run_dir / "attempts" / "race" / str(n)
            found = _captured_files(attempt / "captured" / "repo")
            assert [p for p, data in found.items() if SECRET.encode() in data] == []
            assert [p for p, data in found.items() if KEY.encode() in data] == []
            # Nothing but the agent's own files, each with the agent's own content.
            assert found == {p: expected.get(p) for p in found}
            assert found["README.md"] == b"start\n"
            patch = (attempt / "diff.patch").read_text()
            assert SECRET not in patch and KEY not in patch
    finally:
        for pid in pids_with_marker(marker):
            os.kill(pid, 9)
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    assert _labelled(run_id) == [], "the attempts' containers are removed"
