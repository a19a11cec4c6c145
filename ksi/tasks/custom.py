"""The built-in ``custom`` task source: tasks from a ``.json`` or ``.jsonl`` file.

Records are checked by :mod:`ksi.tasks.schema`; this module turns clean
records into :class:`~ksi.models.TaskSpec` objects.

Why the metadata is lazy: the original KSI's API promises
``metadata["repo_path"]``, an existing directory holding the starting files.
Writing 10,000 directories at load time would make loading a big file slow
and litter the disk for commands that never look (``ksi tasks list``, a
runner that seeds ``repo/`` straight from the inline files). So
``metadata`` is a :class:`TaskMetadata`, a ``dict`` that writes a task's
inline files into a per-load temporary directory (removed when the process
exits) the first time anything reads ``repo_path``: ``[]``, ``get``,
``items``, ``values``, iteration, ``dict(...)``, ``copy``, ``json.dumps``...
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.errors import TaskLoadError
from ksi.hookspecs import hookimpl
from ksi.models import Problem, TaskSpec
from ksi.tasks.schema import TaskRecord, parse_tasks_file

REPO_PATH = "repo_path"


class _LoadRoot:
    """The temporary directory for one load's inline files, created on first need."""

    def __init__(self) -> None:
        self.path = Path(tempfile.gettempdir()) / f"ksi-tasks-{os.getpid()}-{uuid.uuid4().hex}"
        self.lock = threading.Lock()
        self._created = False
        #: ``<root>/task-``: a task's directory is this plus its index.
        self.prefix = f"{self.path}{os.sep}task-"

    def ensure(self) -> None:
        if not self._created:
            self.path.mkdir(mode=0o700)
            atexit.register(_remove_tree, self.path, os.getpid())
            self._created = True


def _remove_tree(path: Path, owner_pid: int) -> None:
    # A forked child that exits normally must not delete its parent's files.
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)


def write_files(dest: Path, files: Mapping[str, str]) -> None:
    """Write ``{relative/path: text}`` under ``dest`` (paths already validated)."""
    dest.mkdir(parents=True, exist_ok=True)
    made: set[Path] = {dest}
    for rel, content in files.items():
        target = dest / rel
        parent = target.parent
        if parent not in made:
            parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        target.write_bytes(content.encode("utf-8"))


class TaskMetadata(dict[str, Any]):
    """A task's metadata; ``repo_path`` is written to disk the first time it is read.

    Behaves as a plain ``dict``. ``repo_path`` is always present and always
    the same string; for tasks with inline ``files`` (or no starting files)
    the directory it names is created on first read of that key through any
    normal route. ``"repo_path" in metadata`` and ``len`` do not write
    anything. Copies (``copy()``, ``copy.copy``, pickling) are plain dicts
    of the materialized values.
    """

    __slots__ = ("_inline_files", "_lock", "_pending", "_root", "_task_id")

    def __init__(
        self,
        data: Mapping[str, Any],
        *,
        inline_files: dict[str, str] | None,
        root: _LoadRoot | None,
        task_id: str | None = None,
    ) -> None:
        super().__init__(data)
        self._inline_files = inline_files
        self._pending = inline_files is not None
        self._root = root
        self._lock = root.lock if root is not None else threading.Lock()
        self._task_id = task_id

    # -- what the seeder uses ----------------------------------------------------
    @property
    def inline_files(self) -> Mapping[str, str] | None:
        """Starting files to write straight into a workspace, or ``None`` to copy repo_path."""
        return self._inline_files

    @property
    def materialized(self) -> bool:
        """Whether ``repo_path`` exists on disk yet (for tests and diagnostics)."""
        return not self._pending

    def materialize(self) -> None:
        """Write the inline starting files into ``repo_path`` now (idempotent, thread-safe)."""
        if not self._pending:
            return
        with self._lock:
            if not self._pending:
                return
            try:
                if self._root is not None:
                    self._root.ensure()
                write_files(Path(dict.__getitem__(self, REPO_PATH)), self._inline_files or {})
            except OSError as exc:
                raise self._write_error(exc) from exc
            self._pending = False

    def _write_error(self, exc: OSError) -> TaskLoadError:
        get = super().get
        return TaskLoadError(
            [
                Problem(
                    str(get("tasks_file", "")),
                    f"could not write the task's starting files into {get(REPO_PATH)!r}: "
                    f"{exc.strerror or exc}",
                    str(get("source_location", "")),
                    self._task_id,
                    "$.files",
                )
            ]
        )

    # -- every read route that can reveal repo_path ---------------------------------
    def __getitem__(self, key: Any) -> Any:
        if self._pending and key == REPO_PATH:
            self.materialize()
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        if self._pending and key == REPO_PATH:
            self.materialize()
        return super().get(key, default)

    def __iter__(self) -> Iterator[str]:
        self.materialize()
        return super().__iter__()

    def keys(self) -> Any:
        self.materialize()
        return super().keys()

    def items(self) -> Any:
        self.materialize()
        return super().items()

    def values(self) -> Any:
        self.materialize()
        return super().values()

    def copy(self) -> dict[str, Any]:
        self.materialize()
        return dict(super().items())

    def __reduce__(self) -> Any:
        return (dict, (self.copy(),))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__reduce__()

    def __repr__(self) -> str:
        self.materialize()
        return super().__repr__()

    def pop(self, key: Any, *default: Any) -> Any:
        if key == REPO_PATH:
            self.materialize()
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, Any]:
        self.materialize()
        return super().popitem()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key == REPO_PATH:
            self.materialize()
        return super().setdefault(key, default)

    # -- writes: a caller replacing repo_path takes over the starting files -----------
    def __setitem__(self, key: str, value: Any) -> None:
        if key == REPO_PATH:
            self._forget_inline()
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        if key == REPO_PATH:
            self._forget_inline()
        super().__delitem__(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        other = dict(*args, **kwargs)
        if REPO_PATH in other:
            self._forget_inline()
        super().update(other)

    def __ior__(self, other: Any) -> TaskMetadata:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        self._forget_inline()
        super().clear()

    def _forget_inline(self) -> None:
        with self._lock:
            self._pending = False
            self._inline_files = None


def _task_from_record(record: TaskRecord, index: int, root: _LoadRoot, tasks_file: str) -> TaskSpec:
    if record.workspace_dir is not None:
        repo_path = str(record.workspace_dir)
        inline: dict[str, str] | None = None
    else:
        repo_path = f"{root.prefix}{index:05d}"
        inline = record.files if record.files is not None else {}
    data = {
        "task_source": CustomTaskSource.name,
        REPO_PATH: repo_path,
        "eval_command": record.eval_command,
        "eval_timeout_sec": record.eval_timeout_sec,
        "tasks_file": tasks_file,
        "source_location": record.location,
        "solution": record.solution,
    }
    metadata = TaskMetadata(data, inline_files=inline, root=root, task_id=record.task_id)
    return TaskSpec(id=record.task_id, repo="", prompt=record.prompt, metadata=metadata)


@attrs.define
class CustomTaskSource:
    """Tasks you define yourself, one JSON record each (see docs/your-own-tasks.md)."""

    name: ClassVar[str] = "custom"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Your own tasks from a .json array or .jsonl file (task_id, prompt, files or "
        "workspace_dir, eval command, solution)"
    )
    default_evaluator: ClassVar[str] = "command"

    def load(self, path: Path | str) -> list[TaskSpec]:
        """Every task in ``path``; raises :class:`TaskLoadError` listing *all* problems."""
        path = Path(path)
        parsed = parse_tasks_file(path, str(path))
        if parsed.problems:
            count = len(parsed.problems)
            raise TaskLoadError(
                parsed.problems,
                header=f"{path}: {count} problem{'s' if count != 1 else ''} in the tasks "
                "file; no task was loaded",
            )
        root = _LoadRoot()
        tasks_file = str(path.resolve())
        return [
            _task_from_record(record, i, root, tasks_file)
            for i, record in enumerate(parsed.records, start=1)
        ]

    def validate(self, path: Path | str) -> list[Problem]:
        """Every problem in ``path`` (empty list when it loads cleanly); never raises."""
        path = Path(path)
        return parse_tasks_file(path, str(path)).problems


def load_custom_tasks(path: Path | str) -> list[TaskSpec]:
    """The original KSI's entry point: ``CustomTaskSource().load(path)``."""
    return CustomTaskSource().load(path)


@hookimpl(trylast=True)
def ksi_register_task_sources(register: Callable[[Any], None]) -> None:
    """Register the built-in ``custom`` source; a plugin's ``tryfirst`` hook may override it."""
    register(CustomTaskSource)
