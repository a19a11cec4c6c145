"""Finding, loading and guarding plugins.

Loading happens once, on first use (never at import time), in three steps:
KSI's default plugins, then every ``ksi`` entry point (each guarded: one that
fails to import or register is reported and skipped unless
``KSI_STRICT_PLUGINS=1``), then a check that every ``ksi_*`` function a plugin
defines is a real hook. Environment variables:

* ``KSI_LOAD_PLUGINS=a,b``: load only these distributions (empty: none);
* ``KSI_DISABLE_PLUGINS=a,b``: skip these distributions or entry-point names;
* ``KSI_STRICT_PLUGINS=1``: any plugin failure is fatal.

Components are collected per kind the first time that kind is looked up
(:func:`registry`), so a broken evaluator plugin never stops ``ksi tasks``.

One module per idea: :mod:`~ksi.plugins.builtins` (KSI's own plugins, imported
lazily), :mod:`~ksi.plugins.manager` (the pluggy manager and call order),
:mod:`~ksi.plugins.loading` (entry points, guarded),
:mod:`~ksi.plugins.collect` (the ``register`` callbacks, one kind at a time),
:mod:`~ksi.plugins.commands` (plugins' CLI commands),
:mod:`~ksi.plugins.hooks` (every hook call, typed),
:mod:`~ksi.plugins.report` (what loaded and what failed) and
:mod:`~ksi.plugins.state` (all of it for one process). This module holds the
process-wide state and the names plugins, tests and docs import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ksi import kinds as _kinds
from ksi.kinds import ComponentKind, kind_named
from ksi.plugins.builtins import BUILTIN_HOOKS
from ksi.plugins.hooks import Hooks, ObserverHook
from ksi.plugins.manager import HOOK_PREFIX, call_order, precedence
from ksi.plugins.report import IN_PROCESS, LoadError, PluginInfo
from ksi.plugins.state import PluginState
from ksi.registry import Registry

__all__ = [
    "BUILTIN_HOOKS",
    "HOOK_PREFIX",
    "IN_PROCESS",
    "KINDS",
    "PROTOCOLS",
    "Hooks",
    "LoadError",
    "ObserverHook",
    "PluginInfo",
    "PluginState",
    "call_order",
    "get_plugins",
    "loaded_plugins",
    "missing_methods",
    "plural",
    "precedence",
    "register_plugin",
    "registry",
    "required_methods",
    "reset_plugins",
]

# -- the component kinds by name (ksi.kinds describes each; these are views of it) --
#: Kind name -> the hook that registers it.
KINDS: dict[str, str] = {k.name: k.hook_name for k in _kinds.KINDS}
#: Kind name -> its protocol in :mod:`ksi.interfaces`.
PROTOCOLS: dict[str, str] = {k.name: k.protocol_name for k in _kinds.KINDS}


def __getattr__(name: str) -> Any:
    if name == "OPTIONAL_METHODS":
        # Kind name -> its optional methods; computed on use, as it imports ksi.interfaces.
        return {
            k.name: frozenset(m for m, v in k.optional_members.items() if callable(v))
            for k in _kinds.KINDS
        }
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plural(kind: str | ComponentKind[Any]) -> str:
    """``strategy`` -> ``strategies``, ``agent`` -> ``agents`` (listings and messages)."""
    return kind_named(kind).plural


def required_methods(kind: str | ComponentKind[Any]) -> list[str]:
    """The methods a component of ``kind`` must have (:meth:`ComponentKind.required_methods`)."""
    return kind_named(kind).required_methods()


def missing_methods(kind: str | ComponentKind[Any], component: object) -> list[str]:
    """The required methods ``component`` lacks (empty when it follows its protocol)."""
    return kind_named(kind).missing_methods(component)


# -- the process-wide state ------------------------------------------------------
_STATE: PluginState | None = None
_STATE_LOCK = threading.Lock()


def get_plugins() -> PluginState:
    """The process-wide plugin state, loaded on first call."""
    global _STATE
    with _STATE_LOCK:
        if _STATE is None:
            state = PluginState()
            state.load()
            _STATE = state
        return _STATE


def loaded_plugins() -> PluginState | None:
    """The plugin state if something has loaded it already, else ``None`` (loads nothing)."""
    return _STATE


def reset_plugins() -> None:
    """Forget loaded plugins (tests, and ``ksi install`` before listing again)."""
    global _STATE
    with _STATE_LOCK:
        _STATE = None


def registry(kind: ComponentKind[Any] | str) -> Registry:
    """The components of one kind (:data:`ksi.kinds.AGENT`..., or its name: ``"agent"``)."""
    return get_plugins().registry(kind)


def register_plugin(obj: object, name: str | None = None) -> Callable[[], None]:
    """Register an in-process plugin (tests, notebooks); returns a function that removes it.

    ``obj`` is a module, class or instance with ``ksi_*`` hook functions.
    Unlike an entry point, a broken in-process plugin raises
    :class:`ksi.errors.PluginError` right away: its author is the caller.
    """
    return get_plugins().register_plugin(obj, name)
