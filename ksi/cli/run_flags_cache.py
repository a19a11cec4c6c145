"""The flags components add to ``ksi run``, cached so that ``ksi run --help`` loads no plugin.

Environments and task sources declare flags of their own for ``ksi run``
(docker's ``--image``, the polyglot source's ``--language``: their
``cli_options``). Listing them means loading every plugin and importing every
environment and task source, most of what ``ksi run --help`` would otherwise
cost. So whenever the flags are read from the plugins (:func:`rows_from_plugins`:
every ``ksi run``, and a ``ksi run --help`` without a valid cache), they are
written to a small JSON file, and the next ``ksi run --help`` reads them from
it (:func:`cached_rows`).

Only help is ever served from the cache: a ``ksi run`` that runs parses its
command line against the flags the plugins declare now (:mod:`ksi.cli.startup`
decides, with click's own parser, whether the arguments ask for help).

The cache is used only while nothing it was built from has changed, so stale
help is impossible in practice. Its key: the KSI version; the interpreter
(``sys.executable``, ``sys.prefix``) and ``sys.path`` but its first entry (the
working directory under ``python -m``); the variables that choose plugins
(``KSI_LOAD_PLUGINS``, ``KSI_DISABLE_PLUGINS``); every ``ksi`` entry point with
its distribution and version; and the modification time and size of every
module file that reading the flags imported, of each component's own module
and of each plugin's entry-point module (imported earlier when a Python caller
loaded the plugins first). Reading checks them all (one scan of the entry points, a stat per
file). Other environment variables are not part of the key. Nothing is
written when a plugin failed to load (its module, never imported, could not
be watched) or when a plugin was registered in-process.

Where: ``$KSI_CACHE_DIR``, else ``$XDG_CACHE_HOME/ksi``, else ``~/.cache/ksi``;
one file per interpreter. A cache that cannot be read or written (a read-only
home, a corrupt file) is ignored, never an error: help is then built from the
plugins, as it would be without a cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ksi._version import __version__
from ksi.entry_points import KSI_GROUP, EntryPoint, entry_points

#: ``(flag, option, help)``: ``--image`` sets the component option ``image``; its help text.
Row = tuple[str, str, str]

#: The variable naming the cache directory.
CACHE_DIR_VARIABLE = "KSI_CACHE_DIR"
#: The variables :mod:`ksi.plugins` reads to choose which plugins load.
PLUGIN_VARIABLES = ("KSI_LOAD_PLUGINS", "KSI_DISABLE_PLUGINS")
#: The file's layout; a file of another layout is not read.
FORMAT = 1


def cache_dir() -> Path | None:
    """Where KSI keeps its caches; ``None`` when there is no home to put them in."""
    explicit = os.environ.get(CACHE_DIR_VARIABLE)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative path is to be ignored
        return Path(xdg) / "ksi"
    home = os.path.expanduser("~")
    return None if home == "~" else Path(home) / ".cache" / "ksi"


def cache_file(name: str = "run-flags") -> Path | None:
    """This interpreter's cache file called ``name`` (several virtual environments share
    one directory)."""
    directory = cache_dir()
    if directory is None:
        return None
    interpreter = f"{sys.executable}\0{sys.prefix}".encode(errors="surrogateescape")
    return directory / f"{name}-{zlib.crc32(interpreter):08x}.json"


def _installation(points: Sequence[EntryPoint] | None = None) -> dict[str, Any]:
    """The key's part that is not module files, as JSON would give it back (``points``:
    the ``ksi`` entry points, when the caller has just found them)."""
    return {
        "format": FORMAT,
        "ksi": __version__,
        "executable": sys.executable,
        "prefix": sys.prefix,
        "path": sys.path[1:],
        "variables": {name: os.environ.get(name) for name in PLUGIN_VARIABLES},
        "entry_points": [
            [ep.name, ep.value, ep.dist, ep.version]
            for ep in (entry_points(KSI_GROUP) if points is None else points)
        ],
    }


def _stamp(path: str) -> list[int] | None:
    """A file's (mtime_ns, size), or ``None`` when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _row(raw: Any) -> Row:
    flag, option, help_text = raw
    if not (isinstance(flag, str) and isinstance(option, str) and isinstance(help_text, str)):
        raise TypeError("a row holds three strings")
    return flag, option, help_text


def cached_rows(kinds: Sequence[str]) -> dict[str, list[Row]] | None:
    """Kind -> rows from the cache, or ``None`` when it is missing, unreadable or stale."""
    path = cache_file()
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files, rows = data["files"], data["rows"]
        if any(_stamp(name) != stamp for name, stamp in files.items()):
            return None
        if data["installation"] != _installation():
            return None
        return {kind: [_row(raw) for raw in rows[kind]] for kind in kinds}
    except (OSError, ValueError, LookupError, TypeError, AttributeError):
        return None  # no file, or not one this code wrote: build the help from the plugins


def save(
    rows: dict[str, list[Row]],
    modules: Iterable[ModuleType],
    points: Sequence[EntryPoint] | None = None,
) -> None:
    """Keep ``rows`` for the next help, valid while the files of ``modules`` stay as they are.

    Nothing is written when one of the files cannot be watched (a module
    imported from a zip file): such a cache could go stale unnoticed.
    """
    path = cache_file()
    if path is None:
        return
    files: dict[str, list[int]] = {}
    for module in modules:
        name = getattr(module, "__file__", None)
        if not isinstance(name, str):
            continue  # a built-in or namespace module: nothing on disk to change
        stamp = _stamp(name)
        if stamp is None:
            return
        files[name] = stamp
    data = {"installation": _installation(points), "files": files, "rows": rows}
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text(encoding="utf-8")) == json.loads(json.dumps(data)):
            return  # what every run after the first finds: no file to write again
    # start-up: only when the flags are read from the plugins
    from ksi.fileops import write_json_atomic

    # A read-only home, a full disk, an unencodable path: help just stays as slow as without.
    with contextlib.suppress(OSError, ValueError):
        write_json_atomic(path, data, durable=False, indent=None)


def _plugin_modules(points: Sequence[EntryPoint]) -> set[str]:
    """The modules ``points`` name (a malformed one failed to load: no cache)."""
    names = set()
    for ep in points:
        with contextlib.suppress(ValueError):
            names.add(ep.module)
    return names


def rows_from_plugins(kinds: Sequence[str]) -> dict[str, list[Row]]:
    """Kind -> rows from every component's ``cli_options`` (loading plugins), saved for help.

    Components are taken in name order; a flag declared twice keeps its first
    declaration (``--network`` means ``network`` for every environment that
    has one).
    """
    before = set(sys.modules)
    # start-up: only when the flags are read from the plugins
    from ksi.plugins import IN_PROCESS, get_plugins

    state = get_plugins()
    rows: dict[str, list[Row]] = {}
    owners: set[str] = set()
    for kind in kinds:
        flags: dict[str, Row] = {}
        for reg in state.registry(kind):
            owners.add(getattr(reg.obj, "__module__", None) or "")
            declared = getattr(reg.obj, "cli_options", None) or {}
            for flag, (option, help_text) in declared.items():
                flags.setdefault(flag, (flag, option, help_text))
        rows[kind] = list(flags.values())
    in_process = any(info.distribution == IN_PROCESS for info in state.infos.values())
    if not state.errors and not in_process:
        # The plugins' own modules too: in a process that loaded them before, they are
        # not among the modules imported here.
        points = entry_points(KSI_GROUP)  # one scan of sys.path for both
        names = (set(sys.modules) - before) | owners | _plugin_modules(points)
        save(rows, [sys.modules[name] for name in sorted(names) if name in sys.modules], points)
    return rows
