"""Named components of one kind (task sources, evaluators, agents...).

Lookups are case-insensitive over names and aliases. A name registered by two
plugins with the same precedence is kept as a clash: listing shows it, and
looking it up fails with an error that names both plugins, so one bad plugin
cannot hijack a built-in silently, yet every other name keeps working. A
registration with a higher precedence (its hook marked ``tryfirst``) overrides
the name instead, and the override is recorded
(:attr:`Registry.overridden`, shown by ``ksi plugins``).

A name may also be a reference to an unpackaged component, resolved on the
spot: ``package.module:Attr`` (imported from ``sys.path``) or
``./path/to/file.py:Attr`` (a file, relative to the working directory).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ksi.errors import DuplicateComponentError, PluginError, UnknownComponentError
from ksi.kinds import ComponentKind, kind_named

#: Plugin name used for components resolved from a ``module:attribute`` reference.
REFERENCE_PLUGIN = "(reference)"


@dataclasses.dataclass(frozen=True)
class Registration:
    """One component, the plugin that registered it, and the names it answers to."""

    kind: str
    name: str
    aliases: tuple[str, ...]
    obj: Any
    plugin: str
    #: How strongly the plugin claims the name: 1 from a ``tryfirst`` hook, else 0.
    precedence: int = 0

    @property
    def description(self) -> str:
        return str(getattr(self.obj, "description", "") or "")


def registered_names(obj: Any, kind: str, plugin: str) -> tuple[str, tuple[str, ...]]:
    """The name and aliases of a component, or a :class:`PluginError` naming the plugin."""
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise PluginError(
            f"plugin {plugin!r} registered a {kind} without a non-empty string `name` "
            f"attribute: {obj!r}"
        )
    if ":" in name:
        raise PluginError(
            f"plugin {plugin!r}: {kind} name {name!r} contains ':', which KSI reserves for "
            "module:attribute references"
        )
    aliases = getattr(obj, "aliases", ()) or ()
    if isinstance(aliases, str) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise PluginError(
            f"plugin {plugin!r}: {kind} {name!r} has `aliases` {aliases!r}; "
            "expected a tuple of non-empty strings"
        )
    return name.strip(), tuple(a.strip() for a in aliases)


def is_reference(name: str) -> bool:
    """True for ``module:attribute`` and ``path/file.py:Attr`` (not for plain names)."""
    return ":" in name


class Registry:
    """Components of one kind, by lower-cased name and alias."""

    def __init__(
        self,
        kind: ComponentKind[Any] | str,
        describe: Callable[[str], str] = repr,
        *,
        is_builtin: Callable[[str], bool] = lambda plugin: False,
        failures: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        described = kind_named(kind)
        #: The kind's name, as messages write it (``"task source"``).
        self.kind = described.name
        self._plural = described.plural
        #: Turns a plugin name into how messages should name it (with its distribution).
        self._describe = describe
        #: Whether a plugin is built into KSI: its names win over a plugin's at equal precedence.
        self._is_builtin = is_builtin
        #: Plugins that failed to load (or to register this kind): an unknown name names them,
        #: since the component asked for may be one of theirs.
        self._failures = failures
        self._by_key: dict[str, Registration] = {}
        self._entries: list[Registration] = []
        self._clashes: dict[str, list[Registration]] = {}
        #: ``(overridden, winner)`` pairs: a name claimed with a higher precedence.
        self.overridden: list[tuple[Registration, Registration]] = []

    def add(self, obj: Any, plugin: str, *, precedence: int = 0) -> Registration:
        """Register ``obj`` on behalf of ``plugin``; raise on a clash, keeping it recorded.

        Where another component holds one of its names with a different
        ``precedence``, the higher one keeps the name and the pair is recorded
        in :attr:`overridden`.
        """
        name, aliases = registered_names(obj, self.kind, plugin)
        reg = Registration(self.kind, name, aliases, obj, plugin, precedence)
        keys = list(dict.fromkeys(k.lower() for k in (name, *aliases)))
        taken = {
            key: self._by_key[key]
            for key in keys
            if key in self._by_key and self._by_key[key].obj is not obj
        }
        if not taken and keys[0] in self._by_key:
            return self._by_key[keys[0]]  # the same object registered twice: harmless
        clashes = [(k, r) for k, r in taken.items() if r.precedence == precedence]
        builtin_clash = next(
            (
                (k, r)
                for k, r in clashes
                if self._is_builtin(r.plugin) and not self._is_builtin(plugin)
            ),
            None,
        )
        if builtin_clash is not None:
            # A built-in keeps its name: a plugin must not break every default run by
            # accident. The clash is the plugin's alone to fix.
            key, existing = builtin_clash
            raise DuplicateComponentError(
                f"{self.kind} name {key!r} is built into ksi ({self._describe(existing.plugin)}); "
                f"the built-in keeps it and plugin {self._describe(plugin)}'s {self.kind} "
                f"{name!r} is not registered: rename it, or mark the plugin's hook "
                "@hookimpl(tryfirst=True) to replace the built-in on purpose"
            )
        if clashes:
            for key, existing in clashes:
                self._clashes.setdefault(key, [existing]).append(reg)
            key, existing = clashes[0]
            raise DuplicateComponentError(
                f"{self.kind} name {key!r} is registered by both plugin "
                f"{self._describe(existing.plugin)} and plugin {self._describe(plugin)}; "
                "uninstall one or disable it with KSI_DISABLE_PLUGINS"
            )
        for key in keys:
            holder = taken.get(key)
            if holder is not None and holder.precedence > precedence:
                continue  # a stronger claim keeps this name
            self._by_key[key] = reg
        for holder in dict.fromkeys(taken.values()):
            if holder.precedence > precedence:
                self.overridden.append((reg, holder))
            else:
                self.overridden.append((holder, reg))
        # Listed under its own name only while that name still leads to it.
        self._entries = [e for e in self._entries if self._by_key.get(e.name.lower()) is e]
        if self._by_key.get(name.lower()) is reg:
            self._entries.append(reg)
        return reg

    def __iter__(self) -> Iterator[Registration]:
        return iter(sorted(self._entries, key=lambda r: r.name.lower()))

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().lower() in self._by_key

    def names(self) -> list[str]:
        return [r.name for r in self]

    def get(self, name: str) -> Registration:
        """The component called ``name`` (or an alias), or a ``module:attribute`` reference.

        Raises :class:`UnknownComponentError` (exit code 2, listing the valid
        names) or :class:`DuplicateComponentError` when two plugins claim it.
        """
        key = name.strip().lower()
        if key in self._clashes:
            plugins = " and ".join(self._describe(r.plugin) for r in self._clashes[key])
            raise DuplicateComponentError(
                f"{self.kind} name {name!r} is registered by several plugins "
                f"({plugins}); disable one with KSI_DISABLE_PLUGINS"
            )
        reg = self._by_key.get(key)
        if reg is not None:
            return reg
        if is_reference(name):
            return self._import_reference(name.strip())
        raise UnknownComponentError(self._unknown_message(name))

    def _unknown_message(self, name: str) -> str:
        valid = self.names()
        msg = f"unknown {self.kind} {name!r}"
        close = difflib.get_close_matches(name.strip().lower(), list(self._by_key), n=1, cutoff=0.6)
        if close:
            msg += f"; did you mean {self._by_key[close[0]].name!r}?"
        else:
            msg += "."
        msg += f" Valid {self._plural}: {', '.join(valid) if valid else '(none registered)'}"
        msg += " (or give module:attribute, or ./file.py:Attribute)"
        failed = list(self._failures())
        if failed:
            count = len(failed)
            msg += (
                f"\n{count} plugin{' that' if count == 1 else 's that'} failed to load may "
                f"have provided it:"
            )
            msg += "".join(f"\n  {line}" for line in failed)
            msg += (
                "\nfix or disable (KSI_DISABLE_PLUGINS=NAME) "
                f"{'it' if count == 1 else 'them'}; `ksi --debug plugins` shows the traceback"
            )
        return msg

    def _import_reference(self, ref: str) -> Registration:
        """Resolve ``pkg.module:Attr`` or ``./file.py:Attr`` without packaging it."""
        target, _, attr = ref.rpartition(":")
        if not target or not attr:
            raise UnknownComponentError(
                f"{self.kind} {ref!r}: expected module:attribute or ./file.py:Attribute "
                f"(e.g. mypkg.graders:Grader)"
            )
        if target.endswith(".py") or "/" in target or "\\" in target:
            module = _import_file(self.kind, ref, Path(target))
        else:
            module = _import_module(self.kind, ref, target)
        obj: Any = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                available = sorted(n for n in vars(module) if not n.startswith("_"))
                close = difflib.get_close_matches(part, available, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise UnknownComponentError(
                    f"{self.kind} {ref!r}: {target!r} has no attribute {attr!r}{hint}"
                )
            obj = getattr(obj, part)
        name = getattr(obj, "name", None)
        return Registration(
            self.kind,
            name if isinstance(name, str) and name else ref,
            (),
            obj,
            f"{REFERENCE_PLUGIN} {target}",
        )


def _import_module(kind: str, ref: str, target: str) -> ModuleType:
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name is not None and target.startswith(exc.name):
            raise UnknownComponentError(
                f"{kind} {ref!r}: no module named {exc.name!r} on the Python path; "
                "check the spelling, install it, or give a file as ./path/file.py:Attribute"
            ) from exc
        raise _import_failed(kind, ref, target, exc) from exc
    except Exception as exc:
        raise _import_failed(kind, ref, target, exc) from exc


def _import_file(kind: str, ref: str, path: Path) -> ModuleType:
    # start-up: only for a component defined outside a module
    import hashlib
    import importlib.util

    path = path.expanduser().resolve()
    if not path.is_file():
        raise UnknownComponentError(f"{kind} {ref!r}: file {str(path)!r} does not exist")
    # One module per file path, so a file named twice is imported once.
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    mod_name = f"ksi_user_{_identifier(path.stem)}_{digest}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise UnknownComponentError(f"{kind} {ref!r}: {str(path)!r} is not an importable file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[mod_name]
        raise _import_failed(kind, ref, str(path), exc) from exc
    return module


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def _import_failed(kind: str, ref: str, target: str, exc: Exception) -> UnknownComponentError:
    return UnknownComponentError(
        f"{kind} {ref!r}: importing {target!r} failed: {type(exc).__name__}: {exc}"
    )
