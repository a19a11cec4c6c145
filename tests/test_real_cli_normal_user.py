"""KSI and the real Claude Code CLI run by a normal (unprivileged) user, not root.

CI runs as root, where Claude Code needs ``IS_SANDBOX=1`` for its default
``bypassPermissions`` mode; most users are not root. Here ``ksi run`` (local
environment, the agent's default permission mode) and ``ksi doctor`` run as
the user ``$KSI_TEST_USER`` (default ``ksi-user``, made by
``.ci/setup-agent-test-host.sh``) through ``runuser``, with the system Python
(``/usr/bin/python3``: the test venv's Python may live under ``/root``, which
that user cannot read) and a copy of KSI and its dependencies in a directory
the user owns. The mock model runs as root, next to it, in the same
loopback-only network namespace.

Skipped, with the reason, where this cannot work (not root, no such user, no
system Python of this version); ``KSI_REQUIRE_NORMAL_USER=1`` (set by
``.ci/run``) turns the skip into a failure.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_real_cli_claude_code as claude
from docker_support import (
    AGENT_CLI_IMAGE,
    agent_cli_image_unavailable,
    needs_docker,
    remove_run_containers,
)
from mockmodel import Answer, MockUsage
from real_agents import ROOT, MockRun, cli_bin_dir, ksi_run_with_mock

from ksi.agents import tested_versions

pytestmark = pytest.mark.real_cli

USER = os.environ.get("KSI_TEST_USER", "ksi-user")
SYSTEM_PYTHON = Path("/usr/bin/python3")
#: KSI's core dependencies, whose installed files are copied for the user's Python.
CORE_DEPS = ("attrs", "cattrs", "pluggy", "typer")


def _unavailable() -> str | None:
    """Why the test cannot switch to a normal user here, or None."""
    if os.geteuid() != 0:
        return "needs root to run KSI as another user (runuser)"
    if shutil.which("runuser") is None:
        return "runuser (util-linux) is not installed"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no user {USER!r}: create it with .ci/setup-agent-test-host.sh"
    if not SYSTEM_PYTHON.exists():
        return f"{SYSTEM_PYTHON} is missing (apt-get install python3)"
    probe = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
    )
    if probe.stdout.strip() != str(sys.version_info[:2]):
        return (
            f"{SYSTEM_PYTHON} is Python {probe.stdout.strip()}, not {sys.version_info[:2]}: "
            "the copied dependencies would not fit"
        )
    return None


def _requirements(name: str) -> list[str]:
    """The distributions ``name`` needs (extras left out; absent ones are not needed here)."""
    names = []
    for req in md.requires(name) or []:
        if "extra ==" in req:
            continue
        match = re.match(r"[A-Za-z0-9_.-]+", req)
        if match:
            names.append(match.group(0))
    return names


def _copy_dists(site: Path) -> None:
    """KSI's source and the installed files of its dependencies (recursively) into ``site``."""
    shutil.copytree(ROOT / "ksi", site / "ksi", ignore=shutil.ignore_patterns("__pycache__"))
    seen: set[str] = set()
    todo = list(CORE_DEPS)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # a dependency for another Python version
        for file in dist.files or []:
            src = Path(str(dist.locate_file(file)))
            if ".." in file.parts or "__pycache__" in file.parts or not src.is_file():
                continue
            dest = site / file
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
        todo += _requirements(name)


@pytest.fixture(scope="module")
def user_ksi() -> Iterator[tuple[Path, list[str]]]:
    """(a directory the user owns, the command that starts KSI as that user)."""
    _require(_unavailable())
    entry = pwd.getpwnam(USER)
    base = Path(tempfile.mkdtemp(prefix="ksi-normal-user-"))
    site = base / "site"
    _copy_dists(site)
    for path in [base, *base.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    runuser = str(shutil.which("runuser"))
    command = [runuser, "-u", USER, "--", "env", f"PYTHONPATH={site}", str(SYSTEM_PYTHON)]
    try:
        yield base, [*command, "-m", "ksi"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _require(why: str | None) -> None:
    """Skip with ``why`` (fail under ``KSI_REQUIRE_NORMAL_USER=1``) when it is not None."""
    if why is None:
        return
    if os.environ.get("KSI_REQUIRE_NORMAL_USER") == "1":
        pytest.fail(f"{why} (KSI_REQUIRE_NORMAL_USER=1)")
    pytest.skip(why)


def _user_dir(base: Path, name: str) -> Path:
    """A fresh directory of the user's under ``base`` (pytest's tmp_path is root's, mode 700)."""
    path = base / name
    path.mkdir()
    entry = pwd.getpwnam(USER)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def _solve_with_claude_code(work: Path, ksi: list[str], **kwargs: Any) -> MockRun:
    """The one-file task, solved by Claude Code in two calls, with KSI started by ``ksi``."""
    first, second = MockUsage(1200, 45, 3000, 400), MockUsage(1500, 30, 4200, 0)
    run = ksi_run_with_mock(
        work,
        agent=claude.AGENT,
        script=[claude.write_hello(first), Answer("Created hello.txt with hello.", second)],
        env=claude.KEY,
        model=claude.MODEL,
        ksi=ksi,
        **kwargs,
    )
    assert run.proc.returncode == 0, run.describe()
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == ("scored", 1.0, "completed"), (
        run.describe()
    )
    assert (rec["usage"]["input_tokens"], rec["usage"]["output_tokens"]) == (2700, 75)
    assert rec["usage"]["turns"] == len(run.served) == 2
    # KSI ran as the user: the run directory and what the attempt kept are the user's.
    uid = pwd.getpwnam(USER).pw_uid
    assert (run.run_dir / "journal.jsonl").stat().st_uid == uid
    assert run.attempt_file("agent.stdout.log").stat().st_uid == uid
    return run


def test_claude_code_solves_as_a_normal_user_in_the_default_permission_mode(
    user_ksi: tuple[Path, list[str]],
) -> None:
    base, ksi = user_ksi
    run = _solve_with_claude_code(_user_dir(base, "solve"), ksi)
    assert run.record["environment"] == "local"


@pytest.mark.docker
@needs_docker
def test_claude_code_solves_in_docker_as_a_normal_user(user_ksi: tuple[Path, list[str]]) -> None:
    """The container runs as the user's uid (the docker environment's default, user=host):
    Claude Code is not root in it, and HOME (in the workspace) is the user's."""
    base, ksi = user_ksi
    runuser = str(shutil.which("runuser"))
    probe = subprocess.run(
        [runuser, "-u", USER, "--", "docker", "version"], capture_output=True, text=True
    )
    _require(
        None
        if probe.returncode == 0
        else f"{USER} cannot use docker (add it to the docker group, as "
        f".ci/setup-agent-test-host.sh does): {probe.stderr.strip()[-300:]}"
    )
    _require(agent_cli_image_unavailable())
    work = _user_dir(base, "docker")
    try:
        run = _solve_with_claude_code(
            work,
            ksi,
            environment="docker",
            args=["--image", AGENT_CLI_IMAGE, "--network", "host"],
            netns=False,  # the container joins the daemon's network namespace
        )
    finally:
        remove_run_containers(work / "run")
    assert run.record["environment"] == "docker"


def test_doctor_as_a_normal_user_reports_the_agent_ok_with_its_version(
    user_ksi: tuple[Path, list[str]],
) -> None:
    base, ksi = user_ksi
    bin_dir = cli_bin_dir("claude-code")
    env = {
        k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN"))
    }
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", ANTHROPIC_API_KEY="sk-x")
    proc = subprocess.run(
        [*ksi, "doctor", "--agent", "claude-code"],
        env=env,
        cwd=_user_dir(base, "doctor"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tested = tested_versions.tested_cli("claude-code")
    assert tested is not None
    line = next(x for x in proc.stdout.splitlines() if "claude-code binary" in x)
    assert line.startswith("[ok]"), proc.stdout
    assert f"({tested.version} (Claude Code)); the version KSI was tested with" in line
