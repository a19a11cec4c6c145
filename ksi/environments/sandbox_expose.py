"""What the sandbox must show of a program installed under a hidden home.

The sandbox hides ``/root``, ``/home`` and ``$HOME``; a CLI installed there
(a venv whose ``python`` links to pyenv's ``/root/.pyenv/versions/X``, node
under ``~/.nvm``, Claude Code's ``~/.local/share/claude``) could not start
(``bwrap: execvp mini: No such file or directory``). :func:`program_mounts`
follows the program the way ``exec`` does in the sandbox (``PATH``, where a
visible hit wins over a hidden one, each symlink, the
shebang's interpreter, ``/usr/bin/env NAME``, a venv's base Python) and
names the narrowest read-only mounts that make it run: an installation
prefix's ``bin`` and ``lib`` (a venv's, a Python's, node's), a package
directory, or the file alone; the symlinks on the way are recreated as
symlinks. It never shows a hidden root itself (``/root``, ``/home``,
``/home/<user>``, ``$HOME``) or anything above one.

KSI's own Python runs in the sandbox too (the knowledge tools' MCP server,
the ACP client): :func:`python_mounts` adds what it imports from, when its
venv or its source lives under a hidden home or ``/tmp``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

#: Parts of an installation prefix the programs in its ``bin`` need.
_PREFIX_PARTS = ("bin", "lib", "lib64", "pyvenv.cfg")
#: Symlinks followed before giving up (a loop).
_MAX_HOPS = 40


@attrs.frozen
class ProgramMounts:
    """Read-only binds (directories or files) and symlinks ``(target, link)`` to recreate."""

    binds: tuple[str, ...] = ()
    symlinks: tuple[tuple[str, str], ...] = ()
    #: Paths needed but never shown: a hidden root itself, or above one.
    refused: tuple[str, ...] = ()

    def bwrap_args(self) -> list[str]:
        args: list[str] = []
        for path in self.binds:
            args += ["--ro-bind", path, path]
        for target, link in self.symlinks:
            args += ["--symlink", target, link]
        return args


def merged(*mounts: ProgramMounts) -> ProgramMounts:
    """``mounts`` as one: each path bound or linked once (bubblewrap refuses a second
    symlink where one is), nothing under a bound directory linked again."""
    kept = _outermost([Path(p) for m in mounts for p in m.binds])
    links = {link: target for m in mounts for target, link in m.symlinks}
    return ProgramMounts(
        binds=tuple(str(p) for p in kept),
        symlinks=tuple(
            (target, link) for link, target in sorted(links.items()) if not _under(Path(link), kept)
        ),
        refused=tuple(sorted({p for m in mounts for p in m.refused})),
    )


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def _forbidden(path: Path, hidden: Sequence[Path]) -> bool:
    """A hidden root itself, or anything above one: never shown."""
    return any(path == h or path in h.parents for h in hidden)


def _installation(real: Path, hidden: Sequence[Path]) -> list[Path]:
    """The narrowest paths that hold what ``real`` needs to run."""
    parts = real.parts
    if "node_modules" in parts:  # a node package: node's prefix, or the package tree
        modules = Path(*parts[: parts.index("node_modules") + 1])
        if modules.parent.name == "lib" and not _forbidden(modules.parent.parent, hidden):
            prefix = modules.parent.parent
            return [p for p in (prefix / "bin", modules) if p.exists()]
        return [modules]
    if real.parent.name == "bin" and not _forbidden(real.parent.parent, hidden):
        prefix = real.parent.parent
        return [prefix / part for part in _PREFIX_PARTS if (prefix / part).exists()]
    if not _forbidden(real.parent, hidden):
        return [real.parent]
    return [real]


def which(name: str, path_var: str, hidden: Sequence[Path]) -> str | None:
    """``name`` on ``PATH`` as the sandbox will find it: the first hit outside a hidden root.

    Inside, a hidden ``PATH`` entry is empty, so ``exec`` goes on to the next
    one; only when every hit is hidden is the first one shown. (Shown first
    instead, a pyenv shim would win over ``/usr/bin/python3`` and fail.)
    """
    hits = []
    for entry in path_var.split(os.pathsep):
        found = shutil.which(name, path=entry) if entry else None
        if found is not None:
            if not _under(Path(os.path.realpath(entry)), hidden):
                return found
            hits.append(found)
    return hits[0] if hits else None


def _interpreter(real: Path, path_var: str, hidden: Sequence[Path]) -> Path | None:
    """The program a script's shebang runs (``/usr/bin/env NAME`` looked up on ``PATH``)."""
    try:
        with open(real, "rb") as fh:
            first = fh.read(256).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        found = which(names[0], path_var, hidden) if names else None
        return Path(found) if found else None
    return Path(words[0])


def _venv_base(real: Path) -> Path | None:
    """A venv's base interpreter (``home`` in its ``pyvenv.cfg``), for a file in its ``bin``."""
    cfg = real.parent.parent / "pyvenv.cfg"
    try:
        lines = cfg.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            for name in ("python3", "python"):
                if (Path(value.strip()) / name).exists():
                    return Path(value.strip()) / name
    return None


def program_mounts(
    argv0: str, path_var: str, hidden: Sequence[Path], *, cwd: Path | None = None
) -> ProgramMounts:
    """The mounts that show ``argv0`` (and what it runs on) although ``hidden`` is hidden.

    ``hidden`` are the resolved hidden roots; only what lies under one is
    mounted. An unknown program gives nothing (bubblewrap then says it cannot
    find it, as before).
    """
    found = which(argv0, path_var, hidden) if "/" not in argv0 else argv0
    if found is None:
        return ProgramMounts()
    start = Path(found) if Path(found).is_absolute() else (cwd or Path.cwd()) / found
    binds: list[Path] = []
    links: dict[str, str] = {}
    todo, seen = [start], set()
    while todo:
        path = Path(os.path.abspath(todo.pop()))
        if path in seen:
            continue
        seen.add(path)
        for _ in range(_MAX_HOPS):  # follow the links one by one: each may need showing
            path = Path(os.path.realpath(path.parent)) / path.name
            if not path.is_symlink():
                break
            target = os.readlink(path)
            if _under(path, hidden):
                links[str(path)] = target
            path = Path(os.path.abspath(path.parent / target))
        if not path.exists():
            continue
        if _under(path, hidden):
            binds += _installation(path, hidden)
        for nxt in (_interpreter(path, path_var, hidden), _venv_base(path)):
            if nxt is not None:
                todo.append(nxt)
    return merged(
        ProgramMounts(
            binds=tuple(str(p) for p in binds),
            symlinks=tuple((target, link) for link, target in links.items()),
        )
    )


def _outermost(paths: Sequence[Path]) -> list[Path]:
    kept: list[Path] = []
    for path in sorted(set(paths)):
        if not _under(path, kept):
            kept.append(path)
    return kept


#: The top-level modules KSI's own Python imports in a sandbox: KSI (the knowledge
#: tools' MCP server), the MCP SDK, the ACP client's SDK.
KSI_MODULES = ("ksi", "mcp", "acp")


def import_places(modules: Sequence[str]) -> tuple[list[str], list[str]]:
    """Where the running interpreter imports from (its ``sys.path``, its venv's
    ``pyvenv.cfg``, each of ``modules`` it finds) and which of ``modules`` it finds.

    Run in this process and, as source, in the interpreter :func:`import_roots`
    asks: one rule for both, so the shortcut in :func:`python_mounts` and the
    answer it stands for cannot drift apart. It uses only the modules its source
    is sent with (``importlib.util``, ``os``, ``sys``).
    """
    places = [p for p in sys.path if p]
    if sys.prefix != sys.base_prefix:
        places.append(os.path.join(sys.prefix, "pyvenv.cfg"))
    found = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is not None:
            found.append(name)
            places += list(spec.submodule_search_locations or [spec.origin or ""])
    return places, found


@attrs.frozen
class ImportRoots:
    """Where an interpreter imports from, and which of :data:`KSI_MODULES` it finds."""

    roots: tuple[str, ...] = ()
    found: tuple[str, ...] = ()


@functools.cache
def import_roots(interpreter: str) -> ImportRoots:
    """What ``interpreter`` imports from when started afresh (``-I``), asked of it once.

    Asked of a new process, not read off this one's ``sys.path``: pytest, a
    script's directory or ``PYTHONPATH`` add entries a sandboxed process never
    gets (its environment has no ``PYTHON*`` variable), and a module an
    editable install's finder maps outside ``sys.path`` is found only by
    asking for it. An interpreter that cannot say gives nothing (the
    sandbox's probe then reports what fails to import).
    """
    # start-up: inspect only when an interpreter must be asked (rare)
    import inspect

    code = (
        "from __future__ import annotations\nimport importlib.util, json, os, sys\n"
        "from collections.abc import Sequence\n"
        f"{inspect.getsource(import_places)}\n"
        "places, found = import_places(sys.argv[1:])\n"
        'print(json.dumps({"roots": places, "found": found}))\n'
    )
    try:
        res = subprocess.run(
            [interpreter, "-I", "-c", code, *KSI_MODULES],
            capture_output=True,
            text=True,
            timeout=60,
        )
        data = json.loads(res.stdout) if res.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        data = {}
    return ImportRoots(
        roots=tuple(os.path.abspath(p) for p in data.get("roots", []) if os.path.exists(p)),
        found=tuple(data.get("found", [])),
    )


def python_mounts(interpreter: str, hidden: Sequence[Path]) -> ProgramMounts:
    """The mounts that let ``interpreter`` (KSI's own) run and import KSI although ``hidden`` is.

    :func:`program_mounts` shows the interpreter and its base Python; this
    adds, read-only, what it imports from that lies under a hidden root: its
    venv's ``pyvenv.cfg`` (without which it is not that venv) and each
    :func:`import_roots` entry (``site-packages``, an editable install's
    source). An entry that is a hidden root itself, or above one, is never
    shown: it is listed in :attr:`ProgramMounts.refused`.
    """
    program = program_mounts(interpreter, "", hidden)
    if _all_in_sight(interpreter, hidden, program):
        return program
    needed = [Path(p) for p in import_roots(interpreter).roots if _under(Path(p), hidden)]
    roots = ProgramMounts(
        binds=tuple(str(p) for p in needed if not _forbidden(p, hidden)),
        refused=tuple(str(p) for p in needed if _forbidden(p, hidden)),
    )
    return merged(program, roots)


def _all_in_sight(interpreter: str, hidden: Sequence[Path], shown: ProgramMounts) -> bool:
    """Whether ``interpreter`` surely imports from nothing hidden but ``shown``, known here.

    Known without starting it (:func:`import_roots` costs a Python start-up,
    ~0.15 s) when it is the interpreter running this process, with ``site``:
    a fresh one then imports from no more than this process's ``sys.path``
    and the modules this process finds. Anything else is asked.
    """
    if sys.flags.no_site or Path(os.path.abspath(interpreter)).parent.parent != Path(sys.prefix):
        return False
    places, _ = import_places(KSI_MODULES)
    kept = [Path(p) for p in shown.binds]
    return not any(
        _under(path, hidden) and not _under(path, kept)
        for path in (Path(os.path.abspath(p)) for p in places if p)
    )
