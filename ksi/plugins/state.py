"""The loaded plugins of one process: the manager, what each plugin is, what went wrong.

:class:`PluginState` ties the pieces together: :mod:`~ksi.plugins.loading`
fills it, :mod:`~ksi.plugins.collect` builds one registry per kind from it on
first lookup (so a broken evaluator plugin never stops ``ksi tasks``),
:mod:`~ksi.plugins.commands` adds the plugins' commands, and
:attr:`PluginState.hooks` is how everything else calls a hook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from ksi.errors import PluginError
from ksi.kinds import KINDS, ComponentKind, kind_named
from ksi.plugins.collect import collect
from ksi.plugins.commands import add_commands
from ksi.plugins.hooks import Hooks, ObserverHook
from ksi.plugins.loading import load_all
from ksi.plugins.manager import KsiPluginManager
from ksi.plugins.report import IN_PROCESS, Failures, LoadError, PluginInfo
from ksi.registry import Registry

if TYPE_CHECKING:
    import typer


class PluginState:
    """The loaded plugin manager, what each plugin is, and what went wrong."""

    def __init__(self) -> None:
        self.pm = KsiPluginManager()
        #: Plugin name -> what ``ksi plugins`` shows about it, in load order.
        self.infos: dict[str, PluginInfo] = {}
        self.failures = Failures()
        #: How KSI calls every hook: typed, one plugin at a time.
        self.hooks = Hooks(self.pm, self.describe)
        self._registries: dict[str, Registry] = {}
        self._lock = threading.RLock()

    @property
    def errors(self) -> list[LoadError]:
        """Every failure so far, loading first, then per kind in lookup order."""
        return self.failures.all

    def load(self) -> None:
        """Register the default plugins, then the entry points the environment allows."""
        load_all(self.pm, self.infos, self.failures)

    def describe(self, plugin_name: str) -> str:
        """``'name' (dist version)`` for messages that must say where a plugin came from."""
        info = self.infos.get(plugin_name)
        if info is None:
            return repr(plugin_name)
        if info.builtin:
            return f"{plugin_name!r} (built into ksi)"
        return f"{plugin_name!r} ({info.distribution} {info.version})".replace(" )", ")")

    def is_builtin(self, plugin_name: str) -> bool:
        info = self.infos.get(plugin_name)
        return info is not None and info.builtin

    def plugin_failed(self, plugin: str, stage: str, exc: BaseException, late: str) -> None:
        """Record (or, strict, raise) a loaded plugin's failure; a built-in's is a bug."""
        self.failures.add_for(self.infos.get(plugin), plugin, stage, exc, late)

    # -- registries --------------------------------------------------------
    def registry(self, kind: ComponentKind[Any] | str) -> Registry:
        """The components of ``kind`` (a kind of :mod:`ksi.kinds`, or its name), collected once."""
        kind = kind_named(kind)
        with self._lock:
            reg = self._registries.get(kind.name)
            if reg is None:
                reg = collect(self, kind)
                self._registries[kind.name] = reg
            return reg

    def builtin_names(self, kind: ComponentKind[Any] | str) -> set[str]:
        """The names and aliases (lower case) KSI's own plugins give components of ``kind``."""
        return {
            key
            for r in self.registry(kind)
            if self.is_builtin(r.plugin)
            for key in (r.name.lower(), *(a.lower() for a in r.aliases))
        }

    def build_all(self) -> None:
        """Collect every kind of component now, so listings show them and all errors."""
        for kind in KINDS:
            self.registry(kind)

    # -- other hooks -------------------------------------------------------
    def call_observers(self, hook_name: ObserverHook, **kwargs: Any) -> list[str]:
        """Call a lifecycle hook on every plugin; return the errors instead of raising.

        Kept for callers that name the hook; :attr:`hooks` has a typed method for each.
        """
        return self.hooks.observe(hook_name, **kwargs)

    def register_commands(self, cli: typer.Typer, *, reserved: Collection[str] = ()) -> None:
        """Let every plugin add CLI commands to ``cli`` (see :mod:`ksi.plugins.commands`)."""
        add_commands(self, cli, reserved=reserved)

    # -- in-process plugins ------------------------------------------------
    def register_plugin(self, obj: object, name: str | None = None) -> Callable[[], None]:
        """See :func:`ksi.plugins.register_plugin`."""
        plugin_name = name or getattr(obj, "__name__", None) or f"{type(obj).__name__}@{id(obj)}"
        with self._lock:
            if self.pm.is_registered(obj):
                # Already loaded (an installed plugin's module, registered from its
                # entry point): it is in effect as asked, and stays when the caller is done.
                return lambda: None
            if self.pm.has_plugin(plugin_name):
                raise PluginError(f"a plugin called {plugin_name!r} is already registered")
            try:
                self.pm.register_checked(obj, plugin_name)
            except PluginError as exc:
                raise PluginError(f"plugin {plugin_name!r} {exc}") from exc
            except Exception as exc:
                raise PluginError(f"plugin {plugin_name!r}: {exc}") from exc
            self.infos[plugin_name] = PluginInfo(
                plugin_name, IN_PROCESS, "", builtin=False, hooks=self.pm.hooks_of(plugin_name)
            )
            self._registries.clear()

        def unregister() -> None:
            with self._lock:
                if self.pm.has_plugin(plugin_name):
                    self.pm.unregister(name=plugin_name)
                self.infos.pop(plugin_name, None)
                self._registries.clear()
                self.failures.forget(plugin_name)

        return unregister
