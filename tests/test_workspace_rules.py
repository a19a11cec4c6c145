"""A tasks file cannot pull system or credential files into a run, nor name paths the
system cannot hold (issue 11 item 18)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksi.tasks.schema import parse_tasks_file
from tests.run_helpers import ksi, write_tasks


def _problems(path: Path) -> list[str]:
    return [str(p) for p in parse_tasks_file(path, "tasks.jsonl").problems]


def test_workspace_dir_symlinks_to_root_and_etc_never_reach_the_run(tmp_path: Path) -> None:
    (tmp_path / "etc-link").symlink_to("/etc")
    (tmp_path / "root-link").symlink_to("/")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"task_id": "e", "prompt": "p", "workspace_dir": "etc-link"},
            {"task_id": "r", "prompt": "p", "workspace_dir": "root-link"},
        ],
    )
    run = tmp_path / "run"
    proc = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run))
    assert proc.returncode == 2
    assert (
        f"{tasks}:line 1: task 'e': $.workspace_dir: 'etc-link' (resolved to '/etc') is inside "
        "the system directory '/etc'"
    ) in proc.stderr
    assert (
        f"{tasks}:line 2: task 'r': $.workspace_dir: 'root-link' (resolved to '/') is the "
        "filesystem root"
    ) in proc.stderr
    assert not run.exists()  # nothing was seeded: /etc/shadow stays where it is

    validate = ksi("tasks", "validate", str(tasks))
    assert validate.returncode == 2 and "2 problems; no task was loaded" in validate.stderr


@pytest.mark.parametrize("target", ["/etc", "/etc/ssh", "/proc/self", "/root", "/usr/lib"])
def test_system_directories_are_refused_however_written(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path(target).is_dir():
        pytest.skip(f"{target} is not a directory here")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    tasks = write_tasks(
        tmp_path / "t.jsonl", [{"task_id": "x", "prompt": "p", "workspace_dir": target}]
    )
    (problem,) = _problems(tasks)
    assert problem.startswith(f"tasks.jsonl:line 1: task 'x': $.workspace_dir: {target!r}")
    assert "system directory" in problem


def test_home_and_its_credentials_are_refused_but_projects_in_it_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "me"
    for sub in (".ssh", ".aws/x", "projects/calc"):
        (home / sub).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [
            {"task_id": "home", "prompt": "p", "workspace_dir": "~"},
            {"task_id": "parent", "prompt": "p", "workspace_dir": str(home.parent)},
            {"task_id": "ssh", "prompt": "p", "workspace_dir": "~/.ssh"},
            {"task_id": "aws", "prompt": "p", "workspace_dir": str(home / ".aws" / "x")},
            {"task_id": "ok", "prompt": "p", "workspace_dir": "~/projects/calc"},
        ],
    )
    problems = _problems(tasks)
    assert [p.split(": ")[1] for p in problems] == [
        "task 'home'",
        "task 'parent'",
        "task 'ssh'",
        "task 'aws'",
    ]
    assert "holds your home directory" in problems[0] and "holds your home" in problems[1]
    assert f"is inside {str(home / '.ssh')!r}, which holds credentials" in problems[2]


def test_a_symlink_may_not_lead_a_plain_relative_path_out_of_the_tasks_dir(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tasks_dir = tmp_path / "tasks"
    (tasks_dir / "repos" / "real").mkdir(parents=True)
    (tasks_dir / "out").symlink_to(elsewhere)
    (tasks_dir / "in").symlink_to("repos/real")
    tasks = write_tasks(
        tasks_dir / "t.jsonl",
        [
            {"task_id": "sneaky", "prompt": "p", "workspace_dir": "out"},
            {"task_id": "inner-link", "prompt": "p", "workspace_dir": "in"},
            {"task_id": "said-so", "prompt": "p", "workspace_dir": "../elsewhere"},
            {"task_id": "absolute", "prompt": "p", "workspace_dir": str(elsewhere)},
        ],
    )
    (problem,) = _problems(tasks)
    assert problem.startswith("tasks.jsonl:line 1: task 'sneaky': $.workspace_dir: 'out'")
    assert "a symlink leads it out of" in problem and "write the real path" in problem


def test_file_paths_longer_than_the_system_allows_are_refused(tmp_path: Path) -> None:
    many_short = "/".join(["d" * 60] * 60)  # 3659 bytes of ordinary 60-character names
    at_limit = ("g" * 254 + "/") * 12 + "h" * 12
    assert len(at_limit) == 3072
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [
            {"task_id": "deep", "prompt": "p", "files": {many_short: "x"}},
            {"task_id": "name", "prompt": "p", "files": {"n" * 256: "x"}},
            {"task_id": "fits", "prompt": "p", "files": {at_limit: "x"}},
            {"task_id": "over", "prompt": "p", "files": {at_limit + "i": "x"}},
            {"task_id": "sol", "prompt": "p", "solution": {"files": {many_short: "x"}}},
            {"task_id": "ws", "prompt": "p", "workspace_dir": "w" * 5000},
            {"task_id": "ws-name", "prompt": "p", "workspace_dir": "a/" + "w" * 300},
        ],
    )
    problems = _problems(tasks)
    located = [p.split(": ")[1:3] for p in problems]
    assert [where[0] for where in located] == [
        "task 'deep'",
        "task 'name'",
        "task 'over'",
        "task 'sol'",
        "task 'ws'",
        "task 'ws-name'",
    ]
    assert located[0][1].startswith('$.files["dddd')
    assert located[3][1].startswith('$.solution.files["dddd')
    assert "file path is 3659 bytes long, over the 3072-byte limit" in problems[0]
    assert "longer than 255 bytes" in problems[1]
    assert "file path is 3073 bytes long" in problems[2]
    assert "the path is 5000 bytes long, over the system limit of 4095" in problems[4]
    assert "a component of 300 bytes" in problems[5]
    assert all(len(p) < 400 for p in problems)  # the path itself is never echoed in full


def test_a_file_path_at_the_limit_is_written(tmp_path: Path) -> None:
    at_limit = ("g" * 254 + "/") * 12 + "h" * 12
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [{"task_id": "fits", "prompt": "p", "files": {at_limit: "x"}, "eval": {"command": "true"}}],
    )
    run = tmp_path / "r"
    proc = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr
    assert (run / "seeds" / "fits" / "repo" / at_limit).read_text() == "x"
