"""Collecting one kind of component from every plugin: the ``register`` callbacks.

Each plugin's ``ksi_register_<kind>`` is called on its own with a
``register`` callback; nothing from a plugin whose hook raised is used. Then
every component is checked (a valid name, every method its protocol
requires) and added to the kind's :class:`~ksi.registry.Registry`: names go
to the strongest claim (``tryfirst``), at equal strength built-ins first,
then in load order, so a clash is blamed on the newcomer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ksi.errors import PluginError
from ksi.kinds import ENVIRONMENT, ComponentKind
from ksi.plugins.hooks import Hooks
from ksi.plugins.report import Failures, PluginInfo
from ksi.registry import Registry, registered_names

if TYPE_CHECKING:
    from ksi.plugins.hooks import Registrar


class LoadedPlugins(Protocol):
    """What collecting components and adding commands read of the loaded plugins.

    :class:`~ksi.plugins.state.PluginState` is the one there is; it calls
    :func:`collect` and :func:`~ksi.plugins.commands.add_commands`, so they name
    it by what they use rather than import it (that would be a circle).
    """

    @property
    def infos(self) -> Mapping[str, PluginInfo]: ...
    @property
    def failures(self) -> Failures: ...
    @property
    def hooks(self) -> Hooks: ...
    def describe(self, plugin_name: str) -> str: ...
    def is_builtin(self, plugin_name: str) -> bool: ...
    def plugin_failed(self, plugin: str, stage: str, exc: BaseException, late: str) -> None: ...


def collect(state: LoadedPlugins, kind: ComponentKind[Any]) -> Registry:
    """A new registry of ``kind`` from every loaded plugin; what failed goes to ``state``."""
    reg = Registry(
        kind,
        describe=state.describe,
        is_builtin=state.is_builtin,
        failures=lambda: [str(e) for e in state.failures.during(kind.name)],
    )
    state.failures.start(kind.name)
    for info in state.infos.values():
        info.components.pop(kind.name, None)
        info.overrides.pop(kind.name, None)
    stage = f"register {kind.plural}"
    staged: list[tuple[Registrar, list[object]]] = []
    for registrar in state.hooks.registrars(kind):
        objs: list[object] = []
        try:
            registrar(objs.append)
        except Exception as exc:
            # Nothing from a plugin whose hook raised is used: it is skipped whole.
            state.plugin_failed(registrar.plugin, stage, exc, late=kind.name)
            continue
        staged.append((registrar, objs))
    load_order = {name: n for n, name in enumerate(state.infos)}
    staged.sort(
        key=lambda s: (
            -s[0].precedence,
            not state.is_builtin(s[0].plugin),
            load_order.get(s[0].plugin, len(load_order)),
        )
    )
    for registrar, objs in staged:
        plugin = registrar.plugin
        for obj in objs:
            try:
                check_component(kind, obj, plugin)
                added = reg.add(obj, plugin, precedence=registrar.precedence)
            except PluginError as exc:  # a clash, or not a valid component
                state.plugin_failed(plugin, stage, exc, late=kind.name)
                continue
            owner = state.infos.get(plugin)
            if owner is not None:
                owner.components.setdefault(kind.name, []).append(added.name)
    for loser, winner in reg.overridden:
        owner = state.infos.get(winner.plugin)
        if owner is not None:
            owner.overrides.setdefault(kind.name, []).append(
                f"{loser.name} of {state.describe(loser.plugin)}"
            )
    return reg


def check_component(kind: ComponentKind[Any], obj: Any, plugin: str) -> None:
    """Refuse a component without a valid name, or without a method its protocol requires."""
    name, _ = registered_names(obj, kind.name, plugin)
    missing = kind.missing_methods(obj)
    if missing:
        raise PluginError(
            f"plugin {plugin!r} registered {kind} {name!r} without "
            f"{', '.join(m + '()' for m in missing)} (see ksi.interfaces.{kind.protocol_name})"
        )
    # Read off the class before any instance exists; a value there must be a real bool
    # or None, since a truthy "yes" would be read as a word never given.
    isolates = getattr(obj, "isolates_agent", None)
    if kind is ENVIRONMENT and not (isolates is None or isinstance(isolates, bool)):
        raise PluginError(
            f"plugin {plugin!r} registered environment {name!r} with isolates_agent="
            f"{isolates!r}; it must be True (the agent is kept off the host), False, or "
            "left out (taken as not isolating; see ksi.interfaces.Environment)"
        )
