"""Where everything of a run lives on disk.

``<run>/run.json``, ``<run>/journal.jsonl``, ``<run>/seeds/<task>/repo`` (the
pristine starting files, shared by a task's attempts) and
``<run>/attempts/<task>/<n>/`` (retry ``k`` of attempt ``n`` in ``<n>-retry<k>``).
Task ids become directory names through :func:`task_dirname`, which keeps
readable ids readable and makes every other id safe and unique.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
from pathlib import Path
from typing import IO, Any

import attrs

from ksi.errors import RunError, UserInputError

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

    def read_run_json(self) -> dict[str, Any]:
        """The run's ``run.json``; a clear error when there is none or it is unreadable."""
        try:
            data = json.loads(self.run_json.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserInputError(f"{self.root}: not a KSI run directory (no run.json)") from None
        except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError
            raise UserInputError(
                f"{self.run_json}: unreadable ({exc}); restore it or start a new --run-dir"
            ) from exc
        if not isinstance(data, dict):
            raise UserInputError(
                f"{self.run_json}: expected a JSON object; restore it or start a new --run-dir"
            )
        return data

    def lock_exclusive(self) -> IO[str]:
        """Hold the run directory for one command (``ksi run``, ``ksi regrade``).

        Two commands appending to one journal would interleave their work;
        the lock is released when the returned file is closed (or the
        process dies, so a ``kill -9`` never leaves a stale lock).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        fh = open(self.lock, "w")  # noqa: SIM115 - the caller closes it
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.close()
            raise RunError(
                f"{self.root}: another `ksi` command is using this run directory"
            ) from exc
        return fh

    def seed_repo(self, task_id: str) -> Path:
        return self.root / "seeds" / task_dirname(task_id) / "repo"

    def attempt_dir(self, task_id: str, attempt: int, try_number: int = 0) -> Path:
        name = str(attempt) if try_number == 0 else f"{attempt}-retry{try_number}"
        return self.root / "attempts" / task_dirname(task_id) / name
