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
