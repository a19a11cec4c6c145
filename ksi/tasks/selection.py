"""Which tasks of a file a command works on: ``--task-id``, ``--exclude``, ``--limit``.

``ksi run --task-ids-file PATH`` adds the ids or globs of a file (one a line,
``#`` comments), for selections too long for a command line.

One selection for every command (run, check, grade, regrade, tasks
validate/list), so a user learns one vocabulary. Patterns are task ids or
shell-style globs (:func:`fnmatch.fnmatchcase`: ``fix-*``, ``t[12]``), matched
case-sensitively like the ids themselves. A pattern that matches no task is
an error naming it, never a silently smaller run: a typo in ``--exclude``
would otherwise run the very task it meant to leave out.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import attrs

from ksi.errors import UserInputError

_GLOB_CHARS = frozenset("*?[")


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_HasId)


def split_patterns(values: Iterable[str] | None, flag: str = "--task-id") -> tuple[str, ...]:
    """Repeated options and comma lists alike: ``["a,b", "c"]`` -> ``("a", "b", "c")``.

    A value with no pattern in it (``--task-id ''``, what ``--task-id "$TASK"`` gives
    when ``TASK`` is unset) is a :class:`UserInputError` naming ``flag``: read as "no
    selection", it would run every task of the file.
    """
    out: list[str] = []
    for value in values or ():
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if not parts:
            raise UserInputError(
                f"{flag}: {value!r} names no task; give an id or a glob (`ksi tasks list` "
                f"shows the ids), or leave {flag} out"
            )
        out.extend(parts)
    return tuple(dict.fromkeys(out))


def _exclude_patterns(values: Iterable[str] | None) -> tuple[str, ...]:
    return split_patterns(values, "--exclude")


def is_glob(pattern: str) -> bool:
    return any(c in _GLOB_CHARS for c in pattern)


def matches(task_id: str, pattern: str) -> bool:
    return task_id == pattern if not is_glob(pattern) else fnmatch.fnmatchcase(task_id, pattern)


def read_task_ids_file(path: str | Path) -> tuple[str, ...]:
    """The ids or globs of a ``--task-ids-file``: one a line; blank lines and ``#`` comments.

    :raises UserInputError: the file cannot be read, or holds no id at all (an empty
        selection would otherwise mean every task).
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UserInputError(
            f"--task-ids-file: cannot read {path} ({exc.strerror or exc}); give a file of task "
            "ids, one a line"
        ) from exc
    except UnicodeDecodeError as exc:
        raise UserInputError(f"--task-ids-file: {path} is not UTF-8 text ({exc.reason})") from exc
    ids = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    found = tuple(dict.fromkeys(i for i in ids if i))
    if not found:
        raise UserInputError(
            f"--task-ids-file: {path} holds no task id (one id or glob a line; # starts a comment)"
        )
    return found


@attrs.frozen
class TaskSelection:
    """Ids or globs to keep (none: all), ids or globs to leave out, then the first ``limit``.

    ``ids_file`` adds the ids or globs of that file to ``include`` (read once, here).
    """

    include: tuple[str, ...] = attrs.field(default=(), converter=split_patterns)
    exclude: tuple[str, ...] = attrs.field(default=(), converter=_exclude_patterns)
    limit: int | None = None
    ids_file: str | None = None
    from_file: tuple[str, ...] = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: read_task_ids_file(self.ids_file) if self.ids_file else (),
            takes_self=True,
        ),
    )

    @property
    def everything(self) -> bool:
        return not self.included and not self.exclude and self.limit is None

    @property
    def included(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.include, *self.from_file)))

    def select_ids(self, ids: Sequence[str], *, where: str = "") -> list[str]:
        """The selected ids, in file order; :class:`UserInputError` for a pattern matching none."""
        unmatched = [
            (flag, p)
            for flag, patterns in (
                ("--task-id", self.include),
                (f"--task-ids-file {self.ids_file}", self.from_file),
                ("--exclude", self.exclude),
            )
            for p in patterns
            if not any(matches(i, p) for i in ids)
        ]
        if unmatched:
            raise UserInputError("\n".join(_no_match(flag, p, ids, where) for flag, p in unmatched))
        include = self.included
        chosen = [
            i
            for i in ids
            if (not include or any(matches(i, p) for p in include))
            and not any(matches(i, p) for p in self.exclude)
        ]
        return chosen if self.limit is None else chosen[: self.limit]

    def apply(self, tasks: Sequence[T], *, where: str = "") -> list[T]:
        """The selected tasks, in their order; an error when none is left."""
        wanted = set(self.select_ids([t.id for t in tasks], where=where))
        chosen = [t for t in tasks if t.id in wanted]
        if not chosen:
            raise UserInputError(
                f"no tasks left to work on{_in(where)} after {self.describe()}; "
                "`ksi tasks list` shows the ids"
            )
        return chosen

    def describe(self) -> str:
        """The selection as the options that make it (``--task-id 'a*' --exclude b``)."""
        parts = [f"--task-id {p!r}" for p in self.include]
        if self.ids_file:
            parts.append(f"--task-ids-file {self.ids_file}")
        parts += [f"--exclude {p!r}" for p in self.exclude]
        if self.limit is not None:
            parts.append(f"--limit {self.limit}")
        return " ".join(parts) or "(every task)"


def _in(where: str) -> str:
    return f" in {where}" if where else ""


def _no_match(flag: str, pattern: str, ids: Sequence[str], where: str) -> str:
    if is_glob(pattern):
        msg = f"{flag}: glob {pattern!r} matches no task{_in(where)} ({len(ids)} tasks)"
    else:
        msg = f"{flag}: no task {pattern!r}{_in(where)} ({len(ids)} tasks)"
    close = difflib.get_close_matches(pattern, list(ids), n=3, cutoff=0.5)
    if close:
        return msg + f"; did you mean {', '.join(map(repr, close))}?"
    shown = ", ".join(map(repr, ids[:8]))
    return msg + (f"; task ids: {shown}{', ...' if len(ids) > 8 else ''}" if ids else "")
