"""The run settings of docs/running.md's "Where results go" table.

Where results go besides the run directory. One field per setting, its
:class:`~ksi.rundir.run_option.RunOption` in its metadata;
:class:`~ksi.rundir.config.RunConfig` is composed of these groups.
"""

from __future__ import annotations

import attrs

from ksi.rundir.run_option import FREE, OPTION, RESULTS, Form, RunOption


@attrs.define(slots=False, kw_only=True)
class ResultOptions:
    """The Where results go settings of a run (a part of :class:`~ksi.rundir.config.RunConfig`)."""

    output_json: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--output-json",),
                "Write the JSON report here.",
                RESULTS,
                FREE,
                Form.PATH,
                metavar="PATH",
                doc="Keep a JSON report at PATH, refreshed as the run goes (see [The JSON "
                "report](#the-json-report)).",
            )
        },
    )
