"""Turning ``KEY=VALUE`` strings from the command line into component instances.

Components are attrs classes whose fields are their options, so one
converter validates every component's options the same way: unknown keys are
rejected with the list of valid ones, and values are converted to the field's
type (``"true"``/``"no"`` to bool, ``"30"`` to int...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

from ksi.errors import OptionsError, UserInputError
from ksi.models import Problem

TRUE_WORDS = frozenset({"true", "yes", "1", "on"})
FALSE_WORDS = frozenset({"false", "no", "0", "off"})


def parse_bool(value: Any) -> bool:
    """Accept the words a user types for yes and no; reject anything else."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"expected true/false (or yes/no, 1/0), got {value!r}")


_converter = cattrs.Converter(forbid_extra_keys=True)
_converter.register_structure_hook(bool, lambda v, _t: parse_bool(v))


def parse_key_values(pairs: Iterable[str], option: str) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; malformed pairs are user errors."""
    result: dict[str, str] = {}
    problems = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            problems.append(
                Problem(option, f"{pair!r} is not KEY=VALUE (e.g. {option} cmd='echo hi')")
            )
            continue
        result[key.strip()] = value
    if problems:
        raise OptionsError(problems)
    return result


def option_names(cls: type) -> list[str]:
    if attrs.has(cls):
        return [f.alias or f.name for f in attrs.fields(cls) if f.init]
    return []


def create_component(
    cls: Any, options: Mapping[str, Any], *, kind: str, option_flag: str
) -> Any:
    """Instantiate a registered component class with user options, or explain what is wrong."""
    if not isinstance(cls, type):
        if options:
            raise UserInputError(f"{kind} {getattr(cls, 'name', cls)!r} takes no options")
        return cls
    if not attrs.has(cls):
        try:
            return cls(**options)
        except TypeError as exc:
            raise UserInputError(f"{option_flag}: {kind} {cls.name!r}: {exc}") from exc
    valid = option_names(cls)
    label = f"{kind} {getattr(cls, 'name', cls.__name__)!r}"
    try:
        return _converter.structure(dict(options), cls)
    except ClassValidationError as exc:
        problems = []
        for sub in exc.exceptions:
            if isinstance(sub, ForbiddenExtraKeysError):
                for key in sorted(sub.extra_fields):
                    problems.append(
                        Problem(
                            option_flag,
                            f"{label} has no option {key!r}; valid options: "
                            f"{', '.join(valid) if valid else '(none)'}",
                        )
                    )
            else:
                note = getattr(sub, "__notes__", [""])
                field = note[0] if note else ""
                problems.append(Problem(option_flag, f"{label}: {field}: {sub}".strip()))
        raise OptionsError(problems) from exc
    except (ValueError, TypeError) as exc:
        raise OptionsError([Problem(option_flag, f"{label}: {exc}")]) from exc
