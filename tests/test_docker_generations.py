"""Notes reach an agent in a Docker container: KNOWLEDGE.md beside repo/, the prompt's path.

Skipped, with the reason, without a Docker engine. Only this run's containers
are touched (each attempt removes its own).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ksi
from tests.docker_support import TEST_IMAGE, needs_docker
from tests.run_helpers import journal_lines, write_tasks

pytestmark = [pytest.mark.docker, needs_docker]


def test_notes_reach_an_agent_in_a_container(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": "hint",
                "prompt": "p",
                # The only way to learn the word is the eval output of a failed attempt.
                "eval": {"command": "grep -q WORD-42 seen.txt || { echo 'want WORD-42'; exit 1; }"},
            }
        ],
    )
    cmd = "if [ -f KNOWLEDGE.md ]; then cat KNOWLEDGE.md; else echo none; fi > repo/seen.txt"
    summary = ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": cmd},
        environment="docker",
        environment_options={"image": TEST_IMAGE, "network": "none"},
        run_dir=tmp_path / "run",
        generations=2,
    )
    assert [g.solved for g in summary.generations.generations] == [0, 1]
    second = next(r for r in journal_lines(tmp_path / "run") if r["generation"] == 2)
    prompt = (tmp_path / "run" / second["attempt_dir"] / "prompt.md").read_text()
    assert "`/workspace/KNOWLEDGE.md`" in prompt, "the path as the container sees it"
    captured = tmp_path / "run" / second["attempt_dir"] / "captured" / "repo"
    assert not (captured / "KNOWLEDGE.md").exists()
