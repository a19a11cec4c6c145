"""``ksi install`` / ``ksi uninstall``: add or remove plugins in KSI's own Python environment.

A plugin is an ordinary Python distribution with a ``ksi`` entry point, and
it must be installed where KSI runs (a pipx or uv tool install has its own
environment that a bare ``pip install`` would miss). So these commands run
the installer with KSI's interpreter: ``uv pip --python <sys.executable>``
when KSI runs under uv (or only uv is there), else ``<sys.executable> -m pip``.
Afterwards the plugin state is reloaded and the plugins that appeared (or
disappeared) are shown, with any that failed to load.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from ksi.cli.app import Settings
from ksi.cli.run_flags_cache import cache_file
from ksi.entry_points import normalize
from ksi.errors import KsiError, UserInputError
from ksi.fileops import write_json_atomic
from ksi.kinds import KINDS
from ksi.plugins import PluginInfo, get_plugins, reset_plugins
from ksi.text import printable

#: Set to ``pip`` or ``uv`` to force the installer.
INSTALLER_VAR = "KSI_INSTALLER"


class InstallError(KsiError):
    """The installer ran and failed (its own output says why)."""

    exit_code = 1


def _pip_available() -> bool:
    try:
        # optional: only asks whether this Python has pip
        import pip  # noqa: F401
    except ImportError:
        return False
    return True


def installer_argv(action: str, *, python: str | None = None) -> list[str]:
    """The installer command prefix for ``action`` (``install`` or ``uninstall``)."""
    python = python or sys.executable
    forced = os.environ.get(INSTALLER_VAR, "").strip().lower()
    if forced not in ("", "pip", "uv"):
        raise UserInputError(f"{INSTALLER_VAR}={forced!r}: expected 'pip' or 'uv'")
    uv = shutil.which("uv")
    under_uv = bool(os.environ.get("UV")) or (Path(sys.prefix) / "uv.lock").exists()
    use_uv = forced == "uv" or (
        forced == "" and uv is not None and (under_uv or not _pip_available())
    )
    if use_uv:
        if uv is None:
            raise UserInputError(f"{INSTALLER_VAR}=uv but no `uv` on PATH")
        return [uv, "pip", action, "--python", python]
    if not _pip_available():
        raise UserInputError(
            f"KSI's Python ({python}) has no pip and no `uv` is on PATH; install pip "
            f"(`{python} -m ensurepip`) or uv"
        )
    argv = [python, "-m", "pip", action]
    if action == "uninstall":
        argv.append("--yes")
    return argv


def _refresh_import_system() -> None:
    """Make what the installer just wrote importable in this process.

    Editable installs add their source directory through a new ``.pth`` file,
    which Python only reads at startup; re-reading the site directories picks
    it up, and invalidating the finders' caches makes new modules visible.
    """
    importlib.invalidate_caches()
    for directory in [*site.getsitepackages(), site.getusersitepackages()]:
        if Path(directory).is_dir():
            site.addsitedir(directory)


def _snapshot() -> dict[str, PluginInfo]:
    _refresh_import_system()
    reset_plugins()
    state = get_plugins()
    for kind in KINDS:
        # A name clash is reported by `ksi plugins`; this summary must still list the rest.
        with contextlib.suppress(KsiError):
            state.registry(kind)
    return {name: info for name, info in state.infos.items() if not info.builtin}


def _describe(info: PluginInfo) -> str:
    provides = "; ".join(
        f"{kind}s: {', '.join(names)}" for kind, names in sorted(info.components.items()) if names
    )
    return f"  {info.name} ({info.distribution} {info.version})" + (
        f": {provides}" if provides else ""
    )


#: Installer output lines shown when it fails without ``-v``.
FAILURE_TAIL_LINES = 30


def _verbose(flag: bool) -> bool:
    """``-v`` on the command or on ``ksi`` itself."""
    return flag or Settings.verbose


def _run(argv: Sequence[str], *, verbose: bool = False) -> None:
    """Run the installer: its output shown with ``-v``, else only its last lines on failure.

    pip prints some thirty lines for one editable install; what a user needs
    is the plugins it added (:func:`_report`), or why it failed.
    """
    typer.echo(printable("$ " + " ".join(argv)), err=True)
    try:
        proc = subprocess.run(
            list(argv),
            check=False,
            stdout=None if verbose else subprocess.PIPE,
            stderr=None if verbose else subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise InstallError(f"could not run {argv[0]}: {exc}") from exc
    if proc.returncode != 0:
        if not verbose and proc.stdout:
            tail = proc.stdout.rstrip("\n").splitlines()[-FAILURE_TAIL_LINES:]
            typer.echo(printable("\n".join(tail), multiline=True), err=True)
        raise InstallError(f"{' '.join(argv[:4])} ... failed with exit code {proc.returncode}")


#: What the plugins registered when ``ksi install``/``uninstall`` last looked (per interpreter).
SEEN_CACHE = "plugins-seen"


def _registered(info: PluginInfo) -> list[Any]:
    """What a plugin is, as far as a user of KSI can tell: its version and what it registered."""
    components = {k: sorted(v) for k, v in sorted(info.components.items()) if v}
    return [info.distribution, info.version, components]


def _remembered() -> dict[str, Any]:
    """The registrations the last ``ksi install``/``uninstall`` saw ({} when none or unreadable).

    An editable plugin's code is live: by the time ``ksi install -e`` runs again
    after an edit, the edit is already loaded, so "before" must come from
    what KSI saw last, not from this process.
    """
    path = cache_file(SEEN_CACHE)
    try:
        data = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember(plugins: dict[str, PluginInfo]) -> None:
    path = cache_file(SEEN_CACHE)
    if path is None:
        return
    with contextlib.suppress(OSError):  # a cache that cannot be written is only a cache
        write_json_atomic(
            path, {name: _registered(info) for name, info in plugins.items()}, durable=False
        )


def _report(before: dict[str, PluginInfo], after: dict[str, PluginInfo]) -> None:
    added = [info for name, info in after.items() if name not in before]
    removed = [info for name, info in before.items() if name not in after]
    # A reinstall (`install -e` after an edit, `-U`) may change what a plugin registers.
    seen = _remembered()
    changed = [
        info
        for name, info in after.items()
        if name in before and seen.get(name, _registered(before[name])) != _registered(info)
    ]
    _remember(after)
    if added:
        typer.echo("New plugins:")
        for info in added:
            typer.echo(printable(_describe(info)))
    if changed:
        typer.echo("Changed plugins (now):")
        for info in changed:
            typer.echo(printable(_describe(info)))
    if removed:
        typer.echo("Removed plugins:")
        for info in removed:
            typer.echo(printable(f"  {info.name} ({info.distribution} {info.version})"))
    if not added and not removed and not changed:
        typer.echo(
            "No plugin was added, changed or removed (`ksi plugins` lists what is installed)."
        )
    for err in get_plugins().errors:
        typer.echo(f"warning: {printable(str(err), multiline=True)}", err=True)


def _distribution_of(name: str, installed: dict[str, PluginInfo]) -> str:
    """The distribution to remove for ``name``: a distribution, or a plugin's short name.

    ``ksi plugins`` shows plugins by the short name their entry point gives
    (``harbor``); pip knows only distributions (``ksi-harbor``). A name that is
    neither is refused, rather than pip skipping it and KSI exiting 0.
    """
    key = normalize(name)
    for info in installed.values():
        if normalize(info.distribution) == key:
            return name
    for info in installed.values():
        if normalize(info.name) == key:
            typer.echo(
                printable(
                    f"{name}: a plugin of the distribution {info.distribution}; removing that"
                ),
                err=True,
            )
            return info.distribution
    known = ", ".join(sorted(f"{i.name} ({i.distribution})" for i in installed.values()))
    raise UserInputError(
        f"{name!r} is not an installed plugin or the distribution of one"
        + (f"; installed: {known}" if known else "; no plugin is installed")
        + " (`ksi plugins` lists them)"
    )


def register(app: typer.Typer) -> None:
    """Add ``ksi install`` and ``ksi uninstall`` to ``app``."""

    @app.command("install")
    def install(
        packages: Annotated[
            list[str] | None,
            typer.Argument(
                metavar="PACKAGE...",
                help="Packages to install, as pip takes them (name, name==1.2, URL).",
            ),
        ] = None,
        editable: Annotated[
            list[Path] | None,
            typer.Option(
                "-e",
                "--editable",
                metavar="PATH",
                help="Install a local plugin checkout in editable mode (repeatable).",
            ),
        ] = None,
        upgrade: Annotated[
            bool, typer.Option("-U", "--upgrade", help="Upgrade packages already installed.")
        ] = False,
        verbose: Annotated[
            bool, typer.Option("-v", "--verbose", help="Show the installer's own output.")
        ] = False,
    ) -> None:
        """Install plugins into KSI's own Python environment, then show what they add."""
        packages = list(packages or [])
        editable = list(editable or [])
        if not packages and not editable:
            raise UserInputError("name at least one PACKAGE, or -e PATH for a local plugin")
        for path in editable:
            if not path.exists():
                raise UserInputError(f"-e {path}: no such directory")
        before = _snapshot()
        argv = installer_argv("install")
        if upgrade:
            argv.append("--upgrade")
        for path in editable:
            argv += ["-e", str(path.resolve())]
        _run([*argv, *packages], verbose=_verbose(verbose))
        _report(before, _snapshot())

    @app.command("uninstall")
    def uninstall(
        packages: Annotated[
            list[str],
            typer.Argument(
                metavar="PACKAGE...",
                help="Distributions to remove, or plugins by the name `ksi plugins` shows.",
            ),
        ],
        verbose: Annotated[
            bool, typer.Option("-v", "--verbose", help="Show the installer's own output.")
        ] = False,
    ) -> None:
        """Remove plugins from KSI's own Python environment."""
        protected = {p for p in packages if p.strip().lower() == "ksi"}
        if protected:
            raise UserInputError("refusing to uninstall KSI itself with `ksi uninstall`")
        before = _snapshot()
        distributions = [_distribution_of(name, before) for name in packages]
        _run([*installer_argv("uninstall"), *distributions], verbose=_verbose(verbose))
        _report(before, _snapshot())
