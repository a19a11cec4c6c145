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


def test_forum_sessions_run_in_a_container_and_their_posts_reach_the_next_generation(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": "hint", "prompt": "p", "eval": {"command": "grep -q FORUM-SAYS seen.txt"}}],
    )
    # The post exists only if the session read FORUM.md inside its container.
    post = """{"kind": "finding", "text": "FORUM-SAYS hello"}"""
    forum = f"grep -q 'Forum: task' repo/FORUM.md && echo '{post}' > repo/posts/1.json"
    summary = ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": "cat KNOWLEDGE.md > repo/seen.txt 2>/dev/null || true"},
        environment="docker",
        environment_options={"image": TEST_IMAGE, "network": "none"},
        run_dir=tmp_path / "run",
        generations=2,
        attempts=2,  # two participants: two sessions' containers at once
        concurrency=2,
        forum_rounds=1,
        forum_agent="command",
        forum_agent_options={"cmd": forum},
    )
    assert [g.solved for g in summary.generations.generations] == [0, 1]
    assert summary.generations.generations[0].forum_posts == 2
    sessions = list((tmp_path / "run" / "forum" / "1").rglob("record.json"))
    assert len(sessions) == 2
    assert all('"environment":"docker"' in s.read_text().replace(" ", "") for s in sessions)
