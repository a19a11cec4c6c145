"""Skip markers for tests that need a Docker engine or bubblewrap, with the reason spelled out.

A machine without Docker skips the docker tests and says why (never a silent
pass); CI installs Docker and bubblewrap (``.ci/setup-docker.sh``) so they
run for real there. The test image is built locally from the static busybox
binary (``.ci/build-test-images.sh``): no registry is needed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ksi.environments.sandbox import SandboxEnvironment, SandboxHandle
from ksi.interfaces import AttemptContext
from ksi.models import TaskSpec

ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = ROOT / ".ci" / "build-test-images.sh"
#: The image every docker test runs: /bin/sh and busybox applets.
TEST_IMAGE = "ksi-test/busybox:latest"
#: The busybox root plus real agent CLIs (Codex, Claude Code), for the docker real-CLI tests.
AGENT_CLI_IMAGE = "ksi-test/agent-clis:latest"
AGENT_CLI_IMAGE_SCRIPT = ROOT / ".ci" / "build-agent-cli-image.sh"


def _docker_binary() -> str:
    return os.environ.get("KSI_DOCKER_BINARY", "").strip() or "docker"


@functools.cache
def docker_unavailable() -> str | None:
    """Why the docker tests cannot run here, or None when they can (builds the image once)."""
    binary = _docker_binary()
    if shutil.which(binary) is None:
        return f"{binary!r} CLI not installed (CI installs docker.io via .ci/setup-docker.sh)"
    try:
        info = subprocess.run(
            [binary, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker engine not answering: {exc}"
    if info.returncode != 0:
        last = (info.stderr.strip().splitlines() or ["?"])[-1]
        return f"docker engine not reachable ({last}); start dockerd"
    probe = subprocess.run([binary, "image", "inspect", TEST_IMAGE], capture_output=True)
    if probe.returncode != 0:
        built = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True)
        if built.returncode != 0:
            return f"test image {TEST_IMAGE} missing and {BUILD_SCRIPT} failed: {built.stderr}"
    return None


@functools.cache
def agent_cli_image_unavailable() -> str | None:
    """Why :data:`AGENT_CLI_IMAGE` cannot be had, or None once it is built (a no-op when
    its content-hash tag exists; the CLIs come from ``.ci/install-agent-clis.sh``)."""
    why = docker_unavailable()
    if why is not None:
        return f"needs Docker: {why}"
    built = subprocess.run(["bash", str(AGENT_CLI_IMAGE_SCRIPT)], capture_output=True, text=True)
    if built.returncode != 0:
        return f"{AGENT_CLI_IMAGE_SCRIPT} failed: {built.stderr.strip()[-2000:]}"
    return None


def remove_run_containers(run_dir: Path) -> None:
    """``docker rm -f`` whatever containers the run in ``run_dir`` left (none normally)."""
    import json

    run_json = run_dir / "run.json"
    if not run_json.exists():
        return
    run_id = json.loads(run_json.read_text())["run_id"]
    binary = _docker_binary()
    listed = subprocess.run(
        [binary, "ps", "-aq", "--filter", f"label=ksi.run={run_id}"],
        capture_output=True,
        text=True,
    )
    if listed.stdout.split():
        subprocess.run([binary, "rm", "-f", *listed.stdout.split()], capture_output=True)


@functools.cache
def bwrap_unavailable() -> str | None:
    """Why the sandbox tests cannot run here, or None when bubblewrap works."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) not installed (CI installs it via .ci/setup-docker.sh)"
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--proc", "/proc", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"bwrap cannot create namespaces here: {probe.stderr.strip()}"
    return None


needs_docker = pytest.mark.skipif(
    docker_unavailable() is not None, reason=f"needs Docker: {docker_unavailable()}"
)
needs_bwrap = pytest.mark.skipif(
    bwrap_unavailable() is not None, reason=f"needs bubblewrap: {bwrap_unavailable()}"
)


def start_sandbox(
    env: SandboxEnvironment, tmp_path: Path, base_env: dict[str, str] | None = None
) -> SandboxHandle:
    """``env`` prepared and started for one attempt whose workspace (with ``repo/``) is in tmp_path.

    ``base_env`` defaults to this process's PATH and a UTF-8 locale.
    """
    workspace = tmp_path / "attempt" / "workspace"
    (workspace / "repo").mkdir(parents=True)
    task = TaskSpec(id="t1")
    env.prepare([task])
    return env.start(
        AttemptContext(
            run_id="r",
            task=task,
            attempt=1,
            attempt_dir=workspace.parent,
            host_workspace=workspace,
            base_env=base_env
            if base_env is not None
            else {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"},
        )
    )
