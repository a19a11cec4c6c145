"""The one converter that turns KSI's models into JSON-ready data and back.

Reading is lenient about unknown keys (a journal written by a newer KSI must
still resume); files a person may edit (``run.json``, forum posts, bundles) are
read with :func:`strict_converter`, which takes each value only as the JSON
type its field has.
"""

from __future__ import annotations

import enum
import functools
import json
from typing import Any, TypeVar

import cattrs
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    is_mapping,
    is_mutable_sequence,
    is_sequence,
    list_structure_factory,
    mapping_structure_factory,
)

from ksi.errors import UserInputError
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


class WrongType(UserInputError, ValueError):
    """A value of another JSON type than its field's (cattrs adds the type it expected)."""

    def __init__(self, value: Any, wanted: str) -> None:
        scalar = isinstance(value, str | int | float) and not isinstance(value, bool)
        shown = f"{value!r} ({_json_type(value)})" if scalar else _json_type(value)
        super().__init__(f"got {shown}, not {wanted}")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    names = {str: "a string", int: "an integer", float: "a number", list: "a list"}
    names |= {dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _exactly(*kinds: type, wanted: str, cast: type | None = None) -> Any:
    """A structure hook taking only values of ``kinds`` (a bool is never a number)."""

    def structure(value: Any, _t: Any) -> Any:
        if isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds):
            raise WrongType(value, wanted)
        return cast(value) if cast else value

    return structure


def _json_array_or_object(kind: type, factory: Any) -> Any:
    """A hook factory taking only a JSON array (``kind`` list) or object (dict), then
    structuring its items as cattrs does."""
    wanted = "a list" if kind is list else "an object"

    def make(t: Any, conv: cattrs.Converter) -> Any:
        items = factory(t, conv)

        def structure(value: Any, _t: Any) -> Any:
            if not isinstance(value, kind):
                raise WrongType(value, wanted)
            return items(value, t)

        return structure

    return make


_string = _exactly(str, wanted="a string")


@functools.cache
def strict_converter(*, forbid_extra_keys: bool = False) -> cattrs.Converter:
    """A converter that converts nothing: each value must already be its field's JSON type.

    One per setting, shared (so register no hook on it): cattrs writes a class's
    structuring function once per converter, and a run reads its configuration
    three times (a check of it, ``run.json`` and its summary): 10 ms each.

    cattrs alone calls the type on what it finds: ``"3"`` and ``3.7`` become 3, 5
    becomes ``"5"``, an object the list of its keys, a string the tuple of its
    characters. A file someone edited must say what it means, or be refused with
    the field named. An integer is a number (JSON writes 1.0 as 1 in some tools).
    """
    conv = cattrs.Converter(forbid_extra_keys=forbid_extra_keys)
    conv.register_structure_hook(str, _string)
    conv.register_structure_hook(int, _exactly(int, wanted="an integer"))
    conv.register_structure_hook(float, _exactly(int, float, wanted="a number", cast=float))
    conv.register_structure_hook(bool, _exactly(bool, wanted="true or false"))
    # A choice is its word: without this, the hook for str would take the StrEnums too.
    conv.register_structure_hook(enum.StrEnum, lambda word, choice: choice(_string(word, choice)))
    conv.register_structure_hook_factory(
        is_mutable_sequence, _json_array_or_object(list, list_structure_factory)
    )
    conv.register_structure_hook_factory(
        lambda t: is_sequence(t) and not is_mutable_sequence(t),
        _json_array_or_object(list, homogenous_tuple_structure_factory),
    )
    conv.register_structure_hook_factory(
        is_mapping, _json_array_or_object(dict, mapping_structure_factory)
    )
    return conv


def dumps_line(obj: Any) -> str:
    """One compact JSON line (no newline inside, whatever the content)."""
    return json.dumps(to_data(obj), ensure_ascii=False, separators=(",", ":"))


def _describe(exc: BaseException, type_: type | None) -> str:
    """cattrs' wording, plus a validator's own message (cattrs says only "invalid value").

    A validator runs in the class's ``__init__``, so cattrs cannot tell which
    field failed; the message names it, and what was expected.
    """
    if isinstance(exc, WrongType) and type_ is not None:
        return f"{exc}; expected {getattr(type_, '__name__', type_)}"
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
