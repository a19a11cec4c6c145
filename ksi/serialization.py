"""The one converter that turns KSI's models into JSON-ready data and back.

Reading is lenient about unknown keys (a journal written by a newer KSI must
still resume); user-input validation uses its own strict converters.
"""

from __future__ import annotations

import enum
import json
from typing import Any, TypeVar

import cattrs

from ksi.fileops import write_json_atomic as write_json_atomic  # importable here too, as before
from ksi.models import EvalResult

T = TypeVar("T")

converter = cattrs.Converter()
# An EvalResult is written as the original KSI's result dict (with its derived
# ``resolved``), which reading ignores.
converter.register_unstructure_hook(EvalResult, EvalResult.as_dict)
# A status or choice is written as its word (a StrEnum member is one, but the data
# handed out is plain, as it was before the words were enums).
converter.register_unstructure_hook(enum.StrEnum, lambda member: member.value)


def to_data(obj: Any) -> Any:
    return converter.unstructure(obj)


def from_data(data: Any, cls: type[T]) -> T:
    return converter.structure(data, cls)


def dumps_line(obj: Any) -> str:
    """One compact JSON line (no newline inside, whatever the content)."""
    return json.dumps(to_data(obj), ensure_ascii=False, separators=(",", ":"))


def _describe(exc: BaseException, type_: type | None) -> str:
    """cattrs' wording, plus a validator's own message (cattrs says only "invalid value").

    A validator runs in the class's ``__init__``, so cattrs cannot tell which
    field failed; the message names it, and what was expected.
    """
    described = cattrs.v.format_exception(exc, type_)
    if type(exc) is ValueError and str(exc):
        return f"{described} ({exc})"
    return described


def validation_problems(exc: BaseException, path: str = "$") -> list[str]:
    """What is wrong with data a strict converter refused, each addressed by its JSON path
    (``$.notes[2].kind: invalid value (...)``); every problem, not only the first."""
    if isinstance(exc, cattrs.BaseValidationError):
        return list(cattrs.transform_error(exc, path=path, format_exception=_describe))
    return [str(exc)]


def lone_surrogate_path(data: Any, path: str = "$") -> str | None:
    """The JSON path of the first string that is not text (a lone surrogate such as
    ``"\\ud800"``, which JSON allows and no file can hold), or ``None``."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return path
    elif isinstance(data, dict):
        for key, value in data.items():
            found = lone_surrogate_path(key, path) or lone_surrogate_path(value, f"{path}.{key}")
            if found:
                return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = lone_surrogate_path(value, f"{path}[{i}]")
            if found:
                return found
    return None
