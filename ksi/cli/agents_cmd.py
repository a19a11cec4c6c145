"""``ksi agents``: what agents exist and whether each can run here.

With ``ksi doctor`` (:mod:`ksi.cli.doctor_cmd`, which reuses these facts) it
answers "why would my run fail before it starts?": a CLI that is not
installed, a credential that is not set. Every missing piece comes with the
command that fixes it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import typer

from ksi.agents.cli_base import binary_version
from ksi.agents.tested_versions import install_command, tested_cli, version_in
from ksi.cli.common import echo_json
from ksi.kinds import AGENT
from ksi.plugins import registry
from ksi.registry import Registration
from ksi.text import printable


def register(app: typer.Typer) -> None:
    """Add ``ksi agents`` to ``app``."""
    app.command("agents")(agents)


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
        path, version = binary_version(binary, args=getattr(cls, "version_args", ("--version",)))
        facts.update(path=path, version=version, installed=path is not None)
    tested = tested_cli(reg.name)
    facts["tested_version"] = tested.version if tested else None
    facts["tested_install_command"] = install_command(tested) if tested else None
    found = version_in(facts["version"])
    facts["version_tested"] = None if tested is None or found is None else found == tested.version
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


def all_agent_facts(env: Mapping[str, str]) -> list[dict[str, Any]]:
    regs = list(registry(AGENT))
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


def agents(
    json_: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List every agent: its plugin, binary and version, credentials, install command."""
    facts = all_agent_facts(os.environ)
    if json_:
        echo_json({"agents": facts})
        return
    for item in facts:
        for line in _describe(item):  # descriptions and versions come from plugins and binaries
            typer.echo(printable(line))
