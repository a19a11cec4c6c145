"""No network call nobody asked for: the real CLIs connect to the model endpoint and nowhere else.

litellm (inside mini-SWE-agent and Aider) downloads its model price list from
GitHub when it is imported, and OpenCode its model catalog from
models.opencode.ai; KSI's defaults switch both off (see each agent's
``process_env``). Each CLI here runs under ``strace -f -e trace=connect``
(a wrapper named like the CLI, first on ``PATH``), solving the one-file task
against the mock through ``ksi run`` in a loopback-only network namespace; every
internet socket it (or anything it starts) connects must go to the mock's port.
A DNS query would show as a connect to port 53 of the host's resolver.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import test_real_cli_aider as aider
import test_real_cli_mini_swe_agent as mini
import test_real_cli_opencode as opencode
from mockmodel import Step
from real_agents import cli_bin_dir, free_port, ksi_run_with_mock

from ksi.agents import tested_versions

pytestmark = pytest.mark.real_cli

#: ``connect(3, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.1")}, 16)``
_INET = re.compile(
    r"connect\(\d+, \{sa_family=AF_INET6?, sin6?_port=htons\((\d+)\), "
    r"(?:sin_addr=inet_addr\(\"([^\"]+)\"\)|sin6_flowinfo=[^,]*, inet_pton\(AF_INET6, \"([^\"]+)\")"
)
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def strace_or_skip() -> str:
    found = shutil.which("strace")
    if found:
        return found
    reason = "strace is not installed (CI installs it: .ci/setup-agent-test-host.sh)"
    if os.environ.get("KSI_REQUIRE_AGENT_CLIS") == "1":
        pytest.fail(reason + " (KSI_REQUIRE_AGENT_CLIS=1)")
    pytest.skip(reason)


def traced_path(tmp_path: Path, agent: str, log: Path) -> str:
    """A ``PATH`` whose first entry runs ``agent``'s real CLI under strace, logging to ``log``."""
    strace = strace_or_skip()
    bin_dir = cli_bin_dir(agent)
    entry = tested_versions.tested_cli(agent)
    assert entry is not None
    wrappers = tmp_path / "traced-bin"
    wrappers.mkdir()
    wrapper = wrappers / entry.binary
    wrapper.write_text(
        f'#!/bin/sh\nexec {strace} -f -qq -e trace=connect -o {log} {bin_dir / entry.binary} "$@"\n'
    )
    wrapper.chmod(0o755)
    return f"{wrappers}:{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def opencode_home(tmp_path: Path) -> Path:
    """A HOME where OpenCode's plugin package counts as installed, as after its first run.

    OpenCode installs ``@opencode-ai/plugin`` (npm, in the background) into each
    config directory that lacks it, with no switch to stop it; a HOME it ran in
    once has it. This one says so without the download, so the trace shows only
    what KSI's defaults control.
    """
    home = tmp_path / "home"
    config = home / ".config" / "opencode"
    (config / "node_modules").mkdir(parents=True)
    lock = {"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}
    (config / "package-lock.json").write_text(json.dumps(lock))
    return home


def inet_connects(log: Path) -> list[tuple[str, int]]:
    """Every (address, port) an internet socket of the traced processes connected to."""
    found = []
    for line in log.read_text().splitlines():
        m = _INET.search(line)
        if m:
            found.append((m.group(2) or m.group(3), int(m.group(1))))
    return found


@pytest.mark.parametrize(
    ("agent", "env", "model", "script"),
    [
        pytest.param(
            "mini-swe-agent",
            {**mini.KEY},
            mini.MODEL,
            mini.SOLVE,
            id="mini-swe-agent",
        ),
        pytest.param("opencode", opencode.KEY, opencode.MODEL, opencode.SOLVE, id="opencode"),
        pytest.param("aider", aider.KEY, aider.MODEL, aider.SOLVE, id="aider"),
    ],
)
def test_the_cli_connects_only_to_the_model_endpoint(
    tmp_path: Path, agent: str, env: dict[str, str], model: str, script: tuple[Step, ...]
) -> None:
    log = tmp_path / "connect.strace"
    port = free_port()
    options = {
        "mini-swe-agent": ["cost_tracking=ignore_errors"],
        "aider": [aider._metadata(tmp_path)],
    }.get(agent, [])
    # A fresh HOME, as on a machine where the CLI never ran (no caches to hide a download).
    home = opencode_home(tmp_path) if agent == "opencode" else tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**env, "PATH": traced_path(tmp_path, agent, log), "HOME": str(home)}
    run = ksi_run_with_mock(
        tmp_path,
        agent=agent,
        script=script,
        env=env,
        model=model,
        agent_options=options,
        port=port,
    )
    rec = run.record
    assert (rec["status"], rec["score"]) == ("scored", 1.0), run.describe()
    connects = inet_connects(log)
    assert ("127.0.0.1", port) in connects, f"the trace missed the model calls: {connects}"
    elsewhere = sorted({c for c in connects if c[0] not in LOOPBACK or c[1] != port})
    assert elsewhere == [], f"{agent} connected beyond the model endpoint: {elsewhere}"
