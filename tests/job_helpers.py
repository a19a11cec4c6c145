"""Building attempt jobs by hand, as a driver would, for executor tests."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from ksi.attempt.envscrub import scrubbed_env
from ksi.attempt.job import AttemptJob, AttemptSettings, ComponentSpec, ContextFile
from ksi.models import TaskSpec


def command_job(
    run_dir: Path,
    cmd: str,
    *,
    task_id: str = "t",
    attempt: int = 1,
    eval_command: str = "true",
    session_id: str | None = None,
    context_files: tuple[ContextFile, ...] = (),
    **settings: Any,
) -> AttemptJob:
    """A job whose agent runs ``cmd`` in ``sh`` on ``local`` and is graded by ``eval_command``."""
    env = {**scrubbed_env(required=(), optional=(), passthrough=()), "KSI_RUN_ID": "test-run"}
    return AttemptJob(
        run_id="test-run",
        session_id=session_id or uuid.uuid4().hex,
        run_dir=str(run_dir),
        task=TaskSpec(id=task_id, prompt="work", metadata={"eval_command": eval_command}),
        attempt=attempt,
        try_number=0,
        agent=ComponentSpec("agent", "command", {"cmd": cmd}),
        environment=ComponentSpec("environment", "local"),
        evaluator=ComponentSpec("evaluator", "command"),
        settings=AttemptSettings(timeout_sec=60, **settings),
        agent_env=env,
        eval_env=env,
        context_files=context_files,
    )
