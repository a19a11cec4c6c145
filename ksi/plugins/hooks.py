"""Every call of a KSI hook, through one typed facade.

:class:`Hooks` has a method per hook family, taking the hook's arguments
typed and naming the hook by its spec function in :mod:`ksi.hookspecs` (or by
a :class:`~ksi.kinds.ComponentKind`, which holds that function), so a
misspelt hook or argument is a mypy error, not a string that fails at run
time; the lifecycle observers share one, :meth:`Hooks.observe`, whose hook
name is checked the same way (a :data:`ObserverHook`). KSI calls each
plugin's implementation on its own, in pluggy's order
(:func:`~ksi.plugins.manager.call_order`), so one plugin that raises is
skipped alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import pluggy

from ksi import hookspecs
from ksi.plugins.manager import call_order, precedence

if TYPE_CHECKING:
    import typer

    from ksi.kinds import ComponentKind

#: The lifecycle hooks, for code that names one (:meth:`Hooks.observe`).
ObserverHook = Literal[
    "ksi_run_started",
    "ksi_attempt_finished",
    "ksi_generation_started",
    "ksi_generation_finished",
    "ksi_run_finished",
]


@dataclasses.dataclass(frozen=True)
class Implementation:
    """One plugin's implementation of a hook, to be called on its own."""

    #: The plugin's name (its entry point's, or a built-in's module).
    plugin: str
    impl: pluggy.HookImpl = dataclasses.field(repr=False)

    @property
    def precedence(self) -> int:
        """How strongly its registrations claim their names (see :func:`precedence`)."""
        return precedence(self.impl)

    def _call(self, **kwargs: Any) -> object:
        return _call(self.impl, **kwargs)


def _call(impl: pluggy.HookImpl, **kwargs: Any) -> object:
    """Call one implementation; hook arguments are opt-in, so it gets those it declares."""
    return impl.function(**{k: v for k, v in kwargs.items() if k in impl.argnames})


class Registrar(Implementation):
    """A plugin's ``ksi_register_<kind>`` implementation."""

    def __call__(self, register: hookspecs.Register) -> None:
        self._call(register=register)


class CommandAdder(Implementation):
    """A plugin's ``ksi_register_commands`` implementation."""

    def __call__(self, cli: typer.Typer) -> None:
        self._call(cli=cli)


class Hooks:
    """KSI's hooks, called with typed arguments (see the module docstring)."""

    def __init__(self, pm: pluggy.PluginManager, describe: Callable[[str], str]) -> None:
        self._pm = pm
        #: How an observer's failure names its plugin (with its distribution).
        self._describe = describe

    def _implementations(self, spec: Callable[..., None]) -> list[pluggy.HookImpl]:
        caller: pluggy.HookCaller = getattr(self._pm.hook, spec.__name__)
        return call_order(caller)

    # -- registration --------------------------------------------------------
    def registrars(self, kind: ComponentKind[Any]) -> list[Registrar]:
        """Each plugin's implementation of the hook that registers ``kind``, in call order."""
        return [Registrar(i.plugin_name, i) for i in self._implementations(kind.hook)]

    def command_adders(self) -> list[CommandAdder]:
        """Each plugin's ``ksi_register_commands``, in call order."""
        impls = self._implementations(hookspecs.ksi_register_commands)
        return [CommandAdder(i.plugin_name, i) for i in impls]

    # -- lifecycle observers: each returns the failures, never raises them ----
    def observe(self, hook: ObserverHook, **kwargs: Any) -> list[str]:
        """A lifecycle hook named by code that passes it along (its name is still checked)."""
        spec: Callable[..., None] = getattr(hookspecs, hook)
        return self._observe(spec, **kwargs)

    def _observe(self, spec: Callable[..., None], **kwargs: Any) -> list[str]:
        problems = []
        for impl in self._implementations(spec):
            try:
                _call(impl, **kwargs)
            except Exception as exc:
                problems.append(
                    f"{spec.__name__} in plugin {self._describe(impl.plugin_name)}: "
                    f"{type(exc).__name__}: {exc}"
                )
        return problems
