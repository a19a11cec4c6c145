"""Command-line values typer would hand to pydantic, converted without it when plain.

Recent typer releases coerce every parameter's value through a pydantic
``TypeAdapter`` built for it, and build one even for a value that was not
given: pydantic's import (40 ms) and ``ksi run``'s 60-odd adapters (another
20) are a sixth of a one-task run. :func:`plain_values` gives each parameter of
a command a converter that does what pydantic would for the values a command
line holds (a string for ``str``, a canonical integer or decimal for ``int``
and ``float`` within the option's bounds, a non-empty path for ``Path``, lists
of those) and hands anything else to typer's own converter, built then: a
wrong value's error is typer's, word for word. Typer releases that coerce with
click's types (no ``typer._coercion``) are left as they are.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

try:
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_path

    _COERCES_WITH_PYDANTIC = True
except ImportError:  # an older typer: click's types convert, pydantic is not involved
    RuntimeParam = object  # type: ignore[assignment,misc]
    _COERCES_WITH_PYDANTIC = False

#: Integers and decimals as pydantic reads them, with nothing for it to interpret
#: (no sign but ``-``, no spaces, underscores, leading zeros or exponents; 18 digits fit).
_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,17})")
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?")

#: What :func:`_plain` returns for a value it leaves to typer.
_NOT_PLAIN = object()


def plain_values(command: Any) -> Any:
    """``command`` (and its subcommands) converting plain values without pydantic."""
    if not _COERCES_WITH_PYDANTIC:
        return command
    for param in getattr(command, "params", ()):
        _install(param)
    for sub in (getattr(command, "commands", None) or {}).values():
        plain_values(sub)
    return command


def plain_help_option(command: Any, ctx: Any) -> None:
    """``command``'s ``--help`` (made on first use, with the names ``ctx`` passes on)
    converted without pydantic too: not given, it reads ``None``, which typer would
    otherwise build an adapter for."""
    get_help_option = getattr(command, "get_help_option", None)
    if _COERCES_WITH_PYDANTIC and get_help_option is not None:
        _install(get_help_option(ctx))


def _install(param: Any) -> None:
    """Give ``param`` the plain converter; a typer whose private pieces are shaped
    otherwise than this module knows keeps its own (slower, never wrong)."""
    descriptor = getattr(param, "type_descriptor", None)
    try:
        if (
            isinstance(descriptor, TypeDescriptor)
            and getattr(param, "_runtime_param", 0) is None
            and descriptor.file_annotation is None  # typer opens files: left to it
            and descriptor.parameter_info.parser is None
        ):
            param._runtime_param = _PlainRuntimeParam(
                parameter_info=descriptor.parameter_info,
                annotation=descriptor.annotation,
                descriptor=descriptor,
            )
    except (AttributeError, TypeError):
        return


@dataclasses.dataclass(frozen=True)
class _PlainRuntimeParam(RuntimeParam):
    """A plain value converted here; any other by typer's own converter (pydantic's)."""

    descriptor: Any

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        info = self.parameter_info
        annotation = self.annotation
        if getattr(annotation, "__origin__", None) is list and isinstance(value, (list, tuple)):
            (item_type,) = annotation.__args__
            items = [_plain(item_type, info, item, param, ctx) for item in value]
            if all(item is not _NOT_PLAIN for item in items):
                return items
        else:
            plain = _plain(annotation, info, value, param, ctx)
            if plain is not _NOT_PLAIN:
                return plain
        typers_own = build_runtime_param(self.descriptor)
        return typers_own._coerce_value(value, param=param, ctx=ctx)


def _plain(annotation: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
    """``value`` as pydantic would convert it, or :data:`_NOT_PLAIN` to let it do so."""
    if annotation is str:
        return value if type(value) is str else _NOT_PLAIN
    if annotation is Path and info.path_type is None:
        if type(value) is str and value:
            value = Path(value)  # what pydantic makes of it
        if not isinstance(value, Path):
            return _NOT_PLAIN
        # What typer does with a path (exists=, resolve_path=...): pydantic is not needed.
        return coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)
    if annotation is int or annotation is float:
        if info.clamp:
            return _NOT_PLAIN
        if type(value) is str:
            pattern = _INTEGER if annotation is int else _DECIMAL
            if not pattern.fullmatch(value):
                return _NOT_PLAIN
            number: Any = annotation(value)
        elif type(value) is int or (
            type(value) is float and annotation is float and math.isfinite(value)
        ):
            number = annotation(value)
        else:
            return _NOT_PLAIN
        low, high = info.min, info.max
        if (low is not None and number < low) or (high is not None and number > high):
            return _NOT_PLAIN  # typer says what the bound is
        return number
    return _NOT_PLAIN
