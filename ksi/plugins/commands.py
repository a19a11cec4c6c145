"""Plugins' commands on the ``ksi`` command line (``ksi_register_commands``).

A plugin that raises is reported and skipped. A command named like one of
KSI's own (``ksi run`` is always KSI's) or like an earlier plugin's is taken
out again and reported against the plugin that added it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ksi.errors import PluginError
from ksi.plugins.collect import LoadedPlugins

if TYPE_CHECKING:
    import typer


def add_commands(state: LoadedPlugins, cli: typer.Typer, *, reserved: Collection[str] = ()) -> None:
    """Let every plugin add commands to ``cli``; see the module docstring."""
    state.failures.start("command")
    taken = {name: "" for name in reserved}
    for adder in state.hooks.command_adders():
        before = (len(cli.registered_commands), len(cli.registered_groups))
        try:
            adder(cli)
        except Exception as exc:
            state.plugin_failed(adder.plugin, "register commands", exc, late="command")
            continue
        added: tuple[list[Any], list[Any]] = (cli.registered_commands, cli.registered_groups)
        for entries, start in zip(added, before, strict=True):
            for entry in list(entries[start:]):
                name = _command_name(entry)
                owner = taken.get(name) if name is not None else None
                if owner is None:
                    if name is not None:
                        taken[name] = adder.plugin
                    continue
                entries.remove(entry)
                holder = f"plugin {state.describe(owner)}" if owner else "ksi itself"
                state.plugin_failed(
                    adder.plugin,
                    "register commands",
                    PluginError(
                        f"command {name!r} is already {holder}'s; `ksi {name}` stays "
                        f"{'built in' if not owner else 'that one'} and this plugin's "
                        "is left out: rename it"
                    ),
                    late="command",
                )


def _command_name(entry: Any) -> str | None:
    """The name typer gives a registered command or group (``None``: typer names it later)."""
    name = getattr(entry, "name", None)
    if name is None and getattr(entry, "typer_instance", None) is not None:
        name = entry.typer_instance.info.name
    if name is None and getattr(entry, "callback", None) is not None:
        name = entry.callback.__name__
    return None if not isinstance(name, str) else name.lower().replace("_", "-")
