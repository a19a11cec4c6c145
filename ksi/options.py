"""Turning ``KEY=VALUE`` strings from the command line into component instances.

Components are attrs classes whose fields are their options, so one
converter validates every component's options the same way: unknown keys are
rejected with the list of valid ones, values are converted to the field's
type (``"true"``/``"no"`` to bool, ``"30"`` to int, ``"a,b"`` to a tuple...),
and every problem is reported at once, naming the option and what it expects.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote, ClassValidationError, ForbiddenExtraKeysError

from ksi.errors import OptionsError, UserInputError
from ksi.models import Problem

TRUE_WORDS = frozenset({"true", "yes", "1", "on"})
FALSE_WORDS = frozenset({"false", "no", "0", "off"})
NONE_WORDS = frozenset({"", "none", "null"})
_SEQUENCES = (list, tuple, set, frozenset)


def parse_bool(value: Any) -> bool:
    """Accept the words a user types for yes and no; reject anything else."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"expected true/false (or yes/no, on/off, 1/0), got {value!r}")


def _parse_int(value: Any, _t: Any) -> int:
    # int(2.7) would silently drop the fraction; a user who typed 2.7 meant something else.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected a whole number, got {value!r}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"expected a whole number, got {value!r}") from None


def _parse_float(value: Any, _t: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a number, got {value!r}")
    try:
        return float(str(value).strip())
    except ValueError:
        raise ValueError(f"expected a number, got {value!r}") from None


def _optional_member(t: Any) -> Any | None:
    """``X`` for ``X | None`` (and ``Optional[X]``), else ``None``."""
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(t)) == 2:
            return args[0]
    return None


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(bool, lambda v, _t: parse_bool(v))
    conv.register_structure_hook(int, _parse_int)
    conv.register_structure_hook(float, _parse_float)

    # "a,b" -> ("a", "b"): cattrs alone would iterate the string's characters.
    def is_homogeneous_sequence(t: Any) -> bool:
        origin, args = typing.get_origin(t), typing.get_args(t)
        if origin is tuple:
            return len(args) == 2 and args[1] is Ellipsis
        return origin in _SEQUENCES and len(args) == 1

    def sequence_hook(t: Any) -> Any:
        origin, item_type = typing.get_origin(t), typing.get_args(t)[0]

        def structure(value: Any, _t: Any) -> Any:
            if isinstance(value, str):
                value = [part.strip() for part in value.split(",") if part.strip()]
            return origin(conv.structure(item, item_type) for item in value)

        return structure

    conv.register_structure_hook_factory(is_homogeneous_sequence, sequence_hook)

    # "none" -> None for optional options; anything else is the inner type.
    def optional_hook(t: Any) -> Any:
        inner = _optional_member(t)
        base = conv.get_structure_hook(inner)

        def structure(value: Any, _t: Any) -> Any:
            if value is None or (isinstance(value, str) and value.strip().lower() in NONE_WORDS):
                return None
            return base(value, inner)

        return structure

    conv.register_structure_hook_factory(lambda t: _optional_member(t) is not None, optional_hook)
    return conv


_converter = _make_converter()


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
    """The option keys ``cls`` accepts, in declaration order."""
    if attrs.has(cls):
        return [f.name for f in attrs.fields(cls) if f.init]
    return []


def _type_name(t: Any) -> str:
    if isinstance(t, type):
        return t.__name__
    return str(t).replace("typing.", "")


#: Whether the options being turned into components came from Python (``ksi.run(...,
#: evaluator_options={...})``) rather than the command line: an error then names the
#: keyword the caller wrote, not a flag they never typed.
_FROM_PYTHON: contextvars.ContextVar[bool] = contextvars.ContextVar("ksi_options_from_python")


@contextlib.contextmanager
def options_from_python() -> Iterator[None]:
    """Inside this block, option errors speak Python (the public functions enter it)."""
    token = _FROM_PYTHON.set(True)
    try:
        yield
    finally:
        _FROM_PYTHON.reset(token)


@attrs.frozen
class _Where:
    """How the caller gave a component's options: what a message names and how to fix it."""

    #: ``--evaluator-option``, or the keyword ``evaluator_options``.
    label: str
    flag: str
    keyword: str | None

    def give(self, name: str) -> str:
        if self.keyword is None:
            return f"{self.flag} {name}=VALUE"
        return f"{self.keyword}={{{name!r}: VALUE}}"


def _where(option_flag: str, option_keyword: str | None) -> _Where:
    if option_keyword is not None and _FROM_PYTHON.get(False):
        return _Where(option_keyword, option_flag, option_keyword)
    return _Where(option_flag, option_flag, None)


def create_component(
    cls: Any,
    options: Mapping[str, Any],
    *,
    kind: str,
    option_flag: str,
    option_keyword: str | None = None,
) -> Any:
    """Instantiate a registered component class with user options, or explain what is wrong.

    :raises OptionsError: every unknown, missing or unconvertible option, one
        :class:`ksi.models.Problem` each, located at ``option_flag`` (or, inside
        :func:`options_from_python`, at the ``ksi.run`` keyword ``option_keyword``).
    """
    where = _where(option_flag, option_keyword)
    label = f"{kind} {getattr(cls, 'name', getattr(cls, '__name__', cls))!r}"
    if not isinstance(cls, type):
        if options:
            raise UserInputError(f"{where.label}: {label} takes no options")
        return cls
    if not attrs.has(cls):
        try:
            return cls(**options)
        except TypeError as exc:
            raise UserInputError(f"{where.label}: {label}: {exc}") from exc
    valid = option_names(cls)
    try:
        if not options and all(f.default is not attrs.NOTHING for f in attrs.fields(cls)):
            # What structuring no options makes, without writing cattrs' code for the class
            # (a few ms for each component a run resolves with its defaults).
            return cls()
        return _converter.structure(dict(options), cls)
    except ClassValidationError as exc:
        raise OptionsError(_problems(exc, label, where, valid)) from exc
    except (ValueError, TypeError) as exc:
        # Raised by the class itself (attrs validators, __attrs_post_init__).
        raise OptionsError([Problem(where.label, f"{label}: {exc}")]) from exc


def _problems(
    exc: ClassValidationError, label: str, where: _Where, valid: list[str]
) -> list[Problem]:
    problems = []
    # Unknown keys first: a misspelled option explains the errors that follow.
    subs = sorted(exc.exceptions, key=lambda e: not isinstance(e, ForbiddenExtraKeysError))
    for sub in subs:
        if isinstance(sub, ForbiddenExtraKeysError):
            for key in sorted(sub.extra_fields):
                close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
                hint = f" did you mean {close[0]!r}?" if close else ""
                problems.append(
                    Problem(
                        where.label,
                        f"{label} has no option {key!r};{hint} valid options: "
                        f"{', '.join(valid) if valid else '(none)'}",
                    )
                )
            continue
        note = next(
            (n for n in getattr(sub, "__notes__", []) if isinstance(n, AttributeValidationNote)),
            None,
        )
        if note is None:
            problems.append(Problem(where.label, f"{label}: {sub}"))
        elif isinstance(sub, KeyError):
            problems.append(
                Problem(
                    where.label,
                    f"{label} needs option {note.name!r} ({_type_name(note.type)}); "
                    f"give it as {where.give(note.name)}",
                )
            )
        else:
            problems.append(Problem(where.label, f"{label}: option {note.name!r}: {sub}"))
    return problems
