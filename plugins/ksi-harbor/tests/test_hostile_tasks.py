"""Hostile Harbor task directories: files linking to host files, a task.toml nested 100,000 deep.

A task directory may come from anyone. A link out of it must not put a host
file into the prompt, the container or the oracle's command: every such link
is a problem of the task, reported by ``ksi tasks validate`` (exit 2) before
anything runs; a task.toml too deep to parse is a problem naming its field.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harbor_helpers import make_task
from ksi_harbor.source import HarborTaskSource

from ksi.errors import TaskLoadError

SECRET = "host-secret-8d4e1f"


def ksi_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KSI_LOAD_PLUGINS": "ksi-harbor"}
    return subprocess.run(
        [sys.executable, "-m", "ksi", *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture
def host_file(tmp_path: Path) -> Path:
    path = tmp_path / "host" / "private.txt"
    path.parent.mkdir()
    path.write_text(f"echo {SECRET}\n")
    return path


@pytest.mark.parametrize(
    "rel",
    [
        "instruction.md",
        "task.toml",
        "environment/Dockerfile",
        "tests/test.sh",
        "tests/helper.py",
        "solution/solve.sh",
        "solution/greeting.txt",
    ],
)
def test_a_task_file_linking_to_a_host_file_is_a_problem(
    tmp_path: Path, host_file: Path, rel: str
) -> None:
    task_dir = make_task(tmp_path / "tasks", extra={"tests/helper.py": "x = 1\n"})
    (task_dir / rel).unlink()
    (task_dir / rel).symlink_to(host_file)
    [problem] = HarborTaskSource().validate(task_dir)
    assert problem.file == str(task_dir / rel)
    assert problem.task_id == "hello-world"
    assert "is a symlink" in problem.message and "outside the task directory" in problem.message
    with pytest.raises(TaskLoadError):
        HarborTaskSource().load(task_dir)
    res = ksi_cli("tasks", "validate", str(task_dir), "--task-source", "harbor")
    assert res.returncode == 2, res.stdout + res.stderr
    assert rel.split("/")[-1] in res.stderr and SECRET not in res.stdout + res.stderr


def test_a_linked_directory_out_of_the_task_is_a_problem(tmp_path: Path, host_file: Path) -> None:
    task_dir = make_task(tmp_path / "tasks")
    (task_dir / "tests" / "data").symlink_to(host_file.parent, target_is_directory=True)
    [problem] = HarborTaskSource().validate(task_dir)
    assert problem.file == str(task_dir / "tests" / "data")


def test_links_that_stay_inside_the_task_are_fine(tmp_path: Path) -> None:
    task_dir = make_task(tmp_path / "tasks", extra={"docs/prompt.md": "Write /app/hello.txt.\n"})
    (task_dir / "instruction.md").unlink()
    (task_dir / "instruction.md").symlink_to("docs/prompt.md")
    [task] = HarborTaskSource().load(task_dir)
    assert task.prompt == "Write /app/hello.txt.\n"


def test_a_task_toml_nested_100000_deep_is_a_clear_problem(tmp_path: Path) -> None:
    deep = 100_000
    toml = "[verifier]\ntimeout_sec = 60.0\n\n[metadata]\ntags = " + "[" * deep + "]" * deep
    task_dir = make_task(tmp_path / "tasks", toml=toml + "\n")
    [problem] = HarborTaskSource().validate(task_dir)
    assert problem.file == str(task_dir / "task.toml")
    assert problem.field.startswith("$.metadata.tags[0]")
    assert problem.location == "5" and "too deep" in problem.message
    res = ksi_cli("tasks", "validate", str(task_dir), "--task-source", "harbor")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "task.toml" in res.stderr and "$.metadata.tags" in res.stderr
    assert "bug in ksi" not in res.stderr and "Traceback" not in res.stderr
