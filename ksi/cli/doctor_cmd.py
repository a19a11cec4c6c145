"""``ksi doctor``: is this machine ready for a run with this agent and environment?

Python, plugins that failed to load, the agent's binary and credentials (the
facts ``ksi agents`` shows), and the environment's own start-up check. Every
failed check prints what fixes it; exit code 1 when something the chosen run
needs is missing.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import attrs
import typer

from ksi.cli.agents_cmd import agent_facts, all_agent_facts
from ksi.cli.common import complete_names, echo_json
from ksi.errors import KsiError
from ksi.options import create_component
from ksi.plugins import get_plugins, registry
from ksi.text import printable

MIN_PYTHON = (3, 11)


def register(app: typer.Typer) -> None:
    """Add ``ksi doctor`` to ``app``."""
    app.command("doctor")(doctor)


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


def _version_check(facts: dict[str, Any]) -> Check:
    """The binary found, the version it printed, and whether KSI was tested with it."""
    name, tested = facts["name"], facts.get("tested_version")
    found = f"{facts['path']} ({facts['version'] or 'version unknown'})"
    if tested is None:
        return Check(f"{name} binary", "ok", found)
    if facts.get("version_tested"):
        return Check(f"{name} binary", "ok", f"{found}; the version KSI was tested with")
    return Check(
        f"{name} binary",
        "warn",
        f"{found}; KSI was tested with {tested}, and the CLI's flags and output change "
        "between versions",
        str(facts.get("tested_install_command") or ""),
    )


def _agent_checks(facts: dict[str, Any], *, blocking: bool) -> list[Check]:
    bad = "fail" if blocking else "warn"
    name = facts["name"]
    checks = []
    if facts["binary"]:
        if facts["installed"]:
            checks.append(_version_check(facts))
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
        for facts in all_agent_facts(os.environ):
            checks += _agent_checks(facts, blocking=False)
    if environment is not None:
        checks += _environment_checks(environment)
    return checks


_MARK = {"ok": "[ok]  ", "warn": "[warn]", "fail": "[FAIL]"}


def doctor(
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            autocompletion=complete_names("agent"),
            help="Check what this agent needs (blocking).",
        ),
    ] = None,
    environment: Annotated[
        str | None,
        typer.Option(
            "--environment",
            autocompletion=complete_names("environment"),
            help="Check what this environment needs (blocking).",
        ),
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
