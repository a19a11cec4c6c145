"""``ksi plugins``: what is installed, what each plugin provides, and what failed to load.

A group rather than a single command so subcommands (``ksi plugins new``,
which generates a plugin package with :mod:`ksi.scaffold`) can sit under it;
with no subcommand it lists.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from ksi.cli.app import Settings
from ksi.cli.common import echo_json, is_tty
from ksi.kinds import KINDS, kind_named
from ksi.plugins import PluginInfo, PluginState, get_plugins
from ksi.text import printable

plugins_app = typer.Typer(
    name="plugins",
    help="List installed plugins, what they provide and any that failed to load.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def register(app: typer.Typer) -> None:
    """Add ``ksi plugins`` to ``app``."""
    app.add_typer(plugins_app, name="plugins")


@plugins_app.callback(invoke_without_command=True)
def plugins(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Include KSI's built-in plugins.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List plugins: distribution, version, hooks, components registered, load errors.

    Load errors are always shown (on stderr, or under "errors" with --json);
    set KSI_STRICT_PLUGINS=1 to make them fatal.
    """
    if ctx.invoked_subcommand is not None:
        return
    state = get_plugins()
    state.build_all()
    root = ctx.find_root().command
    if hasattr(root, "plugin_commands"):  # collected too, so a clashing command is reported
        root.plugin_commands()
    infos = [i for i in state.infos.values() if all_ or not i.builtin]
    infos.sort(key=lambda i: (not i.builtin, i.name.lower()))
    if json_:
        echo_json(
            {
                "plugins": [_info_json(i) for i in infos],
                "errors": [
                    {k: v for k, v in dataclasses.asdict(e).items() if k != "traceback"}
                    for e in state.errors
                ],
            }
        )
        _exit_if_failed(state)
        return
    if not infos and state.errors:
        # Not "none installed": they are, and a reader of stdout alone must not think otherwise.
        count = len(state.errors)
        typer.echo(
            f"No plugins loaded: {count} plugin{'s' if count != 1 else ''} failed to load "
            "(the errors are on stderr)."
        )
    elif not infos:
        hint = "" if all_ else " (--all includes KSI's built-in plugins)"
        typer.echo(f"No plugins installed{hint}.")
    elif is_tty():
        _print_table(infos)
    else:
        for info in infos:
            typer.echo(printable(_plain_line(info)))
    _print_errors(state)
    _exit_if_failed(state)


def _exit_if_failed(state: PluginState) -> None:
    """Exit code 1 when any plugin failed, so a script or CI notices a broken install."""
    Settings.plugin_errors_shown = True
    if state.errors:
        raise typer.Exit(1)


def _info_json(info: PluginInfo) -> dict[str, Any]:
    data = {
        "name": info.name,
        "distribution": info.distribution,
        "version": info.version,
        "builtin": info.builtin,
        "hooks": list(info.hooks),
        "components": {kind: list(names) for kind, names in info.components.items()},
    }
    if info.overrides:  # only plugins that override another's component say so
        data["overrides"] = {kind: list(names) for kind, names in info.overrides.items()}
    return data


def _origin(info: PluginInfo) -> str:
    return f"{info.distribution} {info.version}".strip()


def _components_text(info: PluginInfo) -> str:
    parts = [
        f"{kind.plural}: {', '.join(info.components[kind.name])}"
        for kind in KINDS
        if info.components.get(kind.name)
    ]
    return "; ".join(parts) or "-"


def _overrides_text(info: PluginInfo) -> str:
    return "; ".join(
        f"{kind_named(kind).plural}: {', '.join(names)}" for kind, names in info.overrides.items()
    )


def _plain_line(info: PluginInfo) -> str:
    hooks = ", ".join(info.hooks) or "-"
    line = f"{info.name} ({_origin(info)}): hooks: {hooks}; registers: {_components_text(info)}"
    overrides = _overrides_text(info)
    return f"{line}; overrides: {overrides}" if overrides else line


def _print_table(infos: list[PluginInfo]) -> None:
    # heavy (start-up): rich, only to print to a terminal
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("plugin", "distribution", "hooks", "registers")
    for info in infos:
        cells = (
            info.name,
            _origin(info),
            "\n".join(info.hooks) or "-",
            _components_text(info).replace("; ", "\n"),
        )
        # Plugins name themselves: no markup, no control characters from them.
        table.add_row(*(Text(printable(c, multiline=True)) for c in cells))
    Console().print(table)


def _print_errors(state: PluginState) -> None:
    for err in state.errors:
        typer.echo(f"error: {printable(str(err), multiline=True)}", err=True)
        if Settings.debug and err.traceback:
            typer.echo(err.traceback.rstrip(), err=True)
    if state.errors:
        more = "" if Settings.debug else "; `ksi --debug plugins` shows the tracebacks"
        typer.echo(
            "error: these plugins were skipped; fix or disable them "
            f"(KSI_DISABLE_PLUGINS=name), or see docs/plugins.md#troubleshooting{more}",
            err=True,
        )


@plugins_app.command("new")
def new(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Plugin name, e.g. my-bench (ksi- is added).")
    ],
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Where to create it (default: plugins/ksi-NAME)."),
    ] = None,
) -> None:
    """Generate a working plugin package: entry point, task source, evaluator, tests."""
    # start-up: not needed for `ksi plugins --help`
    from ksi.scaffold import create_plugin, write_wheel_check

    names, target, written = create_plugin(name, directory)
    typer.echo(f"Created {names.dist} in {target} ({len(written)} files).")
    check = write_wheel_check(names, target)
    if check is not None:
        typer.echo(f"Wrote {check}: the end-to-end check .ci/run runs on the plugin's wheel.")
    typer.echo("Next:")
    typer.echo(f"  ksi install -e {target}")
    typer.echo("  ksi plugins")
    typer.echo(
        f"  ksi run {target / 'tasks' / 'example.jsonl'} --task-source {names.name} --agent oracle"
    )
    typer.echo(f"  cd {target} && pytest")
