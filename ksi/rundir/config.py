"""A run's configuration, every option that sets it, and the rules for resuming it.

Each :class:`RunConfig` field carries its :class:`~ksi.rundir.run_option.RunOption`
(attrs metadata): the ``ksi run`` flag, its help, its ``KSI_*`` variable, its
choices and bounds, the table of docs/running.md that explains it, and how a
resume may change it. The fields are declared by area, one module of
:mod:`ksi.rundir.option_groups` per table of docs/running.md, and
:class:`RunConfig` is composed of those groups. That one declaration is all
there is: ``ksi run``'s parameters (:mod:`ksi.cli.run_options`), the keys of
``ksi run -c run.toml`` (the command's parameters), ``ksi.run()``'s keyword
arguments (the fields), :data:`RESUME_RULES` and the option tables of
docs/cli.md, docs/running.md and docs/python-api.md (``scripts/gen_cli_docs.py``,
which a test keeps current) all come from it. Adding an option is one field in
its area's module, plus the code that uses it.

The configuration is written to ``run.json`` when a run starts. Re-running on
the same run directory resumes unless a setting that defines the experiment
changed: the journal's records would then describe a different experiment,
and the numbers mixed from both would be wrong. What only adds to the
experiment is allowed: more attempts, more tasks.

This module is imported by ``ksi run --help``: it imports nothing heavy.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ksi.choices import KnowledgeMode
from ksi.limits import cost_problem, timeout_problem
from ksi.protected_files import glob_problem
from ksi.rundir.option_groups.agent import AgentOptions
from ksi.rundir.option_groups.environment import EnvironmentOptions
from ksi.rundir.option_groups.forum import ForumOptions
from ksi.rundir.option_groups.generations import GenerationOptions
from ksi.rundir.option_groups.grading import GradingOptions
from ksi.rundir.option_groups.results import ResultOptions
from ksi.rundir.option_groups.scale import ScaleOptions
from ksi.rundir.option_groups.tasks import TaskOptions
from ksi.rundir.run_option import Change, RunOption, option_of, options_of
from ksi.tasks.selection import TaskSelection

if TYPE_CHECKING:
    from ksi.models import TaskSpec


# attrs takes the fields of the bases last to first: run.json lists them by group, in the
# order of docs/running.md's tables (and of ``ksi run --help``).
@attrs.define
class RunConfig(
    ResultOptions,
    ForumOptions,
    GenerationOptions,
    ScaleOptions,
    GradingOptions,
    EnvironmentOptions,
    AgentOptions,
    TaskOptions,
):
    """Every setting of a run, as ``run.json`` records it (settings are keywords, never
    positional)."""

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
            elif isinstance(value, int) and opt.maximum is not None and value > opt.maximum:
                out.append(f"{field.name}: expected an integer <= {opt.maximum:g}, got {value!r}")
        if self.max_cost_usd is not None and (why := cost_problem(self.max_cost_usd)):
            out.append(f"max_cost_usd (--max-cost): {why}")
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
        said = {p.split(":")[0].split(" ")[0] for p in out}
        out.extend(p for p in _unreadable(self) if p.split(":")[0] not in said)
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


def _unreadable(config: RunConfig) -> list[str]:
    """The settings ``run.json`` would not give back as they are (``model=5`` from Python):
    the run would record them, then its resume, report and view refuse them."""
    # start-up: `ksi run --help` imports this module, and needs no converter
    from ksi.serialization import strict_converter, to_data, validation_problems

    try:
        strict_converter().structure(to_data(config), RunConfig)
    except Exception as exc:  # cattrs' structuring errors
        return [
            f"{path.removeprefix('$.')}: {why}" if why else path
            for why, _, path in (p.rpartition(" @ ") for p in validation_problems(exc))
        ]
    return []


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
