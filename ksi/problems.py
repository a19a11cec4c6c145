"""One thing wrong with a user's input: what every "N problems" error lists.

A leaf module (attrs only): :mod:`ksi.errors` names it without importing it at
run time, so ``ksi --help``, which imports the errors, does not import attrs;
``ksi.models.Problem`` is the same class, under its documented name.
"""

from __future__ import annotations

import attrs


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
