"""A run's configuration, and the rules for resuming it.

The configuration is written to ``run.json`` when a run starts. Re-running on
the same run directory resumes unless a setting that defines the experiment
changed (:data:`RESUME_RULES`): the journal's records would then describe a
different experiment, and the numbers mixed from both would be wrong. What
only adds to the experiment is allowed: more attempts, more tasks.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

import attrs

from ksi.choices import (
    EvalIn,
    EvalIsolation,
    KnowledgeEvalOutput,
    KnowledgeMode,
    KnowledgeTools,
)
from ksi.knowledge.choices import DEFAULT_KNOWLEDGE_BUDGET
from ksi.limits import timeout_problem
from ksi.models import TaskSpec
from ksi.protected_files import glob_problem
from ksi.rundir.run_state import RunState
from ksi.tasks.selection import TaskSelection


class Change(enum.Enum):
    """How a setting may differ when a run is resumed (a row of :data:`RESUME_RULES`)."""

    #: Old records would describe another experiment: the resume is refused.
    MATCH = "must match"
    #: May be raised (more attempts are added); lowering it is refused.
    GROW = "may grow"
    #: The newest value is used and recorded; old records stay comparable.
    FREE = "may change"


@attrs.frozen
class ResumeRule:
    change: Change
    #: The option that sets it, for the fix a refusal suggests.
    flag: str


_MATCH, _GROW, _FREE = Change.MATCH, Change.GROW, Change.FREE

#: Every :class:`RunConfig` setting and how a resume may change it (a test checks that
#: every field has a row: a new setting must say). The task set has its own rule
#: (:func:`resume_mismatches`): tasks may be added or left out of a session, but a
#: task whose prompt or eval changed is refused.
RESUME_RULES: dict[str, ResumeRule] = {
    "agent": ResumeRule(_MATCH, "--agent"),
    "task_source": ResumeRule(_MATCH, "--task-source"),
    "task_source_options": ResumeRule(_MATCH, "--task-source-option"),
    "tasks_path": ResumeRule(_FREE, "TASKS"),
    "agent_options": ResumeRule(_MATCH, "--agent-option"),
    "model": ResumeRule(_MATCH, "--model"),
    "environment": ResumeRule(_MATCH, "--environment"),
    "environment_options": ResumeRule(_MATCH, "--environment-option"),
    "evaluator": ResumeRule(_MATCH, "--evaluator"),
    "evaluator_options": ResumeRule(_MATCH, "--evaluator-option"),
    "eval_in": ResumeRule(_MATCH, "--eval-in"),
    "protect": ResumeRule(_MATCH, "--protect"),
    "executor": ResumeRule(_FREE, "--executor"),
    "executor_options": ResumeRule(_FREE, "--executor-option"),
    "attempts": ResumeRule(_GROW, "--attempts"),
    "concurrency": ResumeRule(_FREE, "--concurrency"),
    "timeout_sec": ResumeRule(_FREE, "--timeout"),
    "task_ids": ResumeRule(_FREE, "--task-id"),
    "max_tasks": ResumeRule(_FREE, "--limit"),
    "exclude_task_ids": ResumeRule(_FREE, "--exclude"),
    "wipe_workspace": ResumeRule(_MATCH, "--wipe-workspace-per-task"),
    "retries": ResumeRule(_FREE, "--retries"),
    "solved_threshold": ResumeRule(_FREE, "--solved-threshold"),
    "max_cost_usd": ResumeRule(_FREE, "--max-cost"),
    "fail_fast_auth": ResumeRule(_FREE, "--fail-fast"),
    "agent_env": ResumeRule(_FREE, "--agent-env"),
    "eval_env": ResumeRule(_FREE, "--eval-env"),
    "eval_isolation": ResumeRule(_FREE, "--eval-isolation"),
    "log_cap_bytes": ResumeRule(_FREE, "log_cap_bytes="),
    "capture_max_file_bytes": ResumeRule(_FREE, "capture_max_file_bytes="),
    "output_json": ResumeRule(_FREE, "--output-json"),
    # Generations: more may be added; what each one runs and learns from must not change.
    "generations": ResumeRule(_GROW, "--generations"),
    "strategy": ResumeRule(_MATCH, "--strategy"),
    "holdout_task_ids": ResumeRule(_MATCH, "--holdout-task-ids"),
    "knowledge": ResumeRule(_MATCH, "--knowledge"),
    "distiller": ResumeRule(_MATCH, "--distiller"),
    "distiller_options": ResumeRule(_MATCH, "--distiller-option"),
    "knowledge_eval_output": ResumeRule(_MATCH, "--knowledge-eval-output"),
    "knowledge_budget_bytes": ResumeRule(_MATCH, "--knowledge-budget"),
    "seed_knowledge": ResumeRule(_FREE, "--seed-knowledge"),
    "seed_knowledge_sha256": ResumeRule(_MATCH, "--seed-knowledge"),
    # The store a run reads notes from and writes to: another one would split its record.
    "knowledge_db": ResumeRule(_MATCH, "--knowledge-db"),
    # What an attempt could look up: a generation half with the tools, half without, is
    # neither arm.
    "knowledge_tools": ResumeRule(_MATCH, "--knowledge-tools"),
}
#: Settings that must match once a run has several generations: generation g's attempt
#: numbers follow from --attempts, and which tasks the next one runs from the threshold.
MULTI_GENERATION_MATCH = ("attempts", "solved_threshold")


def default_concurrency() -> int:
    """Attempts are mostly waiting on agents, but grading and capture use the CPU."""
    return max(1, min(8, (os.cpu_count() or 1)))


@attrs.define
class RunConfig:
    agent: str
    task_source: str = "custom"
    tasks_path: str | None = None
    #: The task source's options (``--task-source-option``, or a source's own flags).
    task_source_options: dict[str, str] = attrs.field(factory=dict)
    agent_options: dict[str, str] = attrs.field(factory=dict)
    model: str | None = None
    environment: str = "local"
    environment_options: dict[str, str] = attrs.field(factory=dict)
    evaluator: str | None = None
    evaluator_options: dict[str, str] = attrs.field(factory=dict)
    #: Where host evaluators grade: "host" (the spec) or "environment".
    eval_in: EvalIn = EvalIn.HOST
    executor: str = "local"
    #: ``--executor-option KEY=VALUE``: how the executor reaches its workers (free on a
    #: resume: it may run on another cluster).
    executor_options: dict[str, str] = attrs.field(factory=dict)
    attempts: int = 1
    concurrency: int = attrs.field(factory=default_concurrency)
    timeout_sec: float | None = None
    #: Task ids or globs to run (``--task-id``; None: every task).
    task_ids: list[str] | None = None
    #: The first N of the selected tasks (``--limit``).
    max_tasks: int | None = None
    #: Task ids or globs to leave out (``--exclude``).
    exclude_task_ids: list[str] | None = None
    wipe_workspace: bool = True
    retries: int = 0
    solved_threshold: float = 1.0
    max_cost_usd: float | None = None
    #: An attempt's ``auth_error`` stops the launching of new attempts (running ones finish).
    fail_fast_auth: bool = True
    agent_env: list[str] = attrs.field(factory=list)
    #: Host variables the eval command gets besides the scrubbed environment.
    eval_env: list[str] = attrs.field(factory=list)
    #: Host grading in bubblewrap: "auto" (when the agent ran isolated), "none", "sandbox".
    eval_isolation: EvalIsolation = EvalIsolation.AUTO
    log_cap_bytes: int = 20 * 1024 * 1024
    capture_max_file_bytes: int = 10 * 1024 * 1024
    #: Globs of files under repo/ that capture protects like test files (``--protect``).
    protect: list[str] = attrs.field(factory=list)
    output_json: str | None = None
    #: How many generations to run (1: a plain run). See docs/generations.md.
    generations: int = 1
    #: Which tasks each generation runs (``ksi_register_strategies``).
    strategy: str = "retry-unsolved"
    #: Tasks run in every generation, never learned from, reported apart.
    holdout_task_ids: list[str] | None = None
    #: ``notes`` (later generations get earlier ones' notes) or ``none`` (the control arm).
    knowledge: KnowledgeMode = KnowledgeMode.NOTES
    #: Who writes the notes after a generation (``ksi_register_distillers``).
    distiller: str = "evidence"
    distiller_options: dict[str, str] = attrs.field(factory=dict)
    #: ``tail``: failing attempts' eval output tails go into the notes; ``none``: never.
    knowledge_eval_output: KnowledgeEvalOutput = KnowledgeEvalOutput.TAIL
    #: The most bytes of notes one attempt receives (the one size budget).
    knowledge_budget_bytes: int = DEFAULT_KNOWLEDGE_BUDGET
    #: A knowledge bundle (``ksi knowledge export``) the first generation starts from.
    seed_knowledge: str | None = None
    #: The bundle's SHA-256, recorded when the run starts (a resume must find the same one).
    seed_knowledge_sha256: str | None = None
    #: The knowledge store (SQLite) the run reads earlier runs' notes from and adds its
    #: evidence and notes to (None: ``knowledge.sqlite`` in the run directory).
    knowledge_db: str | None = None
    #: ``on``: agents whose CLI speaks MCP may query the store (docs/knowledge.md).
    knowledge_tools: KnowledgeTools = KnowledgeTools.OFF

    def problems(self) -> list[str]:
        """What is out of range (the CLI checks its flags; ``ksi.run()`` callers get this)."""
        out = []
        for name, least in (
            ("attempts", 1),
            ("concurrency", 1),
            ("retries", 0),
            ("generations", 1),
            ("knowledge_budget_bytes", 256),
        ):
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
        # A word given as a plain string (``ksi.run(eval_in="host")``) stays one: it equals
        # its member. One that is not a member's word is reported here with the others.
        for name, words in (
            ("eval_in", EvalIn),
            ("eval_isolation", EvalIsolation),
            ("knowledge", KnowledgeMode),
            ("knowledge_eval_output", KnowledgeEvalOutput),
            ("knowledge_tools", KnowledgeTools),
        ):
            value = getattr(self, name)
            if value not in tuple(words):
                out.append(f"{name}: expected {_one_of(words)}, got {value!r}")
        out.extend(f"protect (--protect): {why}" for g in self.protect if (why := glob_problem(g)))
        if self.knowledge == KnowledgeMode.NONE and self.seed_knowledge:
            out.append(
                "seed_knowledge: a knowledge bundle cannot seed a run with knowledge 'none' "
                "(the control arm gets no notes); drop one of the two"
            )
        return out

    @property
    def selection(self) -> TaskSelection:
        """Which tasks of the file this run works on."""
        return TaskSelection(
            include=tuple(self.task_ids or ()),
            exclude=tuple(self.exclude_task_ids or ()),
            limit=self.max_tasks,
        )


def _one_of(words: type[enum.StrEnum]) -> str:
    """``'host' or 'environment'``; ``'auto', 'none' or 'sandbox'``."""
    quoted = [repr(w.value) for w in words]
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}"


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
    if task.eval.protect:  # only when set, so older runs' fingerprints still match
        ident["protect"] = list(task.eval.protect)
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


def task_set_fingerprint(tasks: Sequence[TaskSpec]) -> dict[str, str]:
    return {t.id: task_fingerprint(t) for t in tasks}


def _unset(value: Any) -> bool:
    return value in ({}, None, [])


def resume_mismatches(
    stored: RunState, config: RunConfig, fingerprints: dict[str, str]
) -> list[str]:
    """Why the stored run cannot be resumed with this configuration (empty: it can).

    Each line names the setting, both values and the fix.
    """
    problems = []
    new = attrs.asdict(config)
    several = config.generations > 1 or int(stored.config.get("generations") or 1) > 1
    for name, rule in RESUME_RULES.items():
        if name not in stored.config:
            continue  # the run predates this setting: nothing to compare
        old, value = stored.config.get(name), new.get(name)
        change = Change.MATCH if several and name in MULTI_GENERATION_MATCH else rule.change
        if change is Change.FREE or old == value or (_unset(old) and _unset(value)):
            continue
        if change is Change.GROW:
            if old is None or (isinstance(value, int) and value >= old):
                continue
            problems.append(
                f"{name}: the run has {old!r}, this command has {value!r}; it may grow but "
                f"not shrink (the run holds records up to {old!r}): give {rule.flag} {old!r} "
                "or more"
            )
            continue
        problems.append(
            f"{name}: the run has {old!r}, this command has {value!r}; old records would not "
            f"be comparable: give {rule.flag} as the run has it, or start a new --run-dir"
        )
    old_tasks = stored.tasks
    changed = sorted(t for t in fingerprints if t in old_tasks and old_tasks[t] != fingerprints[t])
    if changed:
        problems.append(
            f"tasks whose prompt or eval changed: {', '.join(changed[:10])}; their old records "
            "grade another task: restore them, give them new ids, or start a new --run-dir"
        )
    return problems
