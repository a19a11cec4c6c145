"""Wiped workspaces and graded copies are deleted in the background: gone from the attempt
at once, deleted without following a link, and no trash outlives the run."""

from __future__ import annotations

import os
from pathlib import Path

from run_helpers import ksi, write_tasks

from ksi.fstree import discard_tree, empty_trash

TASKS = [
    {"task_id": f"t{i}", "prompt": "p", "files": {"a.py": "1\n"}, "eval": {"command": "true"}}
    for i in range(6)
]


def test_a_run_leaves_no_workspace_no_graded_copy_and_no_trash(tmp_path: Path) -> None:
    write_tasks(tmp_path / "tasks.jsonl", TASKS)
    cmd = "mkdir -p repo/deep/er && echo x > repo/deep/er/f && ln -s /etc repo/out"
    proc = ksi(
        "run", "tasks.jsonl", "--agent", "command", "--agent-option", f"cmd={cmd}",
        "--concurrency", "2", "--run-dir", "run", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    assert not (run / ".trash").exists()
    for i in range(6):
        attempt = run / "attempts" / f"t{i}" / "1"
        assert (attempt / "captured" / "repo" / "deep" / "er" / "f").read_text() == "x\n"
        assert not (attempt / "workspace").exists()
        assert not (attempt / "eval" / "repo").exists()
    assert os.path.isdir("/etc")


def test_a_discarded_tree_is_gone_at_once_and_deleted_without_following_links(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    tree = tmp_path / "run" / "attempts" / "t" / "1" / "workspace"
    (tree / "locked" / "inner").mkdir(parents=True)
    (tree / "locked" / "inner" / "f").write_text("x")
    (tree / "link").symlink_to(outside)
    (tree / "locked").chmod(0)  # rm cannot enter it as a normal user: the fallback can
    trash = tmp_path / "run" / ".trash"
    discard_tree(tree, trash)
    assert not tree.exists() and not tree.is_symlink()
    empty_trash(trash)
    assert not trash.exists()
    assert (outside / "keep.txt").read_text() == "keep"


def test_trash_a_killed_run_left_is_removed_by_the_next_session(tmp_path: Path) -> None:
    write_tasks(tmp_path / "tasks.jsonl", TASKS[:1])
    run = ["run", "tasks.jsonl", "--agent", "command", "--agent-option", "cmd=true"]
    assert ksi(*run, "--run-dir", "run", cwd=tmp_path).returncode == 0
    left = tmp_path / "run" / ".trash" / "123-4-5" / "repo"
    left.mkdir(parents=True)
    (left / "big.bin").write_bytes(b"\0" * 4096)
    proc = ksi(*run, "--run-dir", "run", cwd=tmp_path)  # a resume: nothing left to run
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "run" / ".trash").exists()
