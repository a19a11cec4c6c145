"""The agent CLI versions KSI's end-to-end tests ran against: one table for all of them.

``ksi doctor`` compares the version a CLI prints for ``--version`` with this
table and says whether KSI was tested with it; ``.ci/install-agent-clis.sh``
installs exactly these versions for the real-CLI tests (it runs this file as a
script, which prints the table as tab-separated lines, so the module must stay
standard-library only and import nothing from ``ksi``).

Raise a version here only together with a green run of the real-CLI tests
(``tests/test_real_agent_clis*.py``) against it.
"""

from __future__ import annotations

import re
import sys
from typing import NamedTuple


class TestedCli(NamedTuple):
    """One agent CLI as the tests install it."""

    #: The KSI agent name (``--agent``).
    agent: str
    #: ``npm`` or ``pypi``.
    registry: str
    #: The package in that registry.
    package: str
    #: The exact version the tests ran against.
    version: str
    #: The executable the package installs (the agent's ``binary``).
    binary: str


TESTED_CLIS: tuple[TestedCli, ...] = (
    TestedCli("claude-code", "npm", "@anthropic-ai/claude-code", "2.1.332", "claude"),
    TestedCli("gemini-cli", "npm", "@google/gemini-cli", "0.61.0", "gemini"),
    TestedCli("codex", "npm", "@openai/codex", "0.171.0", "codex"),
    TestedCli("opencode", "npm", "opencode-ai", "1.18.33", "opencode"),
    TestedCli("mini-swe-agent", "pypi", "mini-swe-agent", "2.4.6", "mini"),
    TestedCli("aider", "pypi", "aider-chat", "0.86.2", "aider"),
    # An ACP agent the ``acp`` agent is tested with (Gemini CLI's ``--acp`` mode, above, is
    # the other): the Claude Agent SDK (Claude Code) behind Zed's ACP adapter.
    TestedCli("acp", "npm", "@zed-industries/claude-agent-acp", "0.23.1", "claude-agent-acp"),
)

_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-.+][0-9A-Za-z.-]+)?")


def tested_cli(agent: str) -> TestedCli | None:
    """The table's entry for ``agent`` (``None`` for agents KSI does not pin)."""
    return next((t for t in TESTED_CLIS if t.agent == agent), None)


def install_command(entry: TestedCli) -> str:
    """The command that installs exactly the tested version."""
    if entry.registry == "npm":
        return f"npm install -g {entry.package}@{entry.version}"
    return f"python -m pip install {entry.package}=={entry.version}"


def version_in(text: str | None) -> str | None:
    """The first ``X.Y.Z`` version in a CLI's ``--version`` output (``codex-cli 0.171.0``)."""
    if not text:
        return None
    found = _VERSION.search(text)
    return found.group(0) if found else None


def main() -> None:
    """Print ``registry package version binary agent``, one CLI a line (for shell scripts)."""
    for t in TESTED_CLIS:
        sys.stdout.write(f"{t.registry}\t{t.package}\t{t.version}\t{t.binary}\t{t.agent}\n")


if __name__ == "__main__":
    main()
