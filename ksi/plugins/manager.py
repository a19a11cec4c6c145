"""KSI's pluggy plugin manager: the ``ksi_`` prefix reserved, wrappers refused, call order.

pluggy ignores undecorated functions, so a plugin author who forgot
``@hookimpl`` *and* misspelled the name would see nothing happen. Like
pytest with ``pytest_*``, the prefix is reserved: such a function is either a
real hook or an error when the plugin is registered (:func:`check_hooks`).
"""

from __future__ import annotations

import difflib
import inspect
import types
from typing import Any

import pluggy

from ksi import hookspecs
from ksi.errors import PluginError
from ksi.plugins.builtins import BUILTIN_HOOKS, LazyBuiltin

HOOK_PREFIX = "ksi_"


class KsiPluginManager(pluggy.PluginManager):
    """Treats every ``ksi_*`` function as a hook implementation, decorated or not."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT_NAME)
        self.add_hookspecs(hookspecs)

    def is_registered(self, plugin: object) -> bool:
        """True for a registered object, and for a built-in module behind its stand-in."""
        if super().is_registered(plugin):
            return True
        name = getattr(plugin, "__name__", None)
        return (
            isinstance(plugin, types.ModuleType)
            and name in BUILTIN_HOOKS
            and isinstance(self.get_plugin(name), LazyBuiltin)
        )

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> pluggy.HookimplOpts | None:
        if isinstance(plugin, LazyBuiltin) and not name.startswith(HOOK_PREFIX):
            return None  # a stand-in has its hooks and object's own attributes, nothing else
        opts = super().parse_hookimpl_opts(plugin, name)
        if (
            opts is None
            and name.startswith(HOOK_PREFIX)
            and inspect.isroutine(getattr(plugin, name, None))
        ):
            return pluggy.HookimplOpts(
                wrapper=False,
                hookwrapper=False,
                optionalhook=False,
                tryfirst=False,
                trylast=False,
                specname=None,
            )
        return opts

    def hooks_of(self, plugin_name: str) -> list[str]:
        """The hooks a registered plugin implements, sorted (what ``ksi plugins`` lists)."""
        plugin = self.get_plugin(plugin_name)
        callers = self.get_hookcallers(plugin) if plugin is not None else None
        return sorted(hc.name for hc in callers or [])

    def check_hooks(self, plugin_name: str) -> None:
        """Raise :class:`PluginError` for a ``ksi_*`` function that is not a hook, or a wrapper."""
        plugin = self.get_plugin(plugin_name)
        known = sorted(n for n, hc in vars(self.hook).items() if hc.spec is not None)
        bad = []
        wrappers = []
        for hc in self.get_hookcallers(plugin) or []:
            if hc.spec is None:
                close = difflib.get_close_matches(hc.name, known, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                bad.append(f"{hc.name!r}{hint}")
            elif any(i.plugin is plugin and is_wrapper(i) for i in hc.get_hookimpls()):
                wrappers.append(repr(hc.name))
        if bad:
            raise PluginError(
                f"defines {', '.join(bad)}, which KSI has no hook for; "
                f"hooks are listed in ksi.hookspecs"
            )
        if wrappers:
            raise PluginError(
                f"defines {', '.join(wrappers)} as a hook wrapper (wrapper=True or "
                "hookwrapper=True), which KSI does not support: it calls each plugin's hook "
                "on its own so that one failing plugin is skipped alone; drop the wrapper "
                "option (tryfirst=True or trylast=True set the order instead)"
            )
        self.check_pending()

    def register_checked(self, plugin: object, name: str) -> None:
        """Register ``plugin`` and check its hooks; on any error it is left unregistered."""
        try:
            self.register(plugin, name=name)
            self.check_hooks(name)
        except Exception:
            if self.has_plugin(name):
                self.unregister(name=name)
            raise


def is_wrapper(impl: pluggy.HookImpl) -> bool:
    return bool(impl.hookwrapper or impl.wrapper)


def call_order(caller: pluggy.HookCaller) -> list[pluggy.HookImpl]:
    """A hook's implementations in the order pluggy itself would call them.

    ``tryfirst`` ones first, then the others newest plugin first, ``trylast``
    ones last. KSI calls each one itself (so a plugin that raises is skipped
    alone), which is why hook wrappers are refused at load.
    """
    return [impl for impl in reversed(caller.get_hookimpls()) if not is_wrapper(impl)]


def precedence(impl: pluggy.HookImpl) -> int:
    """How strongly a registration claims its names: 1 with ``tryfirst``, else 0.

    Every built-in registers ``trylast``, and a plain registration of a
    built-in's name is a clash (one plugin must not hijack a built-in by
    accident); ``tryfirst`` is how a plugin says it means to override.
    """
    return 1 if impl.tryfirst else 0
