"""Where everything of a run lives on disk.

``<run>/run.json``, ``<run>/journal.jsonl``, ``<run>/seeds/<task>/repo`` (the
pristine starting files, shared by a task's attempts) and
``<run>/attempts/<task>/<n>/`` (retry ``k`` of attempt ``n`` in ``<n>-retry<k>``).
Task ids become directory names through :func:`task_dirname`, which keeps
readable ids readable and makes every other id safe and unique.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import attrs

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def task_dirname(task_id: str) -> str:
    """A filesystem-safe, collision-free directory name for a task id."""
    safe = _SAFE.sub("_", task_id).strip("._") or "task"
    if safe == task_id and len(safe) <= 80:
        return safe
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:10]
    return f"{safe[:60]}-{digest}"


@attrs.frozen
class RunLayout:
    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def journal(self) -> Path:
        return self.root / "journal.jsonl"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    def seed_repo(self, task_id: str) -> Path:
        return self.root / "seeds" / task_dirname(task_id) / "repo"

    def attempt_dir(self, task_id: str, attempt: int, try_number: int = 0) -> Path:
        name = str(attempt) if try_number == 0 else f"{attempt}-retry{try_number}"
        return self.root / "attempts" / task_dirname(task_id) / name
