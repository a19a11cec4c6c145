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
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import os
import threading
import types
from collections.abc import Callable, Collection
from typing import Any

import pluggy

from ksi import hookspecs
from ksi.entry_points import KSI_GROUP, EntryPoint, entry_points, normalize
from ksi.errors import DuplicateComponentError, PluginError
from ksi.registry import Registry, component_name

#: Built-in plugins (module -> the hooks it implements). They are registered
#: exactly like third-party ones, first, but each module is imported only when
#: one of its hooks is first called (:class:`_LazyBuiltin`), so a command that
#: needs no agent never imports the agents. Every built-in hook is ``trylast``.
#: tests/test_plugins.py checks this table against the modules themselves.
BUILTIN_HOOKS: dict[str, tuple[str, ...]] = {
    "ksi.tasks.custom": ("ksi_register_task_sources",),
    "ksi.eval.command": ("ksi_register_evaluators",),
    "ksi.agents.builtin": ("ksi_register_agents",),
    "ksi.agents.claude_code": ("ksi_register_agents",),
    "ksi.agents.codex": ("ksi_register_agents",),
    "ksi.agents.aider": ("ksi_register_agents",),
    "ksi.agents.gemini_cli": ("ksi_register_agents",),
    "ksi.agents.opencode": ("ksi_register_agents",),
    "ksi.agents.mini_swe_agent": ("ksi_register_agents",),
    "ksi.environments.local": ("ksi_register_environments",),
    "ksi.environments.sandbox": ("ksi_register_environments",),
    "ksi.environments.docker": ("ksi_register_environments",),
    "ksi.executors.local": ("ksi_register_executors",),
    "ksi.executors.processes": ("ksi_register_executors",),
    "ksi.generations.strategies": ("ksi_register_strategies",),
    "ksi.generations.evidence_distiller": ("ksi_register_distillers",),
    "ksi.generations.agent_distiller": ("ksi_register_distillers",),
    "ksi.observers.report": ("ksi_run_started", "ksi_attempt_finished", "ksi_run_finished"),
}
DEFAULT_PLUGINS: tuple[str, ...] = tuple(BUILTIN_HOOKS)


def _argnames(function: Callable[..., Any]) -> list[str]:
    return [
        p.name
        for p in inspect.signature(function, follow_wrapped=False).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


class _LazyBuiltin:
    """Stands in for a built-in plugin module until one of its hooks is called.

    Each hook is a function pluggy sees with the hookspec's arguments and
    ``trylast``; the first call imports the module and forwards to the real
    function (with the arguments it declares).
    """

    def __init__(self, module_name: str, hooks: tuple[str, ...]) -> None:
        self.__name__ = module_name
        for hook in hooks:
            setattr(self, hook, self._forwarder(module_name, hook))

    @staticmethod
    def _forwarder(module_name: str, hook: str) -> Callable[..., Any]:
        spec = getattr(hookspecs, hook)
        spec_args = _argnames(spec)
        real: list[tuple[Callable[..., Any], list[str]]] = []

        def forward(*args: Any, **kwargs: Any) -> Any:
            if not real:
                function = getattr(importlib.import_module(module_name), hook)
                real.append((function, _argnames(function)))
            function, wanted = real[0]
            kwargs.update(zip(spec_args, args, strict=False))
            return function(**{k: v for k, v in kwargs.items() if k in wanted})

        forward.__name__ = hook
        forward.__wrapped__ = spec  # type: ignore[attr-defined]  # pluggy reads the arguments here
        return hookspecs.hookimpl(trylast=True)(forward)


#: Registry kinds and the hook that fills each.
KINDS: dict[str, str] = {
    "task source": "ksi_register_task_sources",
    "evaluator": "ksi_register_evaluators",
    "agent": "ksi_register_agents",
    "environment": "ksi_register_environments",
    "executor": "ksi_register_executors",
    "strategy": "ksi_register_strategies",
    "distiller": "ksi_register_distillers",
}


def plural(kind: str) -> str:
    """``strategy`` -> ``strategies``, ``agent`` -> ``agents`` (listings and messages)."""
    return kind[:-1] + "ies" if kind.endswith("y") else kind + "s"


IN_PROCESS = "(in-process)"
HOOK_PREFIX = "ksi_"


@dataclasses.dataclass(frozen=True)
class LoadError:
    """A plugin (or one of its components) that KSI skipped, and why."""

    plugin: str
    distribution: str
    version: str
    stage: str
    error: str
    #: The formatted traceback when an exception caused it (``ksi --debug`` shows it).
    traceback: str = dataclasses.field(default="", compare=False, repr=False)

    def __str__(self) -> str:
        origin = self.distribution + (f" {self.version}" if self.version else "")
        return f"plugin {self.plugin!r} from {origin} failed to {self.stage}: {self.error}"


@dataclasses.dataclass
class PluginInfo:
    """What ``ksi plugins`` shows about one loaded plugin."""

    name: str
    distribution: str
    version: str
    builtin: bool
    hooks: list[str] = dataclasses.field(default_factory=list)
    #: kind -> names of the components this plugin registered.
    components: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: kind -> the other plugins' components this one overrides (``custom of 'ksi.tasks.custom'``).
    overrides: dict[str, list[str]] = dataclasses.field(default_factory=dict)


#: PEP 503 normalisation, so ``KSI_LOAD_PLUGINS=My_Plugin`` matches ``my-plugin``.
_norm = normalize


def _env_list(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {_norm(x) for x in raw.split(",") if x.strip()}


def _strict() -> bool:
    return os.environ.get("KSI_STRICT_PLUGINS", "").strip().lower() in {"1", "true", "yes", "on"}


class _KsiPluginManager(pluggy.PluginManager):
    """Treats every ``ksi_*`` function as a hook implementation, decorated or not.

    pluggy ignores undecorated functions, so a plugin author who forgot
    ``@hookimpl`` *and* misspelled the name would see nothing happen. Like
    pytest with ``pytest_*``, the prefix is reserved: such a function is
    either a real hook or an error at load time.
    """

    def is_registered(self, plugin: object) -> bool:
        """True for a registered object, and for a built-in module behind its stand-in."""
        if super().is_registered(plugin):
            return True
        name = getattr(plugin, "__name__", None)
        return (
            isinstance(plugin, types.ModuleType)
            and name in BUILTIN_HOOKS
            and isinstance(self.get_plugin(name), _LazyBuiltin)
        )

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> pluggy.HookimplOpts | None:
        if isinstance(plugin, _LazyBuiltin) and not name.startswith(HOOK_PREFIX):
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


def _call_impl(impl: pluggy.HookImpl, **kwargs: Any) -> Any:
    """Call one hook implementation with the subset of arguments it declares."""
    return impl.function(**{k: v for k, v in kwargs.items() if k in impl.argnames})


def _is_wrapper(impl: pluggy.HookImpl) -> bool:
    return bool(impl.hookwrapper or impl.wrapper)


def call_order(caller: pluggy.HookCaller) -> list[pluggy.HookImpl]:
    """A hook's implementations in the order pluggy itself would call them.

    ``tryfirst`` ones first, then the others newest plugin first, ``trylast``
    ones last. KSI calls each one itself (so a plugin that raises is skipped
    alone), which is why hook wrappers are refused at load.
    """
    return [impl for impl in reversed(caller.get_hookimpls()) if not _is_wrapper(impl)]


def precedence(impl: pluggy.HookImpl) -> int:
    """How strongly a registration claims its names: 1 with ``tryfirst``, else 0.

    Every built-in registers ``trylast``, and a plain registration of a
    built-in's name is a clash (one plugin must not hijack a built-in by
    accident); ``tryfirst`` is how a plugin says it means to override.
    """
    return 1 if impl.tryfirst else 0


#: The protocol (in :mod:`ksi.interfaces`) each kind of component follows.
PROTOCOLS: dict[str, str] = {
    "task source": "TaskSource",
    "evaluator": "Evaluator",
    "agent": "Agent",
    "environment": "Environment",
    "executor": "Executor",
    "strategy": "Strategy",
    "distiller": "Distiller",
}

#: Protocol methods the runner treats as optional (it checks for them before calling).
OPTIONAL_METHODS: dict[str, frozenset[str]] = {
    "agent": frozenset({"check_tasks", "missing_credentials"})
}


def required_methods(kind: str) -> list[str]:
    """The methods a component of ``kind`` must have: its protocol's, minus the optional ones.

    Read from the protocol class itself, so a method added to a protocol is
    required from then on without a second list to keep in step.
    """
    from ksi import interfaces

    protocol = getattr(interfaces, PROTOCOLS[kind])
    optional = OPTIONAL_METHODS.get(kind, frozenset())
    return [
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and callable(value) and name not in optional
    ]


def missing_methods(kind: str, component: object) -> list[str]:
    """The required methods ``component`` lacks (empty when it follows its protocol)."""
    return [name for name in required_methods(kind) if not callable(getattr(component, name, None))]


class PluginState:
    """The loaded plugin manager, what each plugin is, and what went wrong."""

    def __init__(self) -> None:
        self.pm = _KsiPluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        #: Failures while importing or registering plugins.
        self.load_errors: list[LoadError] = []
        #: Failures while collecting one kind of component (rebuilt with it).
        self._late_errors: dict[str, list[LoadError]] = {}
        self._registries: dict[str, Registry] = {}
        self._lock = threading.RLock()

    @property
    def errors(self) -> list[LoadError]:
        """Every failure so far, loading first, then per kind in lookup order."""
        late = [e for errs in self._late_errors.values() for e in errs]
        return [*self.load_errors, *late]

    # -- loading -----------------------------------------------------------
    def load(self) -> None:
        """Register the default plugins, then the entry points the environment allows."""
        for module_name, hooks in BUILTIN_HOOKS.items():
            # The table holds real hook names (a test checks it): no need to check them here.
            self.pm.register(_LazyBuiltin(module_name, hooks), name=module_name)
            self.infos[module_name] = PluginInfo(
                module_name, "ksi", _ksi_version(), builtin=True, hooks=sorted(hooks)
            )
        self._load_entry_points()

    def _load_entry_points(self) -> None:
        only = _env_list("KSI_LOAD_PLUGINS")
        blocked = _env_list("KSI_DISABLE_PLUGINS") or set()
        seen: set[str] = set()
        for ep in entry_points(KSI_GROUP):
            dist = ep.dist or "(unknown distribution)"
            version = ep.version
            names = {_norm(dist), _norm(ep.name)}
            seen |= names
            if only is not None and not names & only:
                continue
            if names & blocked:
                continue
            self._load_entry_point(ep, dist, version)
        for missing in sorted((only or set()) - seen):
            self._fail(
                missing,
                "KSI_LOAD_PLUGINS",
                "",
                "load",
                f"no installed distribution has a {KSI_GROUP!r} entry point called "
                f"{missing!r}; installed: {', '.join(sorted(seen)) or '(none)'}",
            )

    def _load_entry_point(self, ep: EntryPoint, dist: str, version: str) -> None:
        owner = self.infos.get(ep.name)
        if owner is not None:
            if owner.distribution == dist:
                return  # the same distribution found twice on sys.path
            self._fail(
                ep.name,
                dist,
                version,
                "register",
                f"the plugin name {ep.name!r} is already used by {owner.distribution} "
                f"{owner.version}; rename the entry point in one of them",
            )
            return
        try:
            obj = ep.load()
        except BaseException as exc:  # SystemExit in a plugin must not end KSI
            if isinstance(exc, KeyboardInterrupt):
                raise
            self._fail(ep.name, dist, version, "import", exc)
            return
        try:
            self.pm.register(obj, name=ep.name)
            self._check_hooks(ep.name)
        except Exception as exc:
            if self.pm.has_plugin(ep.name):
                self.pm.unregister(name=ep.name)
            self._fail(ep.name, dist, version, "register hooks", exc)
            return
        self.infos[ep.name] = PluginInfo(
            ep.name, dist, version, builtin=False, hooks=self._hooks_of(ep.name)
        )

    def _hooks_of(self, plugin_name: str) -> list[str]:
        plugin = self.pm.get_plugin(plugin_name)
        callers = self.pm.get_hookcallers(plugin) if plugin is not None else None
        return sorted(hc.name for hc in callers or [])

    def _check_hooks(self, plugin_name: str) -> None:
        """Raise :class:`PluginError` for a ``ksi_*`` function that is not a hook, or a wrapper."""
        plugin = self.pm.get_plugin(plugin_name)
        known = sorted(n for n, hc in vars(self.pm.hook).items() if hc.spec is not None)
        bad = []
        wrappers = []
        for hc in self.pm.get_hookcallers(plugin) or []:
            if hc.spec is None:
                close = difflib.get_close_matches(hc.name, known, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                bad.append(f"{hc.name!r}{hint}")
            elif any(i.plugin is plugin and _is_wrapper(i) for i in hc.get_hookimpls()):
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
        self.pm.check_pending()

    def describe(self, plugin_name: str) -> str:
        """``'name' (dist version)`` for messages that must say where a plugin came from."""
        info = self.infos.get(plugin_name)
        if info is None:
            return repr(plugin_name)
        if info.builtin:
            return f"{plugin_name!r} (built into ksi)"
        return f"{plugin_name!r} ({info.distribution} {info.version})".replace(" )", ")")

    def _fail(
        self,
        plugin: str,
        dist: str,
        version: str,
        stage: str,
        exc: BaseException | str,
        *,
        late: str | None = None,
    ) -> None:
        message = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        trace = "" if isinstance(exc, str) else _format_traceback(exc)
        err = LoadError(plugin, dist, version, stage, message, trace)
        if _strict():
            cause = exc if isinstance(exc, BaseException) else None
            raise PluginError(f"{err} (KSI_STRICT_PLUGINS=1 makes this fatal)") from cause
        if late is None:
            self.load_errors.append(err)
        else:
            self._late_errors.setdefault(late, []).append(err)

    def _fail_plugin(self, plugin: str, stage: str, exc: BaseException, late: str) -> None:
        """Record (or, strict, raise) a loaded plugin's failure; a built-in's is a bug."""
        info = self.infos.get(plugin)
        if info is not None and info.builtin and not isinstance(exc, DuplicateComponentError):
            raise exc  # a broken built-in is a bug in KSI: keep the traceback
        dist = info.distribution if info else "(registered directly)"
        self._fail(plugin, dist, info.version if info else "", stage, exc, late=late)

    # -- registries --------------------------------------------------------
    def registry(self, kind: str) -> Registry:
        """The components of ``kind`` (a key of :data:`KINDS`), collected on first call."""
        if kind not in KINDS:
            raise ValueError(f"unknown component kind {kind!r}; expected one of {list(KINDS)}")
        with self._lock:
            reg = self._registries.get(kind)
            if reg is None:
                reg = self._build_registry(kind)
                self._registries[kind] = reg
            return reg

    def _build_registry(self, kind: str) -> Registry:
        reg = Registry(
            kind,
            describe=self.describe,
            is_builtin=self._is_builtin,
            failures=lambda: self._failures_for(kind),
        )
        self._late_errors[kind] = []
        for info in self.infos.values():
            info.components.pop(kind, None)
            info.overrides.pop(kind, None)
        stage = f"register {plural(kind)}"
        staged: list[tuple[pluggy.HookImpl, list[Any]]] = []
        for impl in call_order(getattr(self.pm.hook, KINDS[kind])):
            objs: list[Any] = []
            try:
                _call_impl(impl, register=objs.append)
            except Exception as exc:
                # Nothing from a plugin whose hook raised is used: it is skipped whole.
                self._fail_plugin(impl.plugin_name, stage, exc, late=kind)
                continue
            staged.append((impl, objs))
        # Names go to the strongest claim (tryfirst); at equal strength built-ins
        # first, then in load order, so a clash is blamed on the newcomer.
        load_order = {name: n for n, name in enumerate(self.infos)}
        staged.sort(
            key=lambda s: (
                -precedence(s[0]),
                not self._is_builtin(s[0].plugin_name),
                load_order.get(s[0].plugin_name, len(load_order)),
            )
        )
        for impl, objs in staged:
            plugin = impl.plugin_name
            for obj in objs:
                try:
                    self._check_component(kind, obj, plugin)
                    added = reg.add(obj, plugin, precedence=precedence(impl))
                except PluginError as exc:  # a clash, or not a valid component
                    self._fail_plugin(plugin, stage, exc, late=kind)
                    continue
                owner = self.infos.get(plugin)
                if owner is not None:
                    owner.components.setdefault(kind, []).append(added.name)
        for loser, winner in reg.overridden:
            owner = self.infos.get(winner.plugin)
            if owner is not None:
                owner.overrides.setdefault(kind, []).append(
                    f"{loser.name} of {self.describe(loser.plugin)}"
                )
        return reg

    def _check_component(self, kind: str, obj: Any, plugin: str) -> None:
        """Refuse a component without a valid name, or without a method its protocol requires."""
        name, _ = component_name(obj, kind, plugin)
        missing = missing_methods(kind, obj)
        if missing:
            raise PluginError(
                f"plugin {plugin!r} registered {kind} {name!r} without "
                f"{', '.join(m + '()' for m in missing)} (see ksi.interfaces."
                f"{PROTOCOLS[kind]})"
            )
        isolates = getattr(obj, "isolates_agent", True)
        if kind == "environment" and not isinstance(isolates, bool):
            raise PluginError(
                f"plugin {plugin!r} registered environment {name!r} with isolates_agent="
                f"{isolates!r}; it must be True (the agent is kept off the host) or False "
                "(see ksi.interfaces.Environment)"
            )

    def _failures_for(self, kind: str) -> list[str]:
        """Plugins that failed to import or to register ``kind``: what an unknown name may be."""
        return [str(e) for e in [*self.load_errors, *self._late_errors.get(kind, [])]]

    def _is_builtin(self, plugin_name: str) -> bool:
        info = self.infos.get(plugin_name)
        return info is not None and info.builtin

    def builtin_names(self, kind: str) -> set[str]:
        """The names and aliases (lower case) KSI's own plugins give components of ``kind``."""
        reg = self.registry(kind)
        return {
            key
            for r in reg
            if self._is_builtin(r.plugin)
            for key in (r.name.lower(), *(a.lower() for a in r.aliases))
        }

    def build_all(self) -> None:
        """Collect every kind of component now, so listings show them and all errors."""
        for kind in KINDS:
            self.registry(kind)

    # -- other hooks -------------------------------------------------------
    def call_observers(self, hook_name: str, **kwargs: Any) -> list[str]:
        """Call a lifecycle hook on every plugin; return the errors instead of raising."""
        problems = []
        for impl in call_order(getattr(self.pm.hook, hook_name)):
            try:
                _call_impl(impl, **kwargs)
            except Exception as exc:
                problems.append(
                    f"{hook_name} in plugin {self.describe(impl.plugin_name)}: "
                    f"{type(exc).__name__}: {exc}"
                )
        return problems

    def register_commands(self, cli: Any, *, reserved: Collection[str] = ()) -> None:
        """Let every plugin add CLI commands to ``cli`` (a ``typer.Typer``).

        A plugin that raises is reported and skipped. A command named like one
        in ``reserved`` (KSI's built-in commands) or like an earlier plugin's is
        taken out again and reported against the plugin: ``ksi run`` is always
        KSI's own.
        """
        self._late_errors["command"] = []
        taken = {name: "" for name in reserved}
        for impl in call_order(self.pm.hook.ksi_register_commands):
            before = (len(cli.registered_commands), len(cli.registered_groups))
            try:
                _call_impl(impl, cli=cli)
            except Exception as exc:
                self._fail_plugin(impl.plugin_name, "register commands", exc, late="command")
                continue
            for entries, start in zip(
                (cli.registered_commands, cli.registered_groups), before, strict=True
            ):
                for entry in list(entries[start:]):
                    name = _command_name(entry)
                    owner = taken.get(name) if name is not None else None
                    if owner is None:
                        if name is not None:
                            taken[name] = impl.plugin_name
                        continue
                    entries.remove(entry)
                    holder = f"plugin {self.describe(owner)}" if owner else "ksi itself"
                    self._fail_plugin(
                        impl.plugin_name,
                        "register commands",
                        PluginError(
                            f"command {name!r} is already {holder}'s; `ksi {name}` stays "
                            f"{'built in' if not owner else 'that one'} and this plugin's "
                            "is left out: rename it"
                        ),
                        late="command",
                    )

    # -- in-process plugins ------------------------------------------------
    def register_plugin(self, obj: object, name: str | None = None) -> Callable[[], None]:
        """See :func:`register_plugin`."""
        plugin_name = name or getattr(obj, "__name__", None) or f"{type(obj).__name__}@{id(obj)}"
        with self._lock:
            if self.pm.is_registered(obj):
                # Already loaded (an installed plugin's module, registered from its
                # entry point): it is in effect as asked, and stays when the caller is done.
                return lambda: None
            if self.pm.has_plugin(plugin_name):
                raise PluginError(f"a plugin called {plugin_name!r} is already registered")
            try:
                self.pm.register(obj, name=plugin_name)
                self._check_hooks(plugin_name)
            except Exception as exc:
                if self.pm.has_plugin(plugin_name):
                    self.pm.unregister(name=plugin_name)
                if isinstance(exc, PluginError):
                    raise PluginError(f"plugin {plugin_name!r} {exc}") from exc
                raise PluginError(f"plugin {plugin_name!r}: {exc}") from exc
            self.infos[plugin_name] = PluginInfo(
                plugin_name, IN_PROCESS, "", builtin=False, hooks=self._hooks_of(plugin_name)
            )
            self._registries.clear()

        def unregister() -> None:
            with self._lock:
                if self.pm.has_plugin(plugin_name):
                    self.pm.unregister(name=plugin_name)
                self.infos.pop(plugin_name, None)
                self._registries.clear()
                for errs in self._late_errors.values():
                    errs[:] = [e for e in errs if e.plugin != plugin_name]

        return unregister


def _command_name(entry: Any) -> str | None:
    """The name typer gives a registered command or group (``None``: typer names it later)."""
    name = getattr(entry, "name", None)
    if name is None and getattr(entry, "typer_instance", None) is not None:
        name = entry.typer_instance.info.name
    if name is None and getattr(entry, "callback", None) is not None:
        name = entry.callback.__name__
    return None if not isinstance(name, str) else name.lower().replace("_", "-")


def _format_traceback(exc: BaseException) -> str:
    import traceback  # only when a plugin fails: it is slow to import

    return "".join(traceback.format_exception(exc))


def _ksi_version() -> str:
    from ksi._version import __version__

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


def loaded_plugins() -> PluginState | None:
    """The plugin state if something has loaded it already, else ``None`` (loads nothing)."""
    return _STATE


def reset_plugins() -> None:
    """Forget loaded plugins (tests, and ``ksi install`` before listing again)."""
    global _STATE
    with _STATE_LOCK:
        _STATE = None


def registry(kind: str) -> Registry:
    """The components of one kind (``"task source"``, ``"evaluator"``...)."""
    return get_plugins().registry(kind)


def register_plugin(obj: object, name: str | None = None) -> Callable[[], None]:
    """Register an in-process plugin (tests, notebooks); returns a function that removes it.

    ``obj`` is a module, class or instance with ``ksi_*`` hook functions.
    Unlike an entry point, a broken in-process plugin raises
    :class:`ksi.errors.PluginError` right away: its author is the caller.
    """
    return get_plugins().register_plugin(obj, name)
