"""The run settings of docs/running.md's "Tasks" table.

Which tasks a run reads and works on. One field per setting, its
:class:`~ksi.rundir.run_option.RunOption` in its metadata;
:class:`~ksi.rundir.config.RunConfig` is composed of these groups.
"""

from __future__ import annotations

from typing import Any

import attrs

from ksi.rundir.run_option import FREE, KV, MATCH, OPTION, TASKS, Form, RunOption


@attrs.define(slots=False, kw_only=True)
class TaskOptions:
    """The Tasks settings of a run (a part of :class:`~ksi.rundir.config.RunConfig`)."""

    task_source: str = attrs.field(
        default="custom",
        metadata={
            OPTION: RunOption(
                ("--task-source",),
                "Task source that reads TASKS.",
                TASKS,
                MATCH,
                metavar="NAME",
                envvar="KSI_TASK_SOURCE",
                complete="task source",
                doc="Who reads the tasks (default `custom`, "
                "[your-own-tasks.md](your-own-tasks.md)).",
            )
        },
    )
    tasks_path: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--tasks-path",),
                "Same as TASKS (the older spelling).",
                TASKS,
                FREE,
                Form.TASKS,
                metavar="PATH",
                doc="The tasks file (or directory, for sources that read one), the first "
                "argument; `--tasks-path PATH` is its older spelling.",
                python="The tasks path the run records (absolute, like the CLI's): `ksi.run()` "
                "sets it from `tasks` when that is a path (given as well, another path is an "
                "error, like two tasks paths on the command line); with in-memory tasks, a file "
                "`ksi regrade` can reload them from.",
            )
        },
    )
    task_source_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--task-source-option",),
                "A task source option (repeatable).",
                TASKS,
                MATCH,
                Form.KEY_VALUES,
                metavar=KV,
                doc="Repeatable; an option of the task source (also on `ksi tasks validate` "
                "and `list`). A source may add its own flag for one: the polyglot plugin's "
                "`--language python,javascript` is `--task-source-option "
                "language=python,javascript`. Kept in `run.json`; a resume must not change it.",
            )
        },
    )
    #: None: every task.
    task_ids: list[str] | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--task-id", "--task-ids"),
                "Only tasks whose id matches: an id or a glob like 'fix-*' (repeatable; a,b "
                "works too). One that matches nothing is an error.",
                TASKS,
                FREE,
                Form.PATTERNS,
                metavar="ID|GLOB",
                doc="Only tasks whose id matches. Repeatable (`--task-id a --task-id 'fix-*'`), "
                "and `a,b` works too; `--task-ids` is the older spelling.",
            )
        },
    )
    #: Read when the tasks are selected (a resume reads it again).
    task_ids_file: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--task-ids-file",),
                "Only tasks whose id matches a line of PATH (an id or glob a line, # comments).",
                TASKS,
                FREE,
                Form.PATH,
                metavar="PATH",
                doc="Only tasks whose id matches a line of PATH: one id or glob a line, blank "
                "lines and `#` comments ignored; with `--task-id`, a task either names is "
                "run. A line that matches no task is an error, as for `--task-id`.",
            )
        },
    )
    max_tasks: int | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--limit", "--max-tasks"),
                "Only the first N selected tasks, in file order.",
                TASKS,
                FREE,
                metavar="N",
                minimum=1,
                doc="Only the first N selected tasks, in file order (`--max-tasks` is the "
                "older spelling).",
            )
        },
    )
    exclude_task_ids: list[str] | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--exclude",),
                "Leave out tasks whose id matches (repeatable; a,b works too).",
                TASKS,
                FREE,
                Form.PATTERNS,
                metavar="ID|GLOB",
            )
        },
    )
