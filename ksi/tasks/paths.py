"""The tasks path a run records, the same from ``ksi run`` and ``ksi.run()``.

Both spellings of the tasks path (``TASKS`` and ``--tasks-path``; ``ksi.run``'s
``tasks`` and ``tasks_path=``) given and different is a mistake said at once:
taking one of them silently would run other tasks than the user thinks. The
path is recorded absolute, so a resume or ``ksi regrade`` from another
directory finds the same file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ksi.errors import UserInputError


def one_tasks_path(
    tasks: str | os.PathLike[str] | None,
    tasks_path: str | os.PathLike[str] | None,
    *,
    spelled: str,
) -> Path | None:
    """``tasks`` or ``tasks_path`` (``spelled`` as the user wrote it: ``--tasks-path``)."""
    first = None if tasks is None else Path(tasks)
    second = None if tasks_path is None else Path(tasks_path)
    if first is not None and second is not None and first != second:
        raise UserInputError(
            f"two tasks paths: {str(first)!r} and {spelled} {str(second)!r}; give one"
        )
    return first if first is not None else second


def recorded_tasks_path(path: Path | None) -> str | None:
    """The tasks path as the run records it: absolute when it exists."""
    if path is None:
        return None
    return str(path.resolve()) if path.exists() else str(path)
