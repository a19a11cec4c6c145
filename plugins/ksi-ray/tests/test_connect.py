"""Connecting: a wrong or stale address fails in seconds, with the fix, and leaves no run."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ksi_ray import executor as ray_executor
from ksi_ray.executor import RayExecutor

from ksi.errors import UserInputError


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_address_nobody_answers_exits_2_in_seconds_and_creates_no_run(
    tmp_path: Path,
) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"task_id": "a", "prompt": "p"}\n')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ksi",
            "run",
            str(tasks),
            "--agent",
            "nop",
            "--executor",
            "ray",
            "--executor-option",
            f"address=127.0.0.1:{closed_port()}",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=90,  # ray.init alone would wait minutes on this address
    )
    assert result.returncode == 2, result.stderr
    assert "no Ray cluster answers at '127.0.0.1:" in result.stderr
    assert "ray start --head" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_stale_current_cluster_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "ray_current_cluster"
    stale.write_text(f"127.0.0.1:{closed_port()}\n")
    monkeypatch.setattr(ray_executor, "CURRENT_CLUSTER_FILE", stale)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(UserInputError, match="stopped without `ray stop`"):
        RayExecutor(address="auto")
    stale.unlink()
    with pytest.raises(UserInputError, match="no Ray cluster runs on this machine"):
        RayExecutor(address="auto")
