"""The run settings of docs/running.md's "Grading" table.

How attempts are graded. One field per setting, its
:class:`~ksi.rundir.run_option.RunOption` in its metadata;
:class:`~ksi.rundir.config.RunConfig` is composed of these groups.
"""

from __future__ import annotations

from typing import Any

import attrs

from ksi.choices import EvalIn, EvalIsolation
from ksi.rundir.run_option import FREE, GRADING, KV, MATCH, OPTION, Form, RunOption


@attrs.define(slots=False, kw_only=True)
class GradingOptions:
    """The Grading settings of a run (a part of :class:`~ksi.rundir.config.RunConfig`)."""

    evaluator: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--evaluator",),
                "Evaluator (default: the task source's).",
                GRADING,
                MATCH,
                metavar="NAME",
                envvar="KSI_EVALUATOR",
                complete="evaluator",
                doc="The grader (default: the task source's, `command` for `custom`; "
                "[evaluators.md](evaluators.md)).",
            )
        },
    )
    evaluator_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--evaluator-option",),
                "An evaluator option (repeatable).",
                GRADING,
                MATCH,
                Form.KEY_VALUES,
                metavar=KV,
            )
        },
    )
    eval_in: EvalIn = attrs.field(
        default=EvalIn.HOST,
        metadata={
            OPTION: RunOption(
                ("--eval-in",),
                "host (grade a copy on the host) or environment.",
                GRADING,
                MATCH,
                choices=tuple(EvalIn),
                doc="`host` (default): evaluators grade where they declare (`command` grades "
                "a copy of the captured repo on the host, as the spec says). `environment`: a "
                "host evaluator grades a copy of the captured repo inside a *fresh* "
                "environment of the run (with `docker`, a new container of the task's image), "
                "for tests that need the image's toolchain.",
            )
        },
    )
    wipe_workspace: bool = attrs.field(
        default=True,
        metadata={
            OPTION: RunOption(
                ("--wipe-workspace-per-task",),
                "true: grade a captured copy and remove the workspace; false: grade the live one.",
                GRADING,
                MATCH,
                Form.TRUE_FALSE,
                metavar="true|false",
                doc="`true` (default): grade a copy of the captured repo, then delete the live "
                "workspace. `false`: grade the live `workspace/repo` and keep it; this bypasses "
                "capture's anti-tamper rules ([capture.md](capture.md#--wipe-workspace-per-task"
                "-false-live-grading)). Also accepts yes/no, on/off, 1/0.",
            )
        },
    )
    solved_threshold: float = attrs.field(
        default=1.0,
        metadata={
            OPTION: RunOption(
                ("--solved-threshold",),
                "Score that counts as solved.",
                GRADING,
                FREE,
                metavar="X",
                doc="A score of at least X counts as solved (default 1.0).",
            )
        },
    )
    eval_env: list[str] = attrs.field(
        factory=list,
        metadata={
            OPTION: RunOption(
                ("--eval-env",),
                "Host environment variable to pass to the eval command (repeatable); it gets "
                "no credentials otherwise.",
                GRADING,
                FREE,
                Form.NAMES,
                metavar="NAME",
                doc="Repeatable. A host variable the eval command gets besides the scrubbed "
                "environment (it gets no API keys or tokens otherwise); must be set. Recorded "
                "in `run.json`. See [evaluators](evaluators.md#the-commands-environment).",
            )
        },
    )
    eval_isolation: EvalIsolation = attrs.field(
        default=EvalIsolation.AUTO,
        metadata={
            OPTION: RunOption(
                ("--eval-isolation",),
                "Host grading in a bubblewrap sandbox: auto (when the agent ran isolated), "
                "sandbox, or none (UNSAFE: the agent's code runs with your files and network).",
                GRADING,
                FREE,
                choices=tuple(EvalIsolation),
                doc="Where a host grade runs the agent's code: `sandbox`, a bubblewrap sandbox "
                "(host read-only, only the graded copy writable, no network, no home); `none`, "
                "a plain host process (**unsafe** after an isolated agent); `auto` (default): "
                "`sandbox` when the agent ran in `sandbox` or `docker`, `none` with `local`. A "
                "run that needs bubblewrap and has none stops before it starts. See "
                "[security](security.md).",
            )
        },
    )
    protect: list[str] = attrs.field(
        factory=list,
        metadata={
            OPTION: RunOption(
                ("--protect",),
                "Files under repo/ capture treats as tests, besides test_*, tests/... "
                "(repeatable; e.g. run_tests.sh, 'golden/*').",
                GRADING,
                MATCH,
                Form.NAMES,
                metavar="GLOB",
                doc="Repeatable. Files under `repo/` that capture treats as the task's tests, "
                "besides the conventions (`tests/`, `test_*`, `*_test.*`, `conftest.py`...): "
                "the seed's copy is restored if the agent changed it, a new one is dropped "
                "([capture.md](capture.md#protecting-more-files---protect-and-evalspecprotect)"
                "). E.g. `--protect run_tests.sh --protect 'golden/*'`.",
            )
        },
    )
