"""Finding the ``ksi`` entry points of installed distributions, quickly.

Every ``ksi`` command that may list plugin commands (``ksi --help``) has to
find the installed plugins first. ``importlib.metadata`` costs more to import
(e-mail header parsing, zip support) than the rest of KSI's start-up, and
reads every distribution's metadata. This module reads the
``entry_points.txt`` of each ``*.dist-info`` / ``*.egg-info`` directory on
``sys.path`` directly, and a distribution's name and version only when it
declares an entry point in the group asked for. As ``importlib.metadata``
does, the first distribution of a name on ``sys.path`` wins. A ``sys.path``
entry that is not a directory (a zip file) is read with ``importlib.metadata``.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
from typing import Any

#: The group KSI's plugins declare their entry point in (``[ksi]`` in entry_points.txt).
KSI_GROUP = "ksi"

_VALUE = re.compile(r"^(?P<module>[\w.]+)\s*(?::\s*(?P<attr>[\w.]+)\s*)?(?:\[.*\])?\s*$")


@dataclasses.dataclass(frozen=True)
class EntryPoint:
    """One ``name = module:attr`` line of a distribution's entry points."""

    name: str
    value: str
    #: The distribution that declares it, and its version.
    dist: str
    version: str

    def _parts(self) -> re.Match[str]:
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name} = {self.value!r} is not module:attribute")
        return match

    @property
    def module(self) -> str:
        """The module the entry point names (``ValueError`` when its value is malformed)."""
        return self._parts()["module"]

    def load(self) -> Any:
        """Import the module and return the object the entry point names."""
        match = self._parts()
        obj: Any = importlib.import_module(match["module"])
        for part in (match["attr"] or "").split("."):
            if part:
                obj = getattr(obj, part)
        return obj


def normalize(name: str) -> str:
    """PEP 503 normalisation: ``My_Plugin`` and ``my-plugin`` are one name."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` pairs of ``[group]`` in an entry_points.txt."""
    pairs = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
            continue
        if inside:
            name, sep, value = line.partition("=")
            if sep:
                pairs.append((name.strip(), value.strip()))
    return pairs


def _name_and_version(info_dir: str, dir_name: str) -> tuple[str, str]:
    """From the METADATA (or PKG-INFO) headers; the directory name when they are missing."""
    stem = dir_name.rsplit(".", 1)[0]
    name, _, version = stem.partition("-")
    for meta in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info_dir, meta), encoding="utf-8") as fh:
                for line in fh:
                    if not line.strip():
                        break  # the headers end at the first blank line
                    key, _, value = line.partition(":")
                    if key == "Name":
                        name = value.strip()
                    elif key == "Version":
                        version = value.strip()
            break
        except OSError:
            continue
    return name, version


def _from_directory(path: str, group: str) -> list[tuple[str, EntryPoint | None]]:
    """(normalised distribution name, entry point or None) for each distribution in ``path``."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    found: list[tuple[str, EntryPoint | None]] = []
    for dir_name in names:
        if not dir_name.endswith((".dist-info", ".egg-info")):
            continue
        info_dir = os.path.join(path, dir_name)
        try:
            with open(os.path.join(info_dir, "entry_points.txt"), encoding="utf-8") as fh:
                text = fh.read()
        except OSError:
            found.append((normalize(dir_name.split("-")[0].rsplit(".", 1)[0]), None))
            continue
        pairs = _section(text, group) if f"[{group}]" in text else []
        if not pairs:
            found.append((normalize(dir_name.split("-")[0].rsplit(".", 1)[0]), None))
            continue
        dist, version = _name_and_version(info_dir, dir_name)
        found += [(normalize(dist), EntryPoint(n, v, dist, version)) for n, v in pairs]
    return found


def _from_archive(path: str, group: str) -> list[tuple[str, EntryPoint | None]]:
    # start-up: importlib.metadata only for a zip file on sys.path
    import importlib.metadata as md

    found: list[tuple[str, EntryPoint | None]] = []
    for dist in md.distributions(path=[path]):
        name = dist.metadata["Name"] or ""
        found.append((normalize(name), None))
        found += [
            (normalize(name), EntryPoint(ep.name, ep.value, name, dist.version))
            for ep in dist.entry_points.select(group=group)
        ]
    return found


def entry_points(group: str) -> list[EntryPoint]:
    """Every entry point in ``group``, the first distribution of each name only."""
    seen: set[str] = set()
    result: list[EntryPoint] = []
    for entry in sys.path:
        path = entry or os.getcwd()
        scan = _from_directory if os.path.isdir(path) else _from_archive
        if not os.path.exists(path):
            continue
        claimed: set[str] = set()
        for dist, ep in scan(path, group):
            if dist in seen:
                continue  # shadowed by the same distribution earlier on sys.path
            claimed.add(dist)
            if ep is not None:
                result.append(ep)
        seen |= claimed
    return result
