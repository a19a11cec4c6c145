"""The typed parts of a task: how it is graded, its starting files, where it runs.

These are the contract between task sources, the runner, environments and
evaluators. Each part is a frozen attrs class whose validators reject a bad
value when the task is built (:class:`~ksi.errors.InvalidTaskError`, naming
the field and what it must be), so a run never starts with a task it cannot
use. :class:`ksi.models.TaskSpec` holds one of each.

Starting files are only ever written by an explicit call
(:meth:`StartingFiles.seed_into`, :meth:`StartingFiles.materialize`), never as
a side effect of reading a value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from ksi.errors import InvalidTaskError
from ksi.fileops import scratch_dir, write_files
from ksi.fstree import copy_tree
from ksi.limits import MAX_TIMEOUT_SEC, timeout_problem
from ksi.protected_files import glob_problem

# The one rule for paths under repo/ (a leaf module with no KSI imports).
from ksi.relpaths import clean_relative_path

#: Seconds an eval command may run when the task does not say (the spec's default).
DEFAULT_EVAL_TIMEOUT_SEC = 300.0

#: Capability sets a container may start with.
CAPABILITY_SETS = ("none", "default")


def slot_setters(cls: type[Any], names: str) -> tuple[Callable[[Any, Any], None], ...]:
    """The setters of the named slots of a frozen, slotted attrs class, in order.

    For the ``checked`` constructors below: a loader that builds tens of
    thousands of values it has already checked sets their slots directly,
    in half the time of attrs' frozen ``__init__`` (which goes through
    ``object.__setattr__`` and the validators for each field).
    """
    return tuple(cls.__dict__[name].__set__ for name in names.split())


class FieldError(InvalidTaskError):
    """A bad value for one field of a part; ``field`` names it (for metadata messages)."""

    def __init__(self, field: str, want: str, value: Any) -> None:
        self.field = field
        self.want = want
        self.value = value
        super().__init__(f"{field} must be {want}, got {value!r}")


def seconds(field: str, value: Any) -> float:
    """``value`` as a number of seconds > 0 and at most :data:`ksi.limits.MAX_TIMEOUT_SEC`
    (ints and numeric strings accepted): the one timeout rule, applied when a task is built."""
    if isinstance(value, bool):
        raise FieldError(field, "a number of seconds > 0", value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise FieldError(field, "a number of seconds > 0", value) from None
    if not (math.isfinite(number) and number > 0):
        raise FieldError(field, "a number of seconds > 0", value)
    if timeout_problem(number):
        raise FieldError(field, f"at most {MAX_TIMEOUT_SEC:g} seconds (7 days)", value)
    return number


def _to_seconds(value: Any) -> float:
    return seconds("timeout_sec", value)


def _check_str(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str):
        raise FieldError(attribute.name, "a string", value)


def _check_text_or_none(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise FieldError(attribute.name, "a non-empty string (or None)", value)


def _to_protect(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, tuple | list):
        raise FieldError("protect", "a list of globs relative to repo/", value)
    for glob in value:
        if glob_problem(glob):
            raise FieldError("protect", "a list of non-empty globs relative to repo/", value)
    return tuple(value)


@attrs.frozen
class EvalSpec:
    """How an attempt is graded by a command: ``command`` ("" = unscored task) and its timeout.

    ``protect``: globs of files under repo/ that are the task's test assets
    beyond the test-file conventions (:mod:`ksi.protected_files`): capture
    restores the seed's copy if the agent changed it and drops new ones. For
    task sources whose tests are not named like tests (``golden/*.out``).
    """

    command: str = attrs.field(default="", validator=_check_str)
    timeout_sec: float = attrs.field(default=DEFAULT_EVAL_TIMEOUT_SEC, converter=_to_seconds)
    protect: tuple[str, ...] = attrs.field(default=(), converter=_to_protect)


def _check_directory(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not (isinstance(value, str) and value):
        raise FieldError(attribute.name, "the path of a directory as a non-empty string", value)


def check_files(field: str, files: Any) -> None:
    """Raise :class:`FieldError` unless ``files`` maps clean relative paths to text."""
    if not isinstance(files, Mapping):
        raise FieldError(field, "a mapping of relative paths to file contents", files)
    for rel, content in files.items():
        why = clean_relative_path(rel)[1] if isinstance(rel, str) else "must be a string"
        if why:
            raise InvalidTaskError(f"{field}[{rel!r}]: {why}")
        if not isinstance(content, str):
            raise FieldError(f"{field}[{rel!r}]", "the file's text (a string)", content)


def _check_inline(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        check_files(attribute.name, value)


@attrs.frozen
class StartingFiles:
    """What a task's ``repo/`` holds before the agent starts.

    Either ``directory`` (an existing directory, copied), or ``files`` (inline
    ``{relative/path: text}``, written on demand), or neither (an empty
    ``repo/``). Nothing is written until :meth:`seed_into` or
    :meth:`materialize` is called.
    """

    directory: str | None = attrs.field(default=None, validator=_check_directory)
    files: Mapping[str, str] | None = attrs.field(default=None, validator=_check_inline)

    def __attrs_post_init__(self) -> None:
        if self.directory is not None and self.files is not None:
            raise InvalidTaskError(
                "starting files: give a directory or inline files, not both "
                f"(directory={self.directory!r}, {len(self.files)} inline files)"
            )

    @classmethod
    def checked_inline(cls, files: dict[str, str]) -> StartingFiles:
        """Inline files a loader has already checked path by path (skips the re-check).

        Loading 10,000 tasks must not check 30,000 paths twice; use only with
        paths that passed :func:`ksi.relpaths.clean_relative_path`.
        """
        inst = object.__new__(cls)
        _SET_DIRECTORY(inst, None)
        _SET_INLINE(inst, files)
        return inst

    @property
    def kind(self) -> Literal["directory", "inline", "empty"]:
        if self.directory is not None:
            return "directory"
        return "inline" if self.files else "empty"

    def seed_into(self, dest: Path, *, task_id: str = "") -> None:
        """Fill ``dest`` (created if missing) with the starting files.

        A ``directory`` that does not exist is the task author's error.
        """
        dest = Path(dest)
        if self.directory is None:
            write_files(dest, self.files or {})
            return
        src = Path(self.directory)
        if not src.is_dir():
            who = f"task {task_id!r}: " if task_id else ""
            raise InvalidTaskError(
                f"{who}metadata['repo_path'] / starting_files.directory = {self.directory!r} "
                "is not an existing directory; it must hold the task's starting files"
            )
        dest.mkdir(parents=True, exist_ok=True)
        copy_tree(src, dest, merge=True)

    def materialize(self) -> StartingFiles:
        """The same starting files as an existing directory (written now if inline).

        A ``directory`` is returned as it is. Inline (or no) files are written
        into a new directory that lives until this process exits. Only the
        original KSI's loaders, which promise ``metadata["repo_path"]``, need this.
        """
        if self.directory is not None:
            return self
        path = scratch_dir()
        write_files(path, self.files or {})
        return StartingFiles(directory=str(path))

    def describe(self) -> str:
        """A short human description: the directory, ``N files (inline)`` or ``(empty)``."""
        if self.directory is not None:
            return self.directory
        count = len(self.files or {})
        return f"{count} file{'s' if count != 1 else ''} (inline)" if count else "(empty)"


_SET_DIRECTORY, _SET_INLINE = slot_setters(StartingFiles, "directory files")


def _to_cpus(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise FieldError("cpus", "a number of CPUs > 0 (e.g. 2 or 0.5)", value)
    if not math.isfinite(value):
        raise FieldError("cpus", "a number of CPUs > 0 (e.g. 2 or 0.5)", value)
    return float(value)


def _to_memory_mb(value: Any) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not value >= 4
    ):
        raise FieldError("memory_mb", "a number of MiB >= 4 (e.g. 2048)", value)
    return int(value)


def _to_user(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FieldError("user", "host, image, or UID[:GID] / a user name in the image", value)
    return value.strip()


def _check_capabilities(_inst: object, _attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value not in CAPABILITY_SETS:
        raise FieldError("capabilities", "'none' or 'default'", value)


def _to_agent_timeout(value: Any) -> float | None:
    return None if value is None else seconds("agent_timeout_sec", value)


@attrs.frozen
class Runtime:
    """Where and how the agent runs; ``None`` everywhere means "the run's options decide".

    * ``image`` / ``dockerfile`` (+ ``docker_context``, default: the
      Dockerfile's directory): the task's container image; ``image`` wins.
    * ``cpus``, ``memory_mb``, ``user`` (``host``, ``image``, ``UID[:GID]``),
      ``capabilities`` (``none``/``default``), ``network``: the container's
      settings; each set value wins over the run's option.
    * ``workdir``: the directory the agent starts in, for tasks that work in
      the image's own directory (Harbor's ``/app``) instead of ``repo/``.
    * ``agent_timeout_sec``: the agent's time limit unless the run sets one.
    """

    image: str | None = attrs.field(default=None, validator=_check_text_or_none)
    dockerfile: str | None = attrs.field(default=None, validator=_check_text_or_none)
    docker_context: str | None = attrs.field(default=None, validator=_check_text_or_none)
    cpus: float | None = attrs.field(default=None, converter=_to_cpus)
    memory_mb: int | None = attrs.field(default=None, converter=_to_memory_mb)
    user: str | None = attrs.field(default=None, converter=_to_user)
    capabilities: str | None = attrs.field(default=None, validator=_check_capabilities)
    network: str | None = attrs.field(default=None, validator=_check_text_or_none)
    workdir: str | None = attrs.field(default=None, validator=_check_text_or_none)
    agent_timeout_sec: float | None = attrs.field(default=None, converter=_to_agent_timeout)


def _check_solution_files(_inst: object, _attribute: attrs.Attribute[Any], value: Any) -> None:
    # Paths are the oracle's to check (it reports every bad one, by task).
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise FieldError("solution.files", "a mapping of relative paths to file contents", value)
    for rel, content in value.items():
        if not isinstance(rel, str) or not isinstance(content, str):
            raise FieldError(
                f"solution.files[{rel!r}]", "a string path mapped to a string", content
            )


def _check_solution_command(_inst: object, _attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise FieldError("solution.command", "a shell command (a string) or None", value)


@attrs.frozen
class Solution:
    """A reference solution (for the ``oracle`` agent): files written into repo/, then a command."""

    files: Mapping[str, str] | None = attrs.field(default=None, validator=_check_solution_files)
    command: str | None = attrs.field(default=None, validator=_check_solution_command)

    @classmethod
    def checked(cls, files: dict[str, str] | None, command: str | None) -> Solution:
        """A solution a loader has already checked (skips the re-check, as ``checked_inline``)."""
        inst = object.__new__(cls)
        _SET_SOLUTION_FILES(inst, files)
        _SET_SOLUTION_COMMAND(inst, command)
        return inst

    def as_dict(self) -> dict[str, Any]:
        """The record's ``solution`` object, with only the keys that are set."""
        out: dict[str, Any] = {}
        if self.files is not None:
            out["files"] = dict(self.files)
        if self.command is not None:
            out["command"] = self.command
        return out


_SET_SOLUTION_FILES, _SET_SOLUTION_COMMAND = slot_setters(Solution, "files command")


@attrs.frozen
class TaskOrigin:
    """Where a task came from: its source's name, file, and place in the file."""

    source: str = ""
    file: str = ""
    #: ``line 7`` (JSONL), ``record 3`` (JSON array), or "".
    location: str = ""

    def __attrs_post_init__(self) -> None:
        # One check for the three (a loader builds one origin per task).
        if not (
            isinstance(self.source, str)
            and isinstance(self.file, str)
            and isinstance(self.location, str)
        ):
            bad = next(
                n for n in ("source", "file", "location") if not isinstance(getattr(self, n), str)
            )
            raise FieldError(f"origin.{bad}", "a string", getattr(self, bad))

    @classmethod
    def checked(cls, source: str, file: str, location: str) -> TaskOrigin:
        """An origin of three strings a loader made (skips the check, as ``checked_inline``)."""
        inst = object.__new__(cls)
        _SET_SOURCE(inst, source)
        _SET_FILE(inst, file)
        _SET_LOCATION(inst, location)
        return inst


_SET_SOURCE, _SET_FILE, _SET_LOCATION = slot_setters(TaskOrigin, "source file location")
