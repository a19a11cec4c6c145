"""The original KSI's metadata keys, and how each maps onto a typed task part.

Code written for the original KSI builds tasks as ``TaskSpec(...,
metadata={"repo_path": ..., "eval_command": ...})`` and reads those keys
back. :data:`LEGACY_KEYS` is the one table of them. The rule, applied when a
:class:`~ksi.models.TaskSpec` is built:

* a typed part that is given (not left at its default) wins;
* a part left at its default is filled from the metadata keys that map to it;
* afterwards every legacy key present in ``metadata`` is rewritten from the
  typed parts, so reading it never disagrees with what KSI uses
  (``repo_path`` is dropped for inline starting files, ``""`` when there are none).

Keys KSI does not know stay in ``metadata`` untouched: they belong to the
plugin that set them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ksi.errors import InvalidTaskError
from ksi.task_parts import (
    EvalSpec,
    FieldError,
    Runtime,
    Solution,
    StartingFiles,
    TaskOrigin,
    seconds,
)

if TYPE_CHECKING:
    from ksi.models import TaskSpec

#: metadata key -> (TaskSpec attribute, field of that part or "" for the whole value).
LEGACY_KEYS: dict[str, tuple[str, str]] = {
    "task_source": ("origin", "source"),
    "tasks_file": ("origin", "file"),
    "source_location": ("origin", "location"),
    "repo_path": ("starting_files", "directory"),
    "eval_command": ("eval", "command"),
    "eval_timeout_sec": ("eval", "timeout_sec"),
    "solution": ("solution", ""),
    "workspace_note": ("workspace_note", ""),
    "docker_image": ("runtime", "image"),
    "dockerfile": ("runtime", "dockerfile"),
    "docker_context": ("runtime", "docker_context"),
    "cpus": ("runtime", "cpus"),
    "memory_mb": ("runtime", "memory_mb"),
    "docker_user": ("runtime", "user"),
    "docker_capabilities": ("runtime", "capabilities"),
    "agent_workdir": ("runtime", "workdir"),
    "agent_timeout_sec": ("runtime", "agent_timeout_sec"),
}
_KEY_OF = {target: key for key, target in LEGACY_KEYS.items()}
_KEYS = frozenset(LEGACY_KEYS)

#: Each part's class and its value when left out.
_PARTS: dict[str, tuple[type[Any], Any]] = {
    "origin": (TaskOrigin, TaskOrigin()),
    "starting_files": (StartingFiles, StartingFiles()),
    "eval": (EvalSpec, EvalSpec()),
    "runtime": (Runtime, Runtime()),
}


def _text(value: Any) -> Any:
    return "" if value is None else value


def _path_text(value: Any) -> Any:
    # The original accepted a path object; "" meant "not set" (no starting files, no image).
    text = str(value) if value is not None and not isinstance(value, str) else value
    return text or None


#: How a legacy value is read (the original's leniency), per (part, field).
_READ: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("origin", "source"): _text,
    ("origin", "file"): _text,
    ("origin", "location"): _text,
    ("eval", "command"): lambda v: "" if v is None else str(v),
    ("eval", "timeout_sec"): lambda v: None if v in (None, "") else seconds("timeout_sec", v),
    ("starting_files", "directory"): _path_text,
    ("runtime", "image"): _path_text,
    ("runtime", "workdir"): _path_text,
    ("runtime", "dockerfile"): _path_text,
    ("runtime", "docker_context"): _path_text,
}


def has_legacy_keys(metadata: Mapping[str, Any]) -> bool:
    return not _KEYS.isdisjoint(metadata)


def _bad_key(task_id: str, key: str, exc: InvalidTaskError) -> InvalidTaskError:
    message = str(exc)
    if isinstance(exc, FieldError):
        message = f"must be {exc.want}, got {exc.value!r}"
    return InvalidTaskError(
        f"task {task_id!r}: metadata {key} {message}; fix the task (or leave {key} out)"
    )


def _solution_from(task_id: str, raw: Any) -> Solution | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidTaskError(
            f"task {task_id!r}: metadata solution must be an object with `files` and/or "
            f"`command`, got {type(raw).__name__}"
        )
    try:
        return Solution(files=raw.get("files"), command=raw.get("command"))
    except InvalidTaskError as exc:
        raise InvalidTaskError(f"task {task_id!r}: metadata {exc}") from None


def parts_from_metadata(task: TaskSpec) -> dict[str, Any]:
    """The typed parts to set on ``task`` from its legacy metadata keys (parts left at default)."""
    meta = task.metadata
    fields: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    for key, (part, field) in LEGACY_KEYS.items():
        if key not in meta:
            continue
        raw = meta[key]
        if part == "solution":
            if task.solution is None:
                out["solution"] = _solution_from(task.id, raw)
            continue
        if part == "workspace_note":
            if task.workspace_note and raw is False:
                out["workspace_note"] = False
            continue
        if getattr(task, part) != _PARTS[part][1]:
            continue  # the typed part was given: it wins
        try:
            value = _READ.get((part, field), lambda v: v)(raw)
        except InvalidTaskError as exc:
            raise _bad_key(task.id, key, exc) from None
        if value is not None:
            fields.setdefault(part, {})[field] = value
    for part, values in fields.items():
        cls = _PARTS[part][0]
        try:
            out[part] = cls(**values)
        except FieldError as exc:
            field = exc.field.split(".")[-1].split("[")[0]
            key = _KEY_OF.get((part, field), field)
            raise _bad_key(task.id, key, exc) from None
        except InvalidTaskError as exc:
            raise InvalidTaskError(f"task {task.id!r}: {exc}") from None
    return out


def legacy_value(task: TaskSpec, key: str) -> tuple[bool, Any]:
    """``(True, value)`` of legacy ``key`` as the typed parts say, or ``(False, None)`` if none."""
    part, field = LEGACY_KEYS[key]
    if part == "solution":
        return True, task.solution.as_dict() if task.solution is not None else None
    if part == "workspace_note":
        return True, task.workspace_note
    if part == "starting_files" and task.starting_files.directory is None:
        # "" was the original's "no starting files"; inline files have no directory.
        return (True, "") if task.starting_files.kind == "empty" else (False, None)
    return True, getattr(getattr(task, part), field)


def _same_solution(raw: Any, solution: Solution | None) -> bool:
    if raw is None or solution is None:
        return raw is None and solution is None
    return isinstance(raw, Mapping) and (raw.get("files"), raw.get("command")) == (
        solution.files,
        solution.command,
    )


def mirrored_metadata(task: TaskSpec) -> dict[str, Any]:
    """``task.metadata`` with every legacy key it holds rewritten from the typed parts."""
    out: dict[str, Any] = {}
    for key, value in task.metadata.items():
        if key == "solution" and _same_solution(value, task.solution):
            pass  # the caller's own spelling of the same solution (e.g. "files": None)
        elif key in _KEYS:
            present, value = legacy_value(task, key)
            if not present:
                continue
        out[key] = value
    return out


def original_metadata(task: TaskSpec) -> dict[str, Any]:
    """The metadata the original KSI's loaders returned: its seven keys plus the plugin's own."""
    keys = (
        "task_source",
        "repo_path",
        "eval_command",
        "eval_timeout_sec",
        "tasks_file",
        "source_location",
        "solution",
    )
    out = dict(task.metadata)
    for key in keys:
        present, value = legacy_value(task, key)
        if present:
            out[key] = value
    return out


def same_extras(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Metadata equality that ignores legacy keys (they only mirror the typed parts)."""
    return {k: v for k, v in a.items() if k not in _KEYS} == {
        k: v for k, v in b.items() if k not in _KEYS
    }
