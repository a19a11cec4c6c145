"""The original KSI's metadata keys, and the typed task part each one fills.

Code written for the original KSI builds tasks as ``TaskSpec(...,
metadata={"repo_path": ..., "eval_command": ...})``. :data:`LEGACY_KEYS` is
the one table of those keys. The rule, applied once, when a
:class:`~ksi.models.TaskSpec` is built (:func:`typed_part` is the default of
each typed part):

* a typed part that is given is used as given;
* a part left out is built from the metadata keys that map to it (or is the
  part's default when there are none);
* ``metadata`` is kept exactly as given: nothing is written back into it.

A bad value raises :class:`~ksi.errors.InvalidTaskError` naming the task and
the key. Keys KSI does not know belong to the plugin that set them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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
_KEYS = frozenset(LEGACY_KEYS)
_KEY_OF = {target: key for key, target in LEGACY_KEYS.items()}

#: Each typed part's value when neither the part nor any key of it is given.
DEFAULTS: dict[str, Any] = {
    "eval": EvalSpec(),
    "starting_files": StartingFiles(),
    "runtime": Runtime(),
    "solution": None,
    "origin": TaskOrigin(),
    "workspace_note": True,
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


def typed_part(task_id: str, metadata: Mapping[str, Any], part: str) -> Any:
    """TaskSpec part ``part`` as the original's keys in ``metadata`` describe it.

    The default of every typed part of a :class:`~ksi.models.TaskSpec`, so it
    runs only for a part the caller left out.
    """
    default = DEFAULTS[part]
    if not metadata or _KEYS.isdisjoint(metadata):
        return default
    if part == "solution":
        return _solution_from(task_id, metadata.get("solution"))
    if part == "workspace_note":
        return metadata.get("workspace_note") is not False
    fields: dict[str, Any] = {}
    for key, (key_part, field) in LEGACY_KEYS.items():
        if key_part != part or key not in metadata:
            continue
        try:
            value = _READ.get((part, field), lambda v: v)(metadata[key])
        except InvalidTaskError as exc:
            raise _bad_key(task_id, key, exc) from None
        if value is not None:
            fields[field] = value
    if not fields:
        return default
    try:
        return type(default)(**fields)
    except FieldError as exc:
        field = exc.field.split(".")[-1].split("[")[0]
        raise _bad_key(task_id, _KEY_OF.get((part, field), field), exc) from None
    except InvalidTaskError as exc:
        raise InvalidTaskError(f"task {task_id!r}: {exc}") from None


def same_extras(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Metadata equality that leaves the original's keys out: the typed parts say what they mean.

    So the typed form and the metadata form of one task are equal tasks.
    """
    return {k: v for k, v in a.items() if k not in _KEYS} == {
        k: v for k, v in b.items() if k not in _KEYS
    }
