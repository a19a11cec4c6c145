"""``ksi agents`` (what agents exist and whether each can run here) and ``ksi doctor``.

Both answer "why would my run fail before it starts?": a CLI that is not
installed, a credential that is not set, a Docker daemon that is not
running. Every failed check prints the command that fixes it; ``doctor``
exits 1 when something the chosen run needs is missing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import attrs
import typer

from ksi.agents.cli_base import binary_version
from ksi.cli.common import echo_json, handle_errors
from ksi.errors import KsiError
from ksi.options import create_component
from ksi.plugins import get_plugins, registry
from ksi.registry import Registration
from ksi.text import printable

MIN_PYTHON = (3, 11)


def register(app: typer.Typer) -> None:
    """Add ``ksi agents`` and ``ksi doctor`` to ``app``."""
    app.command("agents")(agents)
    app.command("doctor")(doctor)


# -- facts about one agent ---------------------------------------------------
def agent_facts(reg: Registration, env: Mapping[str, str]) -> dict[str, Any]:
    """Everything ``ksi agents`` shows about one registered agent (JSON-ready)."""
    cls = reg.obj
    binary = getattr(cls, "binary", None)
    facts: dict[str, Any] = {
        "name": reg.name,
        "aliases": list(reg.aliases),
        "plugin": reg.plugin,
        "description": reg.description,
        "binary": binary,
        "path": None,
        "version": None,
        "installed": None,
        "install_command": getattr(cls, "install_command", None),
        "docs_url": getattr(cls, "docs_url", None),
        "required_env": list(getattr(cls, "required_env", ()) or ()),
        "optional_env": list(getattr(cls, "optional_env", ()) or ()),
    }
    if binary:
        path, version = binary_version(binary)
        facts.update(path=path, version=version, installed=path is not None)
    check = getattr(cls, "check_credentials", None)
    if callable(check):
        result = check(env)
        facts["credentials"] = {
            "any_of": list(getattr(cls, "credential_env", ())),
            "set": list(result.found),
            "login_file": result.login_file,
            "ok": result.ok,
            "fix": result.hint or None,
        }
    else:
        missing = [n for n in facts["required_env"] if not env.get(n)]
        facts["credentials"] = {
            "any_of": [],
            "set": [n for n in facts["required_env"] if env.get(n)],
            "login_file": None,
            "ok": not missing,
            "fix": ("set " + " and ".join(missing)) if missing else None,
        }
    return facts


def _all_agent_facts(env: Mapping[str, str]) -> list[dict[str, Any]]:
    regs = list(registry("agent"))
    # Probing versions starts processes; do it in parallel so the listing stays quick.
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(regs)))) as pool:
        return list(pool.map(lambda r: agent_facts(r, env), regs))


def _describe(facts: dict[str, Any]) -> list[str]:
    lines = [f"{facts['name']}  [{facts['plugin']}]  {facts['description']}"]
    if facts["binary"]:
        if facts["installed"]:
            lines.append(
                f"    binary: {facts['path']}"
                + (f" ({facts['version']})" if facts["version"] else "")
            )
        else:
            lines.append(
                f"    binary: {facts['binary']} NOT on PATH; install: {facts['install_command']}"
            )
    cred = facts["credentials"]
    if cred["any_of"] or facts["required_env"]:
        if cred["ok"]:
            how = ", ".join(cred["set"]) or f"login file {cred['login_file']}"
            lines.append(f"    credentials: ok ({how})")
        else:
            lines.append(f"    credentials: MISSING; {cred['fix']}")
    return lines


@handle_errors
def agents(
    json_: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List every agent: its plugin, binary and version, credentials, install command."""
    facts = _all_agent_facts(os.environ)
    if json_:
        echo_json({"agents": facts})
        return
    for item in facts:
        for line in _describe(item):  # descriptions and versions come from plugins and binaries
            typer.echo(printable(line))


# -- doctor --------------------------------------------------------------------
@attrs.frozen
class Check:
    """One line of the doctor's checklist."""

    name: str
    #: ``ok``, ``warn`` (worth knowing, not blocking) or ``fail`` (blocking).
    status: str
    detail: str
    fix: str = ""


def _python_check() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] >= MIN_PYTHON:
        return Check("python", "ok", f"Python {version} ({sys.executable})")
    need = ".".join(map(str, MIN_PYTHON))
    return Check(
        "python",
        "fail",
        f"Python {version} is too old",
        f"install Python >= {need} and reinstall ksi",
    )


def _plugin_checks() -> list[Check]:
    state = get_plugins()
    state.build_all()
    if not state.errors:
        return [Check("plugins", "ok", f"{len(state.infos)} plugins loaded without errors")]
    return [
        Check(
            f"plugin {e.plugin}",
            "warn",
            str(e),
            f"python -m pip install -U {e.distribution}  (or KSI_DISABLE_PLUGINS={e.plugin})",
        )
        for e in state.errors
    ]


def _agent_checks(facts: dict[str, Any], *, blocking: bool) -> list[Check]:
    bad = "fail" if blocking else "warn"
    name = facts["name"]
    checks = []
    if facts["binary"]:
        if facts["installed"]:
            version = f" {facts['version']}" if facts["version"] else ""
            checks.append(Check(f"{name} binary", "ok", f"{facts['path']}{version}"))
        else:
            checks.append(
                Check(
                    f"{name} binary",
                    bad,
                    f"`{facts['binary']}` is not on PATH",
                    facts["install_command"] or "",
                )
            )
    cred = facts["credentials"]
    if cred["any_of"] or facts["required_env"]:
        if cred["ok"]:
            how = ", ".join(cred["set"]) or f"login file {cred['login_file']}"
            checks.append(Check(f"{name} credentials", "ok", how))
        else:
            checks.append(
                Check(f"{name} credentials", bad, "no credentials set", cred["fix"] or "")
            )
    return checks


def _environment_checks(name: str) -> list[Check]:
    """The environment's own readiness check: ``prepare`` with no tasks, default options.

    The same code a run calls before its first attempt (docker: the CLI is
    on PATH and the engine answers; sandbox: bubblewrap can create its
    namespaces), so the doctor never disagrees with ``ksi run``, and a
    third-party environment is checked the same way.
    """
    reg = registry("environment").get(name)
    checks = [Check(f"environment {reg.name}", "ok", f"provided by {reg.plugin}")]
    try:
        env = create_component(reg.obj, {}, kind="environment", option_flag="--environment")
    except KsiError as exc:
        return [*checks, Check(f"{reg.name} ready", "warn", f"not checked: {exc}")]
    try:
        env.prepare([])
    except KsiError as exc:
        return [*checks, Check(f"{reg.name} ready", "fail", str(exc))]
    return [*checks, Check(f"{reg.name} ready", "ok", "its start-up check passed")]


def run_checks(agent: str | None, environment: str | None) -> list[Check]:
    """The checklist for a run with this agent and environment (all agents when none)."""
    checks = [_python_check(), *_plugin_checks()]
    if agent is not None:
        reg = registry("agent").get(agent)
        checks += _agent_checks(agent_facts(reg, os.environ), blocking=True)
    else:
        for facts in _all_agent_facts(os.environ):
            checks += _agent_checks(facts, blocking=False)
    if environment is not None:
        checks += _environment_checks(environment)
    return checks


_MARK = {"ok": "[ok]  ", "warn": "[warn]", "fail": "[FAIL]"}


@handle_errors
def doctor(
    agent: Annotated[
        str | None, typer.Option("--agent", help="Check what this agent needs (blocking).")
    ] = None,
    environment: Annotated[
        str | None,
        typer.Option("--environment", help="Check what this environment needs (blocking)."),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check Python, plugins, agent binaries and credentials, Docker/bubblewrap.

    Without --agent every agent is checked but nothing about agents is
    blocking; exit code 1 when a blocking check fails.
    """
    checks = run_checks(agent, environment)
    failed = any(c.status == "fail" for c in checks)
    if json_:
        echo_json({"ok": not failed, "checks": [attrs.asdict(c) for c in checks]})
    else:
        for c in checks:
            line = f"{_MARK[c.status]} {c.name}: {c.detail}"
            if c.fix and c.status != "ok":
                line += f"\n         fix: {c.fix}"
            typer.echo(printable(line, multiline=True))  # details quote binaries' output
        typer.echo("Something blocking is missing." if failed else "Ready.")
    if failed:
        raise typer.Exit(1)
