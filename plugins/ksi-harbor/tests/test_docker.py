"""Harbor tasks in real containers: KSI's docker environment builds the task's Dockerfile,
the oracle's command runs solution/solve.sh, and the harbor evaluator grades the container.

Needs a Docker engine and the locally built ``ksi-test/busybox`` image
(``.ci/build-test-images.sh`` in the KSI checkout makes it without a registry).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harbor_helpers import make_task
from ksi_harbor.evaluator import HarborEvaluator
from ksi_harbor.source import HarborTaskSource

from ksi.interfaces import AttemptContext, EnvironmentHandle, Invocation
from ksi.models import TaskSpec

BASE_IMAGE = "ksi-test/busybox:latest"
BUILD_SCRIPT = Path(__file__).resolve().parents[3] / ".ci" / "build-test-images.sh"

# Harbor runs `bash /tests/test.sh`; the busybox test image has sh only, so the task's own
# Dockerfile provides a `bash` that runs sh, as a real task's image would provide bash.
DOCKERFILE = f"""\
FROM {BASE_IMAGE}
RUN printf '#!/bin/sh\\nexec sh "$@"\\n' > /bin/bash && chmod +x /bin/bash
WORKDIR /app
RUN echo seed > /app/seed.txt
"""
TEST_SH = """\
#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ] && [ -f /app/seed.txt ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo '{"reward": 0, "hello_exists": 0}' > /logs/verifier/reward.json
fi
"""


@functools.cache
def docker_unavailable() -> str | None:
    if shutil.which("docker") is None:
        return "docker CLI not installed"
    info = subprocess.run(["docker", "version"], capture_output=True, text=True)
    if info.returncode != 0:
        return f"docker engine not reachable: {info.stderr.strip()[-200:]}"
    probe = subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True)
    if probe.returncode != 0:
        if not BUILD_SCRIPT.is_file():
            return f"{BASE_IMAGE} missing and {BUILD_SCRIPT} not found to build it"
        built = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True)
        if built.returncode != 0:
            return f"{BASE_IMAGE} missing and {BUILD_SCRIPT} failed: {built.stderr[-300:]}"
    return None


pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        docker_unavailable() is not None, reason=f"needs Docker: {docker_unavailable()}"
    ),
]


@pytest.fixture
def task(tmp_path: Path) -> TaskSpec:
    task_dir = make_task(tmp_path / "tasks", dockerfile=DOCKERFILE, test_sh=TEST_SH)
    [spec] = HarborTaskSource().load(task_dir)
    return spec


@pytest.fixture
def handle(task: TaskSpec, tmp_path: Path) -> Iterator[EnvironmentHandle]:
    with _started(task, tmp_path) as h:
        yield h


@contextlib.contextmanager
def _started(task: TaskSpec, tmp_path: Path) -> Iterator[EnvironmentHandle]:
    from ksi.environments.docker import DockerEnvironment

    # No user option: the task's metadata makes it run as the image's user (root here).
    environment = DockerEnvironment(network="none")
    environment.prepare([task])
    workspace = tmp_path / "workspace"
    (workspace / "repo").mkdir(parents=True)
    ctx = AttemptContext(
        run_id=f"harbor-test-{tmp_path.name}",
        task=task,
        attempt=1,
        attempt_dir=tmp_path,
        host_workspace=workspace,
        base_env={},
    )
    h = environment.start(ctx)
    try:
        yield h
    finally:
        h.stop()


def run(handle: EnvironmentHandle, script: str, tmp_path: Path, cwd: str) -> int | None:
    res = handle.exec(
        Invocation(argv=("sh", "-c", script), cwd=cwd),
        timeout=120,
        stdout_path=tmp_path / "agent-out.txt",
        stderr_path=tmp_path / "agent-err.txt",
        log_cap_bytes=1 << 20,
    )
    return res.exit_code


def test_oracle_solves_and_the_verifier_scores_one(
    task: TaskSpec, handle: EnvironmentHandle, tmp_path: Path
) -> None:
    # The oracle runs its command from repo/ in the workspace; the command finds /app itself.
    code = run(handle, task.metadata["solution"]["command"], tmp_path, cwd="repo")
    assert code == 0, (tmp_path / "agent-err.txt").read_text()
    result = HarborEvaluator().grade(
        task, handle.host_workspace / "repo", env=handle, log_dir=tmp_path / "eval"
    )
    assert (result.status, result.native_score) == ("scored", 1.0), result
    assert (tmp_path / "eval" / "verifier" / "reward.txt").read_text().strip() == "1"


def test_an_agent_that_did_nothing_and_planted_a_reward_scores_zero(
    task: TaskSpec, handle: EnvironmentHandle, tmp_path: Path
) -> None:
    plant = "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"
    assert run(handle, plant, tmp_path, cwd="/app") == 0
    result = HarborEvaluator().grade(
        task, handle.host_workspace / "repo", env=handle, log_dir=tmp_path / "eval"
    )
    assert (result.status, result.native_score) == ("scored", 0.0), result
    assert result.details["rewards"] == {"reward": 0.0, "hello_exists": 0.0}


def test_ksi_run_with_a_real_agent_working_in_app_scores_one(tmp_path: Path) -> None:
    """The whole path through the entry point: `ksi run --task-source harbor`, no extra options.

    The agent is the ``command`` agent (not the oracle): it starts in the task's
    WORKDIR (/app, from ``agent_workdir``), as the image's user, and writes the
    answer there; the harbor evaluator grades that container.
    """
    tasks = tmp_path / "tasks"
    make_task(tasks, dockerfile=DOCKERFILE, test_sh=TEST_SH)
    make_task(tasks, "left-undone", dockerfile=DOCKERFILE, test_sh=TEST_SH)
    run_dir = tmp_path / "run"
    cmd = (
        '[ "$(pwd)" = /app ] || exit 3; [ "$KSI_TASK_ID" = left-undone ] && exit 0; '
        'test -f seed.txt && printf "Hello, world!" > hello.txt'
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ksi",
            "run",
            str(tasks),
            "--task-source",
            "harbor",
            "--agent",
            "command",
            "--agent-option",
            f"cmd={cmd}",
            "--environment",
            "docker",
            "--network",
            "none",
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "KSI_LOAD_PLUGINS": "ksi-harbor"},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    lines = (run_dir / "journal.jsonl").read_text().splitlines()
    records = {r["task_id"]: r for r in map(json.loads, lines)}
    done, undone = records["hello-world"], records["left-undone"]
    assert (done["status"], done["score"], done["evaluator"]) == ("scored", 1.0, "harbor")
    assert done["eval"]["eval_workdir"] == "/app"
    assert (undone["status"], undone["score"]) == ("scored", 0.0)
    assert undone["eval"]["details"]["rewards"] == {"reward": 0.0, "hello_exists": 0.0}
    # The container was graded, not repo/ (the work is in /app): no "changed nothing" warning.
    assert "changed nothing in repo/" not in res.stdout, res.stdout
    assert done["repo_changed"] is None and undone["repo_changed"] is None
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=ksi.run={run_id}"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.split() == []


def test_a_reward_the_agents_code_links_to_a_host_file_is_no_reward(
    tmp_path: Path,
) -> None:
    """test.sh runs the agent's program; it makes the reward a link to a host path holding 1.

    `docker cp` brings the link out as a link; followed on the host it would
    score 1.0 and put the host file's first characters into the record.
    """
    host = tmp_path / "host" / "reward"
    host.parent.mkdir()
    host.write_text("1\nhost-secret-c0ffee\n")
    runs_agent_code = (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if sh /app/solution.sh; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    task_dir = make_task(tmp_path / "tasks", dockerfile=DOCKERFILE, test_sh=runs_agent_code)
    [task] = HarborTaskSource().load(task_dir)
    with _started(task, tmp_path) as handle:
        plant = f"printf 'ln -sf {host} /logs/verifier/reward.txt; exit 1\\n' > /app/solution.sh"
        assert run(handle, plant, tmp_path, cwd="/app") == 0
        result = HarborEvaluator().grade(
            task, handle.host_workspace / "repo", env=handle, log_dir=tmp_path / "eval"
        )
    assert (result.status, result.native_score) == ("no_reward", None), result
    assert "host-secret" not in json.dumps(result.as_dict())
    assert not (tmp_path / "eval" / "verifier" / "reward.txt").is_symlink()


def test_a_writer_the_agent_detached_cannot_overwrite_the_reward(
    task: TaskSpec, handle: EnvironmentHandle, tmp_path: Path
) -> None:
    """The agent leaves a loop outside its exec's sweep, rewriting reward.txt with 1."""
    writer = (
        "env -u KSI_PROC_TAG sh -c 'while :; do mkdir -p /logs/verifier; "
        "echo 1 > /logs/verifier/reward.txt; sleep 0.02; done' >/dev/null 2>&1 &"
    )
    assert run(handle, writer, tmp_path, cwd="/app") == 0
    ps = tmp_path / "ps.txt"
    handle.exec(
        Invocation(argv=("ps", "-o", "pid,stat,args"), cwd="/app"),
        timeout=30,
        stdout_path=ps,
        stderr_path=tmp_path / "ps-err.txt",
        log_cap_bytes=1 << 20,
    )
    assert "while :" in ps.read_text()  # it survived the exec's sweep
    result = HarborEvaluator().grade(
        task, handle.host_workspace / "repo", env=handle, log_dir=tmp_path / "eval"
    )
    assert (result.status, result.native_score) == ("scored", 0.0), result
    assert result.details["score_from"] == "reward.json:reward"
    assert any("halted" in n and "the agent left running" in n for n in result.notes)
    handle.exec(
        Invocation(argv=("ps", "-o", "pid,stat,args"), cwd="/app"),
        timeout=30,
        stdout_path=ps,
        stderr_path=tmp_path / "ps-err.txt",
        log_cap_bytes=1 << 20,
    )
    assert "while :" not in ps.read_text()
