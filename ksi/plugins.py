"""Finding, loading and guarding plugins.

Loading happens once, on first use (never at import time), in three steps:
KSI's default plugins, then every ``ksi`` entry point (each guarded: one that
fails to import or register is reported and skipped unless
``KSI_STRICT_PLUGINS=1``), then a check that every ``ksi_*`` function a plugin
defines is a real hook. Environment variables:

* ``KSI_LOAD_PLUGINS=a,b``: load only these distributions (empty: none);
* ``KSI_DISABLE_PLUGINS=a,b``: skip these distributions or entry-point names;
* ``KSI_STRICT_PLUGINS=1``: any plugin failure is fatal.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import re
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import attrs
import pluggy

from ksi import hookspecs
from ksi.errors import PluginError
from ksi.registry import Registry

#: Built-in plugins, registered exactly like third-party ones.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "ksi.tasks.custom",
    "ksi.eval.command",
    "ksi.agents.builtin",
    "ksi.environments.local",
    "ksi.executors.local",
)

#: Registry kinds and the hook that fills each.
KINDS: dict[str, str] = {
    "task source": "ksi_register_task_sources",
    "evaluator": "ksi_register_evaluators",
    "agent": "ksi_register_agents",
    "environment": "ksi_register_environments",
    "executor": "ksi_register_executors",
}

ENTRY_POINT_GROUP = "ksi"


@attrs.frozen
class LoadError:
    """A plugin that KSI skipped, and why."""

    plugin: str
    distribution: str
    version: str
    stage: str
    error: str

    def __str__(self) -> str:
        return (
            f"plugin {self.plugin!r} from {self.distribution} {self.version} "
            f"failed to {self.stage}: {self.error}"
        )


@attrs.define
class PluginInfo:
    name: str
    distribution: str
    version: str
    builtin: bool
    hooks: list[str] = attrs.field(factory=list)
    components: dict[str, list[str]] = attrs.field(factory=dict)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _env_list(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {_norm(x) for x in raw.split(",") if x.strip()}


def _strict() -> bool:
    return os.environ.get("KSI_STRICT_PLUGINS", "").strip().lower() in {"1", "true", "yes"}


class PluginState:
    """The loaded plugin manager, what each plugin is, and what went wrong."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        self.errors: list[LoadError] = []
        self._registries: dict[str, Registry] = {}
        self._lock = threading.RLock()

    # -- loading -----------------------------------------------------------
    def load(self) -> None:
        for module_name in DEFAULT_PLUGINS:
            module = importlib.import_module(module_name)
            self.pm.register(module, name=module_name)
            self.infos[module_name] = PluginInfo(
                module_name, "ksi", _ksi_version(), builtin=True
            )
        self.pm.check_pending()
        self._load_entry_points()

    def _load_entry_points(self) -> None:
        only = _env_list("KSI_LOAD_PLUGINS")
        blocked = _env_list("KSI_DISABLE_PLUGINS") or set()
        for ep in md.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist is not None else "?"
            version = ep.dist.version if ep.dist is not None else "?"
            if only is not None and _norm(dist) not in only and _norm(ep.name) not in only:
                continue
            if _norm(dist) in blocked or _norm(ep.name) in blocked:
                continue
            if self.pm.get_plugin(ep.name) is not None or ep.name in self.infos:
                continue  # the same distribution seen twice on sys.path
            try:
                obj = ep.load()
            except Exception as exc:
                self._fail(ep.name, dist, version, "import", exc)
                continue
            try:
                self.pm.register(obj, name=ep.name)
                self.pm.check_pending()
            except Exception as exc:
                if self.pm.get_plugin(ep.name) is not None:
                    self.pm.unregister(name=ep.name)
                self._fail(ep.name, dist, version, "register hooks", exc)
                continue
            self.infos[ep.name] = PluginInfo(ep.name, dist, version, builtin=False)
        for name, info in self.infos.items():
            plugin = self.pm.get_plugin(name)
            info.hooks = sorted(
                hc.name for hc in self.pm.get_hookcallers(plugin) or []
            ) if plugin is not None else []

    def _fail(self, plugin: str, dist: str, version: str, stage: str, exc: BaseException) -> None:
        err = LoadError(plugin, dist, version, stage, f"{type(exc).__name__}: {exc}")
        if _strict():
            raise PluginError(f"{err} (KSI_STRICT_PLUGINS=1 makes this fatal)") from exc
        self.errors.append(err)

    # -- registries --------------------------------------------------------
    def registry(self, kind: str) -> Registry:
        with self._lock:
            reg = self._registries.get(kind)
            if reg is None:
                reg = self._build_registry(kind)
                self._registries[kind] = reg
            return reg

    def _build_registry(self, kind: str) -> Registry:
        hook_name = KINDS[kind]
        reg = Registry(kind)
        for known in self.infos.values():
            known.components.pop(kind, None)
        caller = getattr(self.pm.hook, hook_name)
        # Built-ins first so that a clash is blamed on the newcomer.
        impls = sorted(
            caller.get_hookimpls(),
            key=lambda i: not self.infos.get(i.plugin_name, PluginInfo("", "", "", False)).builtin,
        )
        for impl in impls:
            plugin = impl.plugin_name
            info = self.infos.get(plugin)

            def register(obj: Any, _plugin: str = plugin) -> None:
                r = reg.add(obj, _plugin)
                if info is not None:
                    info.components.setdefault(kind, []).append(r.name)

            try:
                impl.function(register=register)
            except Exception as exc:
                if info is None or info.builtin:
                    raise
                self._fail(plugin, info.distribution, info.version, f"register {kind}s", exc)
        return reg

    def call_observers(self, hook_name: str, **kwargs: Any) -> list[str]:
        """Call a lifecycle hook on every plugin; return the errors instead of raising."""
        problems = []
        caller = getattr(self.pm.hook, hook_name)
        for impl in reversed(caller.get_hookimpls()):
            argnames = impl.argnames
            try:
                impl.function(**{k: v for k, v in kwargs.items() if k in argnames})
            except Exception as exc:
                problems.append(f"{hook_name} in plugin {impl.plugin_name!r}: "
                                f"{type(exc).__name__}: {exc}")
        return problems

    def register_commands(self, cli: Any) -> None:
        self.pm.hook.ksi_register_commands(cli=cli)


def _ksi_version() -> str:
    from ksi import __version__

    return __version__


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


def reset_plugins() -> None:
    """Forget loaded plugins (tests, and ``ksi install`` before listing again)."""
    global _STATE
    with _STATE_LOCK:
        _STATE = None


def registry(kind: str) -> Registry:
    return get_plugins().registry(kind)


def register_plugin(obj: ModuleType | object, name: str | None = None) -> Callable[[], None]:
    """Register an in-process plugin (tests, notebooks); returns a function that removes it."""
    state = get_plugins()
    plugin_name = name or getattr(obj, "__name__", None) or repr(obj)
    state.pm.register(obj, name=plugin_name)
    state.pm.check_pending()
    state.infos[plugin_name] = PluginInfo(plugin_name, "(in-process)", "", builtin=False)
    state.infos[plugin_name].hooks = sorted(
        hc.name for hc in state.pm.get_hookcallers(obj) or []
    )
    state._registries.clear()

    def unregister() -> None:
        state.pm.unregister(obj)
        state.infos.pop(plugin_name, None)
        state._registries.clear()

    return unregister
