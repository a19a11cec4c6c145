"""The run settings of docs/running.md's "Environment" table.

Where the agents run. One field per setting, its
:class:`~ksi.rundir.run_option.RunOption` in its metadata;
:class:`~ksi.rundir.config.RunConfig` is composed of these groups.
"""

from __future__ import annotations

from typing import Any

import attrs

from ksi.rundir.run_option import ENVIRONMENT, KV, MATCH, OPTION, Form, RunOption


@attrs.define(slots=False, kw_only=True)
class EnvironmentOptions:
    """The Environment settings of a run (a part of :class:`~ksi.rundir.config.RunConfig`)."""

    environment: str = attrs.field(
        default="local",
        metadata={
            OPTION: RunOption(
                ("--environment",),
                "Where the agents run: local, sandbox, docker, ...",
                ENVIRONMENT,
                MATCH,
                metavar="NAME",
                envvar="KSI_ENVIRONMENT",
                complete="environment",
                doc="`local` (a child process on this machine, in its own session), "
                "`sandbox`, `docker`, or one a plugin adds. `ksi doctor --environment NAME` "
                "checks what it needs.",
            )
        },
    )
    environment_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--environment-option",),
                "An environment option (repeatable).",
                ENVIRONMENT,
                MATCH,
                Form.KEY_VALUES,
                metavar=KV,
            )
        },
    )
