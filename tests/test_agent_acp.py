"""The ``acp`` agent where no ACP agent is needed to see it: its options, and a client that
cannot start (no ``agent-client-protocol`` package, no Python in a container image).

Its conversations with real ACP agents are in ``tests/test_real_cli_acp.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ksi
from ksi.models import TaskSpec
from tests.docker_support import TEST_IMAGE, needs_docker
from tests.run_helpers import journal_lines, write_tasks
from tests.run_helpers import ksi as ksi_cli

TASK = {
    "task_id": "hello",
    "prompt": "Create hello.txt containing hi.",
    "files": {"README.md": "start\n"},
    "eval": {"command": "grep -qx hi hello.txt", "timeout_sec": 30},
}


def task(tmp_path: Path) -> TaskSpec:
    seed = tmp_path / "seed"
    seed.mkdir()
    metadata = {"repo_path": str(seed), "eval_command": "test -e hello.txt"}
    return TaskSpec(id="hello", prompt="Create hello.txt.", metadata=metadata)


def test_cmd_is_required_and_the_permission_policy_is_checked(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK])
    res = ksi_cli("run", str(tasks), "--agent", "acp", "--run-dir", str(tmp_path / "run"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "option 'cmd' is required" in res.stderr and "gemini --acp" in res.stderr
    res = ksi_cli(
        "run", str(tasks), "--agent", "acp", "--agent-option", "cmd=gemini --acp",
        "--agent-option", "permission=maybe", "--run-dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert "permission" in res.stderr and "allow-always" in res.stderr


def test_a_python_without_the_protocol_package_is_an_error_naming_the_extra(
    tmp_path: Path,
) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    ksi.run(
        [task(tmp_path)],
        agent="acp",
        agent_options={"cmd": "true", "python": str(bare / "bin" / "python")},
        run_dir=tmp_path / "run",
    )
    [rec] = journal_lines(tmp_path / "run")
    assert (rec["status"], rec["agent_status"]) == ("agent_error", "error"), rec
    assert "agent-client-protocol" in rec["error"] and "ksi[acp]" in rec["error"]
    log = tmp_path / "run" / rec["attempt_dir"] / "acp-session.jsonl"
    assert '"stage": "client"' in log.read_text()


def test_an_agent_that_does_not_speak_acp_fails_the_attempt_with_its_words(
    tmp_path: Path,
) -> None:
    ksi.run(
        [task(tmp_path)],
        agent="acp",
        agent_options={"cmd": "echo not an acp agent >&2; exit 7"},
        run_dir=tmp_path / "run",
    )
    [rec] = journal_lines(tmp_path / "run")
    assert rec["agent_status"] == "crashed", rec
    assert "closed the connection during initialize (exit code 7)" in rec["error"]
    stderr = tmp_path / "run" / rec["attempt_dir"] / "agent.stderr.log"
    assert "not an acp agent" in stderr.read_text()


def test_options_that_are_not_strings_are_refused() -> None:
    from ksi.agents.acp import AcpAgent

    with pytest.raises(TypeError, match="mode"):
        AcpAgent(cmd="gemini --acp", mode=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="endpoints"):
        AcpAgent(cmd="gemini --acp", endpoints="no-port")


@pytest.mark.docker
@needs_docker
def test_an_image_without_python_is_an_error_saying_what_the_image_needs(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [TASK])
    run_dir = tmp_path / "run"
    res = ksi_cli(
        "run", str(tasks), "--agent", "acp", "--agent-option", "cmd=gemini --acp",
        "--environment", "docker", "--image", TEST_IMAGE, "--network", "none",
        "--run-dir", str(run_dir),
    )  # fmt: skip
    [rec] = journal_lines(run_dir)
    assert (rec["status"], rec["agent_status"]) == ("agent_error", "error"), res.stderr
    assert "'python3'" in rec["error"] and "Python 3.10+" in rec["error"]
    assert "agent-client-protocol" in rec["error"]
