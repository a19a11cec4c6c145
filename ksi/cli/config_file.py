"""``ksi run -c run.toml``: a command's options from a TOML file (read with stdlib ``tomllib``).

The allowed keys are not written down anywhere: they are the command's own
parameters (``ksi run``'s are made from the run options' declarations,
:mod:`ksi.cli.run_options`), read from the click command when the file is
loaded, so an option any part of KSI adds to ``ksi run`` (an environment's
``--image``, a new setting) can be given in the file at once. A key is an option's name as on
the command line without the dashes (``task-id``, ``agent-option``; its
older spellings and ``_`` for ``-`` work too), or ``tasks`` for the tasks
path.

The file's values become the command's *defaults* (click's ``default_map``),
so anything on the command line wins, then ``KSI_*`` environment variables,
then the file. Relative paths in the file are relative to the file. A value
a ``KEY=VALUE`` option takes may be a table (``[agent-option]``). Every
unknown key and bad value is reported at once, with the file, line and fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

from ksi.errors import ProblemsError, UserInputError

#: Parameters that cannot come from a file (the file itself, help).
NOT_IN_FILE = frozenset({"config_file", "help"})


def _keys(param: Any) -> Iterator[str]:
    """Every spelling of a parameter a file may use as its key."""
    names = [param.name]
    names += [o.lstrip("-") for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]
    for name in names:
        yield name.replace("_", "-")
        yield name.replace("-", "_")


def file_keys(command: Any) -> dict[str, Any]:
    """Key -> click parameter, for every parameter of ``command`` a file may set."""
    keys: dict[str, Any] = {}
    for param in command.params:
        if param.name in NOT_IN_FILE or param.name is None:
            continue
        for key in _keys(param):
            keys.setdefault(key, param)
    return keys


def _line_of(text: str, key: str) -> int | None:
    """The line where ``key`` is set (``key = ...``) or opens a table (``[key]``)."""
    quoted = rf"""["']?{re.escape(key)}["']?"""
    pattern = re.compile(rf"^\s*(?:{quoted}\s*=|\[\s*{quoted}\s*\])")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return number
    return None


def _value(param: Any, value: Any) -> Any:
    """The file's value as the parameter takes it from the command line."""
    if isinstance(value, dict):
        if param.multiple and param.metavar == "KEY=VALUE":
            return [f"{k}={_scalar(v)}" for k, v in value.items()]
        raise ValueError("expected a value, not a table")
    if param.multiple:
        items = value if isinstance(value, list) else [value]
        return [_scalar(v) for v in items]
    if isinstance(value, list):
        raise ValueError("expected one value, not a list (the option is not repeatable)")
    return value


def _scalar(value: Any) -> Any:
    if isinstance(value, dict | list):
        raise ValueError("expected a string or number inside")
    return str(value).lower() if isinstance(value, bool) else str(value)


def _relative_to(base: Path, raw: Any, converted: Any) -> Any:
    """A relative path in the file means relative to the file, not to the working directory."""
    if isinstance(converted, list | tuple):
        return [_relative_to(base, r, c) for r, c in zip(raw, converted, strict=True)]
    if isinstance(converted, Path) and not converted.expanduser().is_absolute():
        return str(base / converted.expanduser())
    return raw


def load_defaults(path: Path, command: Any, ctx: Any) -> dict[str, Any]:
    """Parameter name -> value from the TOML file at ``path``, checked against ``command``."""
    import tomllib  # start-up: only when a file is given

    from ksi.models import Problem  # start-up: `ksi run --help` need not build the models

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserInputError(
            f"--config: cannot read {str(path)!r} ({exc.strerror or exc}); give a TOML file"
        ) from exc
    except UnicodeDecodeError as exc:
        number = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise UserInputError(
            f"{path}: line {number}: not UTF-8 (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); a TOML file is UTF-8 text: save it as UTF-8"
        ) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserInputError(
            f"{path}: not valid TOML: {exc}; see https://toml.io (keys are `ksi run` option "
            'names, e.g. agent = "oracle")'
        ) from exc
    except RecursionError as exc:  # tomllib recurses once per nested array or table
        raise UserInputError(
            f"{path}: nested too deeply to read (arrays or tables inside one another); a "
            "`ksi run` option's value is a string, a number, a list of them or one table"
        ) from exc
    keys = file_keys(command)
    defaults: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, raw in data.items():
        line = _line_of(text, key)
        where = f"line {line}" if line else ""
        param = keys.get(key)
        if param is None:
            close = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(
                Problem(
                    str(path),
                    f"unknown key; {hint}keys are the options of `ksi {command.name}` without "
                    f"the dashes ({', '.join(sorted(k for k in keys if '_' not in k)[:12])}, "
                    "...; `ksi run --help` lists them all)",
                    location=where,
                    field=repr(key),
                )
            )
            continue
        try:
            value = _value(param, raw)
            # The command line's own conversion and checks (types, ranges).
            value = _relative_to(path.parent, value, param.process_value(ctx, value))
        except Exception as exc:  # whatever the parameter's conversion raises
            message = getattr(exc, "message", None) or str(exc)
            flag = next(iter(param.opts), param.name)
            problems.append(
                Problem(
                    str(path),
                    f"{message}; give a value {flag} takes (`ksi {command.name} --help`)",
                    location=where,
                    field=repr(key),
                )
            )
            continue
        if param.name in defaults:
            problems.append(
                Problem(
                    str(path),
                    f"sets {param.name!r} a second time (another spelling of the same "
                    "option); keep one",
                    location=where,
                    field=repr(key),
                )
            )
            continue
        defaults[param.name] = value
    if problems:
        count = len(problems)
        raise ProblemsError(
            problems, header=f"{path}: {count} problem{'s' if count != 1 else ''} found"
        )
    return defaults


def _load_config(ctx: typer.Context, param: Any, value: Path | None) -> Path | None:
    """Eager callback: the file's values become the command's defaults before other options."""
    if value is not None:
        ctx.default_map = {
            **(ctx.default_map or {}),
            **load_defaults(value, ctx.command, ctx),
        }
    return value


#: ``-c/--config FILE`` for a command whose options a file may hold.
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        is_eager=True,
        callback=_load_config,
        help="A TOML file of this command's options (keys: option names without the dashes, "
        'e.g. agent = "oracle"); the command line and KSI_* variables win over it.',
    ),
]
