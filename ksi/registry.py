"""Named components of one kind (task sources, evaluators, agents...).

Lookups are case-insensitive over names and aliases. A name registered by two
plugins is kept as a clash: listing shows it, and looking it up fails with an
error that names both plugins, so one bad plugin cannot hijack a built-in
silently nor break every other name.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from ksi.errors import DuplicateComponentError, PluginError, UnknownComponentError


@attrs.frozen
class Registration:
    kind: str
    name: str
    aliases: tuple[str, ...]
    obj: Any
    plugin: str

    @property
    def description(self) -> str:
        return str(getattr(self.obj, "description", "") or "")


def _component_name(obj: Any, kind: str, plugin: str) -> tuple[str, tuple[str, ...]]:
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise PluginError(
            f"plugin {plugin!r} registered a {kind} without a non-empty string `name` "
            f"attribute: {obj!r}"
        )
    aliases = getattr(obj, "aliases", ()) or ()
    if isinstance(aliases, str) or not all(isinstance(a, str) for a in aliases):
        raise PluginError(
            f"plugin {plugin!r}: {kind} {name!r} has `aliases` {aliases!r}; "
            "expected a tuple of strings"
        )
    return name, tuple(aliases)


class Registry:
    """Components of one kind, by lower-cased name and alias."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._by_key: dict[str, Registration] = {}
        self._entries: list[Registration] = []
        self._clashes: dict[str, list[Registration]] = {}

    def add(self, obj: Any, plugin: str) -> Registration:
        """Register ``obj`` on behalf of ``plugin``; raise on a clash, keeping it recorded."""
        name, aliases = _component_name(obj, self.kind, plugin)
        reg = Registration(self.kind, name, aliases, obj, plugin)
        clash: Registration | None = None
        for key in (name, *aliases):
            key = key.lower()
            existing = self._by_key.get(key)
            if existing is not None and existing.obj is not obj:
                clash = existing
                self._clashes.setdefault(key, [existing]).append(reg)
        if clash is not None:
            raise DuplicateComponentError(
                f"{self.kind} name {name!r} is registered by both plugin "
                f"{clash.plugin!r} and plugin {plugin!r}; uninstall one or disable it "
                "with KSI_DISABLE_PLUGINS"
            )
        for key in (name, *aliases):
            self._by_key[key.lower()] = reg
        self._entries.append(reg)
        return reg

    def __iter__(self) -> Iterator[Registration]:
        return iter(sorted(self._entries, key=lambda r: r.name.lower()))

    def names(self) -> list[str]:
        return [r.name for r in self]

    def get(self, name: str) -> Registration:
        """The component called ``name`` (or an alias), or ``module:attribute``."""
        if ":" in name and not name.lower() in self._by_key:
            return self._import_reference(name)
        key = name.strip().lower()
        if key in self._clashes:
            plugins = " and ".join(repr(r.plugin) for r in self._clashes[key])
            raise DuplicateComponentError(
                f"{self.kind} name {name!r} is registered by several plugins "
                f"({plugins}); disable one with KSI_DISABLE_PLUGINS"
            )
        reg = self._by_key.get(key)
        if reg is None:
            raise UnknownComponentError(self._unknown_message(name))
        return reg

    def _unknown_message(self, name: str) -> str:
        valid = self.names()
        msg = f"unknown {self.kind} {name!r}"
        close = difflib.get_close_matches(name.lower(), list(self._by_key), n=1, cutoff=0.6)
        if close:
            msg += f"; did you mean {self._by_key[close[0]].name!r}?"
        msg += f" Valid {self.kind}s: {', '.join(valid) if valid else '(none registered)'}"
        return msg

    def _import_reference(self, ref: str) -> Registration:
        """Resolve ``pkg.module:Attr`` or ``./file.py:Attr`` without packaging it."""
        target, _, attr = ref.rpartition(":")
        try:
            if target.endswith(".py") or "/" in target:
                path = Path(target).resolve()
                if not path.is_file():
                    raise UnknownComponentError(
                        f"{self.kind} {ref!r}: file {str(path)!r} does not exist"
                    )
                mod_name = f"ksi_user_{path.stem}_{abs(hash(str(path)))}"
                spec = importlib.util.spec_from_file_location(mod_name, path)
                if spec is None or spec.loader is None:
                    raise UnknownComponentError(f"{self.kind} {ref!r}: cannot import {path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[mod_name] = module
                spec.loader.exec_module(module)
            else:
                module = importlib.import_module(target)
        except UnknownComponentError:
            raise
        except Exception as exc:
            raise UnknownComponentError(
                f"{self.kind} {ref!r}: importing {target!r} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        obj = getattr(module, attr, None)
        if obj is None:
            raise UnknownComponentError(
                f"{self.kind} {ref!r}: module {target!r} has no attribute {attr!r}"
            )
        name = getattr(obj, "name", None)
        return Registration(
            self.kind, name if isinstance(name, str) else ref, (), obj, f"(reference) {target}"
        )
