"""The run settings of docs/running.md's "Agent" table.

The agent, its options and model, and what it may use. One field per setting, its
:class:`~ksi.rundir.run_option.RunOption` in its metadata;
:class:`~ksi.rundir.config.RunConfig` is composed of these groups.
"""

from __future__ import annotations

from typing import Any

import attrs

from ksi.limits import MAX_TIMEOUT_SEC
from ksi.rundir.run_option import AGENT, FREE, KV, MATCH, OPTION, Form, RunOption


@attrs.define(slots=False, kw_only=True)
class AgentOptions:
    """The Agent settings of a run (a part of :class:`~ksi.rundir.config.RunConfig`)."""

    agent: str = attrs.field(
        metadata={
            OPTION: RunOption(
                ("--agent",),
                "Agent name (ksi agents lists them).",
                AGENT,
                MATCH,
                metavar="NAME",
                envvar="KSI_AGENT",
                complete="agent",
                doc="The agent (required; `ksi agents` lists them).",
            )
        }
    )
    agent_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--agent-option",),
                "An agent option (repeatable).",
                AGENT,
                MATCH,
                Form.KEY_VALUES,
                metavar=KV,
                doc="Repeatable; e.g. `--agent-option cmd='./solve.sh'` for `command`.",
            )
        },
    )
    model: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--model",),
                "Model for agents that take one.",
                AGENT,
                MATCH,
                metavar="NAME",
                envvar="KSI_MODEL",
                doc="Passed to agents that take a model (and to `command` as `$KSI_MODEL`).",
            )
        },
    )
    timeout_sec: float | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--timeout",),
                "Agent wall clock per attempt, seconds (at most 7 days).",
                AGENT,
                FREE,
                metavar="SECONDS",
                envvar="KSI_TIMEOUT",
                minimum=0.001,
                maximum=MAX_TIMEOUT_SEC,
                doc="The agent's wall clock per attempt, at most 604800 (7 days). Default: "
                "the task's own limit if its source gives one, else 1800. On timeout every "
                "process the attempt started is killed, and the attempt is still captured and "
                "graded (`agent_timed_out: true`).",
            )
        },
    )
    agent_env: list[str] = attrs.field(
        factory=list,
        metadata={
            OPTION: RunOption(
                ("--agent-env",),
                "Host environment variable to pass to the agent (repeatable).",
                AGENT,
                FREE,
                Form.NAMES,
                metavar="NAME",
                doc="Repeatable: pass this host variable to the agent. Agent processes get "
                "only a small allow-list of host variables (`PATH`, `HOME`, locale, proxy, CA "
                "bundles...), the ones the agent declares, and these.",
            )
        },
    )
