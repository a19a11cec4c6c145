"""A run's configuration, and the rules for resuming it.

The configuration is written to ``run.json`` when a run starts. Re-running on
the same run directory resumes only if the *key* options and the task set
are the same: otherwise the journal's records would describe a different
experiment, and the numbers mixed from both would be wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

import attrs

from ksi.limits import timeout_problem
from ksi.models import TaskSpec
from ksi.runner.run_state import RunState

#: Options that define the experiment; a resume must not change them.
KEY_OPTIONS = (
    "task_source",
    "agent",
    "agent_options",
    "model",
    "environment",
    "environment_options",
    "evaluator",
    "evaluator_options",
    "eval_in",
    "attempts",
    "wipe_workspace",
)


def default_concurrency() -> int:
    """Attempts are mostly waiting on agents, but grading and capture use the CPU."""
    return max(1, min(8, (os.cpu_count() or 1)))


@attrs.define
class RunConfig:
    agent: str
    task_source: str = "custom"
    tasks_path: str | None = None
    agent_options: dict[str, str] = attrs.field(factory=dict)
    model: str | None = None
    environment: str = "local"
    environment_options: dict[str, str] = attrs.field(factory=dict)
    evaluator: str | None = None
    evaluator_options: dict[str, str] = attrs.field(factory=dict)
    #: Where host evaluators grade: "host" (the spec) or "environment".
    eval_in: str = "host"
    executor: str = "local"
    attempts: int = 1
    concurrency: int = attrs.field(factory=default_concurrency)
    timeout_sec: float | None = None
    task_ids: list[str] | None = None
    max_tasks: int | None = None
    wipe_workspace: bool = True
    retries: int = 0
    solved_threshold: float = 1.0
    max_cost_usd: float | None = None
    agent_env: list[str] = attrs.field(factory=list)
    #: Host variables the eval command gets besides the scrubbed environment.
    eval_env: list[str] = attrs.field(factory=list)
    #: Host grading in bubblewrap: "auto" (when the agent ran isolated), "none", "sandbox".
    eval_isolation: str = "auto"
    log_cap_bytes: int = 20 * 1024 * 1024
    capture_max_file_bytes: int = 10 * 1024 * 1024
    output_json: str | None = None

    def problems(self) -> list[str]:
        """What is out of range (the CLI checks its flags; ``ksi.run()`` callers get this)."""
        out = []
        for name, least in (("attempts", 1), ("concurrency", 1), ("retries", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                out.append(f"{name}: expected an integer >= {least}, got {value!r}")
        if self.max_tasks is not None and (
            not isinstance(self.max_tasks, int) or self.max_tasks < 1
        ):
            out.append(f"max_tasks: expected an integer >= 1 or None, got {self.max_tasks!r}")
        if self.max_cost_usd is not None and (
            not isinstance(self.max_cost_usd, (int, float)) or self.max_cost_usd <= 0
        ):
            out.append(f"max_cost_usd: expected a number > 0 or None, got {self.max_cost_usd!r}")
        if self.timeout_sec is not None and (problem := timeout_problem(self.timeout_sec)):
            out.append(f"timeout_sec (--timeout): {problem}")
        if not isinstance(self.wipe_workspace, bool):
            out.append(f"wipe_workspace: expected True or False, got {self.wipe_workspace!r}")
        if self.eval_in not in ("host", "environment"):
            out.append(f"eval_in: expected 'host' or 'environment', got {self.eval_in!r}")
        if self.eval_isolation not in ("auto", "none", "sandbox"):
            out.append(
                f"eval_isolation: expected 'auto', 'none' or 'sandbox', got {self.eval_isolation!r}"
            )
        return out

    def key(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        return {k: data[k] for k in KEY_OPTIONS}


def task_fingerprint(task: TaskSpec) -> str:
    """What identifies a task for resume: id, prompt and how it is graded.

    Starting files are left out on purpose: comparing them would mean reading
    (or writing) every task's files just to resume.
    """
    ident = {
        "id": task.id,
        "prompt": task.prompt,
        "eval_command": task.eval.command,
        "eval_timeout_sec": task.eval.timeout_sec,
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


def task_set_fingerprint(tasks: Sequence[TaskSpec]) -> dict[str, str]:
    return {t.id: task_fingerprint(t) for t in tasks}


def resume_mismatches(
    stored: RunState, config: RunConfig, fingerprints: dict[str, str]
) -> list[str]:
    """Why the stored run cannot be resumed with this configuration (empty: it can)."""
    problems = []
    stored_key = stored.config
    for name, value in config.key().items():
        old = stored_key.get(name)
        if old != value and not (old is None and value in ({}, None)):
            problems.append(f"{name}: the run has {old!r}, this command has {value!r}")
    old_tasks = stored.tasks
    added = sorted(set(fingerprints) - set(old_tasks))
    removed = sorted(set(old_tasks) - set(fingerprints))
    changed = sorted(t for t in fingerprints if t in old_tasks and old_tasks[t] != fingerprints[t])
    if added:
        problems.append(f"tasks added since the run started: {', '.join(added[:10])}")
    if removed:
        problems.append(f"tasks missing from this command: {', '.join(removed[:10])}")
    if changed:
        problems.append(f"tasks whose prompt or eval changed: {', '.join(changed[:10])}")
    return problems
