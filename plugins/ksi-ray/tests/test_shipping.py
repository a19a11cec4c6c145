"""Directories as bytes and back: contents, modes, symlinks and empty directories survive."""

from __future__ import annotations

import os
from pathlib import Path

from ksi_ray.shipping import pack_dir, relocated, unpack_dir

from ksi.jobs import AttemptRecord


def test_a_directory_round_trips_with_modes_links_and_empty_dirs(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "a" / "b" / "data.bin").write_bytes(bytes(range(256)) * 1000)
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    (src / "link").symlink_to("a/b/data.bin")
    dest = tmp_path / "out" / "dest"
    dest.parent.mkdir()
    (dest / "stale").mkdir(parents=True)  # replaced, not merged
    unpack_dir(pack_dir(src), dest)
    assert (dest / "a" / "b" / "data.bin").read_bytes() == bytes(range(256)) * 1000
    assert os.access(dest / "run.sh", os.X_OK)
    assert os.readlink(dest / "link") == "a/b/data.bin"
    assert (dest / "empty").is_dir()
    assert not (dest / "stale").exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["dest"], "no temporary left"


def test_a_record_names_the_driver_run_dir_not_the_node_scratch() -> None:
    record = AttemptRecord(
        task_id="t",
        attempt=1,
        status="error",
        score=None,
        agent="a",
        evaluator="e",
        environment="local",
        error="failed in /scratch/run-1/attempts/t/1/eval/repo",
        final_message="/scratch/run-1/attempts/t/1/eval/repo",
        attempt_dir="attempts/t/1",
    )
    moved = relocated(record, "/scratch/run-1", "/home/me/runs/r")
    assert moved.final_message == "/home/me/runs/r/attempts/t/1/eval/repo"
    assert moved.error == "failed in /home/me/runs/r/attempts/t/1/eval/repo"
    assert moved.attempt_dir == "attempts/t/1"
    # A sibling whose name merely starts the same is not under it.
    assert relocated(record, "/scratch/run", "/r") == record
