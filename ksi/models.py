"""The data KSI passes between its parts and writes to disk.

Models are frozen attrs classes so a task or a result cannot change under a
component that holds it; the one converter in :mod:`ksi.serialization` turns
them into JSON and back.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class TaskSpec:
    """One task: what the agent is asked to do, from which starting files.

    The positional fields and ``metadata`` keys are the original KSI's public
    API (``id``, ``repo``, ``prompt``, ``metadata``). Keys every task source
    should fill in ``metadata``: ``task_source``, ``repo_path`` (an existing
    directory of starting files), ``eval_command`` and ``eval_timeout_sec``.
    """

    id: str
    repo: str = ""
    prompt: str = ""
    metadata: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Problem:
    """One thing wrong with a user's input, located precisely enough to fix.

    ``location`` is ``line 7`` for JSONL, ``record 3`` for a JSON array, or
    empty when the problem is about the whole file.
    """

    file: str
    message: str
    location: str = ""
    task_id: str | None = None
    field: str = ""

    def __str__(self) -> str:
        where = self.file
        if self.location:
            where += f":{self.location}"
        parts = [where]
        if self.task_id is not None:
            parts.append(f"task {self.task_id!r}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)


@attrs.frozen
class EvalResult:
    """What an evaluator concluded about one workspace.

    ``native_score`` is in [0, 1], or ``None`` when the attempt is unscored
    (timeout, missing workspace, spawn failure...): unscored attempts are
    counted apart and never pull a best score down. ``status`` says which.
    """

    status: str
    native_score: float | None
    exit_code: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    eval_workdir: str = ""
    duration_sec: float = 0.0
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = attrs.field(factory=dict)

    @property
    def scored(self) -> bool:
        return self.native_score is not None

    @property
    def resolved(self) -> bool:
        """True when the attempt earned full marks (the original KSI's meaning)."""
        return self.native_score is not None and self.native_score >= 1.0

    def as_dict(self) -> dict[str, Any]:
        """The original KSI's result dict, plus KSI's extra fields."""
        return {
            "status": self.status,
            "native_score": self.native_score,
            "resolved": self.resolved,
            "exit_code": self.exit_code,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
            "eval_workdir": self.eval_workdir,
            "duration_sec": self.duration_sec,
            "notes": list(self.notes),
            "details": dict(self.details),
        }
