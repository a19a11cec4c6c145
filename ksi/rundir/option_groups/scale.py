"""The run settings of docs/running.md's "Scale and limits" table.

Where attempts are scheduled, how many, and the limits of a run. One field per setting,
its :class:`~ksi.rundir.run_option.RunOption` in its metadata;
:class:`~ksi.rundir.config.RunConfig` is composed of these groups.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from ksi.limits import MAX_ATTEMPTS
from ksi.rundir.run_option import FREE, GROW, KV, OPTION, SCALE, Form, RunOption


def default_concurrency() -> int:
    """Attempts are mostly waiting on agents, but grading and capture use the CPU."""
    return max(1, min(8, (os.cpu_count() or 1)))


@attrs.define(slots=False, kw_only=True)
class ScaleOptions:
    """The Scale and limits settings of a run (a part of :class:`~ksi.rundir.config.RunConfig`)."""

    executor: str = attrs.field(
        default="local",
        metadata={
            OPTION: RunOption(
                ("--executor",),
                "Where attempts are scheduled.",
                SCALE,
                FREE,
                metavar="NAME",
                envvar="KSI_EXECUTOR",
                complete="executor",
                doc="Where attempts are scheduled: `local` (the default), threads in this "
                "process; `processes`, worker processes on this machine (see [Threads or "
                "worker processes](#threads-or-worker-processes)); `ray`, from the `ksi-ray` "
                "plugin, the nodes of a Ray cluster (see [scale.md](scale.md)).",
            )
        },
    )
    #: Free on a resume: the run may go on on another cluster.
    executor_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--executor-option",),
                "An executor option (repeatable).",
                SCALE,
                FREE,
                Form.KEY_VALUES,
                metavar=KV,
                doc="An option of the executor (repeatable), e.g. `address=auto` for `ray`.",
            )
        },
    )
    attempts: int = attrs.field(
        default=1,
        metadata={
            OPTION: RunOption(
                ("--attempts",),
                "Independent attempts per task, at most 10000 (raise it on an existing run to "
                "add more).",
                SCALE,
                GROW,
                metavar="K",
                envvar="KSI_ATTEMPTS",
                minimum=1,
                maximum=MAX_ATTEMPTS,
                doc="Independent attempts per task (default 1, at most 10000); K > 1 gives "
                "pass@k. Raise it on an existing run to add more.",
            )
        },
    )
    concurrency: int = attrs.field(
        factory=default_concurrency,
        metadata={
            OPTION: RunOption(
                ("--concurrency",),
                "Attempts at once (default: CPUs, max 8).",
                SCALE,
                FREE,
                metavar="N",
                envvar="KSI_CONCURRENCY",
                minimum=1,
                doc="Attempts running at once (default: the number of CPUs, at most 8).",
            )
        },
    )
    retries: int = attrs.field(
        default=0,
        metadata={
            OPTION: RunOption(
                ("--retries",),
                "Retry attempts that ended unscored or in error.",
                SCALE,
                FREE,
                metavar="N",
                minimum=0,
                doc="Re-run an attempt that ended `unscored` or in error, up to N more times "
                "(see [Retries](#retries)).",
            )
        },
    )
    max_cost_usd: float | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--max-cost",),
                "Stop launching attempts once spend reaches USD.",
                SCALE,
                FREE,
                metavar="USD",
                doc="Stop launching attempts once the spend agents report reaches USD (see "
                "[Spending limit](#spending-limit)).",
            )
        },
    )
    #: The agent's set-up failing stops the launching of new attempts (running ones
    #: finish): see :mod:`ksi.runs.stops`.
    fail_fast_auth: bool = attrs.field(
        default=True,
        metadata={
            OPTION: RunOption(
                ("--fail-fast/--no-fail-fast",),
                "Stop launching attempts when the agent's set-up fails: an auth_error, a "
                "tools_refused, 3 connection_errors in a row before any attempt got through "
                "(running ones finish); the run exits 3 either way.",
                SCALE,
                FREE,
                doc="On by default: the agent's set-up failing stops the launching of new "
                "attempts (running ones finish): the first attempt whose agent ends in "
                "`auth_error` (a missing, wrong or expired key) or `tools_refused` (its own "
                "sandbox or permission layer refused every tool call), or 3 attempts in a row "
                "ending in the same `connection_error` (refused, not resolved, TLS) before any "
                "attempt of the session got through. Either way, such a run prints its "
                "summary, then says which agent failed, what (the variables to check, the "
                "endpoint, the fix), the CLI's own words and what was not started, and exits "
                "**3** (for connection errors: when no attempt got through); a resume runs "
                "those attempts again. Turn it off when keys are rotated mid-run.",
            )
        },
    )
    log_cap_bytes: int = attrs.field(
        default=20 * 1024 * 1024,
        metadata={
            OPTION: RunOption((), "The most bytes of each agent log kept per attempt.", "", FREE)
        },
    )
    capture_max_file_bytes: int = attrs.field(
        default=10 * 1024 * 1024,
        metadata={
            OPTION: RunOption((), "Capture skips (and lists) files larger than this.", "", FREE)
        },
    )
