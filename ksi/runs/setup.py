"""Getting a run ready: what it is made of, the checks before it starts, its ``run.json``.

Everything a run needs is resolved before anything is created (the tasks
loaded and selected, the components and the executor resolved with their
options, the generation setup), so a run that cannot start leaves nothing
behind and its error says which option to fix. Only then is the run
directory opened: a new ``run.json``, or a resume checked against the run it
continues.
"""

from __future__ import annotations

import os
import platform
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from ksi._version import __version__
from ksi.attempt.components import (
    Components,
    component_name,
    resolve,
    resolve_components,
    resolve_executor,
)
from ksi.attempt.diskfull import disk_full_as_error
from ksi.attempt.envscrub import missing_required
from ksi.attempt.job import ComponentSpec
from ksi.attempt.safety import credential_warning, endpoint_warning
from ksi.choices import KnowledgeTools
from ksi.errors import KsiWarning, RunError, UserInputError
from ksi.generations.setup import GenerationSetup, resolve_generation_setup
from ksi.generations.steps import needs_distillation
from ksi.interfaces import Environment, Executor, TaskSource
from ksi.kinds import AGENT, EVALUATOR
from ksi.layout import RunLayout
from ksi.models import TaskSpec
from ksi.plugins import get_plugins
from ksi.provenance import Provenance
from ksi.rundir.config import RunConfig, resume_mismatches, task_set_fingerprint
from ksi.rundir.run_state import RunState, load_run_state, save_run_state
from ksi.runs.job_template import ComponentSpecs
from ksi.tasks.loaders import get_task_source

#: What forum sessions are graded with: the ``command`` evaluator, on a task with no eval
#: command, grades nothing (a session's record says ``no_eval``).
FORUM_EVALUATOR = "command"


@attrs.frozen
class ForumSetup:
    """What forum sessions run with: the forum agent (as a job carries it and resolved),
    the run's environment, and an evaluator that grades nothing (a session has no eval)."""

    agent: ComponentSpec
    components: Components


@attrs.frozen
class ResolvedRun:
    """What a run is made of, resolved and checked; nothing of it is created yet."""

    tasks: tuple[TaskSpec, ...]
    specs: ComponentSpecs
    components: Components
    executor: Executor
    generations: GenerationSetup
    #: None: the run has no forum.
    forum: ForumSetup | None = None


def resolve_run(
    config: RunConfig,
    layout: RunLayout,
    *,
    tasks: Sequence[TaskSpec] | None,
    agent: Any,
    evaluator: Any,
    environment: Any,
) -> ResolvedRun:
    """Check the configuration, load the tasks, resolve the components; create nothing.

    ``tasks`` (given in Python) replace loading ``config.tasks_path``; the
    components may be names, classes or ready instances (``ksi.run()`` takes all
    three), or None for the configuration's.
    """
    problems = config.problems()
    if problems:
        raise UserInputError("run configuration:\n" + "\n".join(f"  {p}" for p in problems))
    loaded, source = _load_tasks(config, tasks)
    # Before anything is created: ids this run directory cannot hold apart, seeds
    # that would copy the run into itself.
    layout.check_tasks(loaded, config.tasks_path or "tasks")
    evaluator_ref = evaluator or config.evaluator
    if evaluator_ref is None:
        evaluator_ref = source.default_evaluator if source is not None else "command"
    specs = ComponentSpecs(
        ComponentSpec(
            "agent", agent if agent is not None else config.agent, dict(config.agent_options)
        ),
        ComponentSpec(
            "environment",
            environment if environment is not None else config.environment,
            dict(config.environment_options),
        ),
        ComponentSpec("evaluator", evaluator_ref, dict(config.evaluator_options)),
    )
    generations = resolve_generation_setup(config, loaded, layout.root)
    components = resolve_components(
        specs.agent,
        specs.environment,
        specs.evaluator,
        eval_isolation=config.eval_isolation,
        eval_in=config.eval_in,
        eval_env=config.eval_env,
    )
    executor: Executor = resolve_executor(config.executor, config.executor_options)
    forum = _forum_setup(config, specs, components) if config.forum else None
    return ResolvedRun(tuple(loaded), specs, components, executor, generations, forum)


def _forum_setup(config: RunConfig, specs: ComponentSpecs, run: Components) -> ForumSetup:
    """The forum agent: ``--forum-agent`` with its options, or the run's agent (its options,
    with any ``--forum-agent-option`` on top); the run's environment instance."""
    if config.forum_agent is None and not config.forum_agent_options:
        agent_spec, agent = specs.agent, run.agent
    else:
        if config.forum_agent is None:
            agent_spec = attrs.evolve(
                specs.agent, options={**specs.agent.options, **config.forum_agent_options}
            )
        else:
            options = dict(config.forum_agent_options)
            agent_spec = ComponentSpec("agent", config.forum_agent, options)
        agent, _ = resolve(AGENT, agent_spec.ref, agent_spec.options)
    evaluator, _ = resolve(EVALUATOR, FORUM_EVALUATOR)
    components = Components(agent=agent, environment=run.environment, evaluator=evaluator)
    return ForumSetup(agent_spec, components)


def _load_tasks(
    config: RunConfig, given: Sequence[TaskSpec] | None
) -> tuple[list[TaskSpec], TaskSource | None]:
    source = None
    if given is not None:
        tasks = list(given)
    else:
        if not config.tasks_path:
            raise UserInputError("no tasks: give a tasks path (ksi run TASKS_PATH ...)")
        source = get_task_source(config.task_source, config.task_source_options)
        tasks = source.load(Path(config.tasks_path))
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) != len(ids) else []
    if dupes:
        raise UserInputError(f"duplicate task ids: {', '.join(dupes)}")
    tasks = config.selection.apply(tasks, where=config.tasks_path or "")
    return tasks, source


def preflight(config: RunConfig, run: ResolvedRun) -> None:
    """What must hold before a real run starts: the agent can attempt every task and
    finds its credentials, and so does the distiller of a run that distils; a warning
    when the environment exposes or cannot reach them."""
    agent = run.components.agent
    problems = list(agent.check_tasks(run.tasks))
    problems.extend(
        missing_required(component_name(agent), agent.required_env, passthrough=config.agent_env)
    )
    # "One of these keys, or a login file" rules live with the agent.
    problems.extend(agent.missing_credentials(os.environ))
    if not needs_distillation(1, config):
        # A distiller that calls a model checks its key here, before any attempt spends.
        problems.extend(run.generations.distiller.preflight())
    if config.knowledge_tools == KnowledgeTools.ON:
        problems.extend(knowledge_tools_problems(run.components.environment))
    if run.forum is not None and run.forum.components.agent is not agent:
        forum_agent = run.forum.components.agent
        problems.extend(
            f"--forum-agent: {p}"
            for p in (
                *missing_required(component_name(forum_agent), forum_agent.required_env),
                *forum_agent.missing_credentials(os.environ),
            )
        )
    if problems:
        raise UserInputError("\n".join(problems))
    exposed = credential_warning(
        run.components.environment,
        agent,
        model=config.model,
        agent_env=config.agent_env,
        host_env=os.environ,
    )
    if exposed:
        warnings.warn(exposed, KsiWarning, stacklevel=2)
    unreachable = endpoint_warning(run.components.environment, agent)
    if unreachable:
        warnings.warn(unreachable, KsiWarning, stacklevel=2)
    if config.knowledge_tools == KnowledgeTools.ON and not getattr(agent, "speaks_mcp", False):
        warnings.warn(
            f"--knowledge-tools on: agent {component_name(agent)!r} does not speak MCP, so its "
            "attempts get no knowledge tools (claude-code, codex, gemini-cli and opencode do)",
            KsiWarning,
            stacklevel=2,
        )


def knowledge_tools_problems(environment: Environment) -> list[str]:
    """Why ``--knowledge-tools on`` cannot work here: the tools' MCP server is KSI's own
    Python, which the agent's CLI starts where it runs, and it needs the ``mcp`` extra."""
    # start-up: the knowledge tools (their store, 15 ms) only for a run that asks for them
    from ksi.knowledge.tools import MISSING_EXTRA, mcp_installed

    problems = []
    if not getattr(environment, "runs_host_programs", False):
        problems.append(
            f"--knowledge-tools on: the {component_name(environment)!r} environment cannot run "
            "KSI's Python, which serves the tools to the agent (a container image holds no "
            "KSI); use --environment local or sandbox, or --knowledge-tools off"
        )
    if not mcp_installed():
        problems.append(MISSING_EXTRA)
    return problems


def open_run_dir(
    layout: RunLayout,
    config: RunConfig,
    run: ResolvedRun,
    provenance: Callable[[], Provenance],
) -> tuple[RunState, bool]:
    """``run.json`` for this session: a new run's, or the resumed run's with this
    session's settings (``provenance`` gives this session's); True when it resumes a run."""
    fingerprints = task_set_fingerprint(run.tasks)
    resumed = layout.run_json.exists()
    if not resumed:
        layout.check_new_run_dir()
    if resumed:
        stored = load_run_state(layout)
        problems = resume_mismatches(stored.config, stored.tasks, config, fingerprints)
        if problems:
            raise RunError(
                f"{layout.root} holds a different run; refusing to resume it:\n"
                + "\n".join(f"  {p}" for p in problems)
                + "\nMore --attempts and new tasks are fine; these are not "
                "(docs/running.md#resuming)."
            )
        # Nothing that defines the experiment changed; the rest (concurrency,
        # retries, more attempts...) may, and the newest values are recorded.
        # Tasks new to the run join it; tasks this session leaves out stay in it.
        added = [t.id for t in run.tasks if t.id not in stored.tasks]
        state = attrs.evolve(
            stored,
            config=config,
            tasks={**stored.tasks, **fingerprints},
            task_ids=[*stored.task_ids, *added],
        )
    else:
        state = RunState(
            run_id=uuid.uuid4().hex[:12],
            config=config,
            tasks=fingerprints,
            task_ids=[t.id for t in run.tasks],
        )
    # Until this session ends, the run is going again (a kill -9 leaves it so).
    state = attrs.evolve(
        state.started_session(),
        versions=_versions(run.components),
        provenance=provenance(),
    )
    with disk_full_as_error(layout.root, "writing run.json"):
        save_run_state(layout, state)
    return state, resumed


def _versions(components: Components) -> dict[str, Any]:
    plugin_state = get_plugins()
    plugins = {}
    for name in sorted(set(components.plugins)):
        info = plugin_state.infos.get(name)
        if info is not None:
            plugins[name] = {"distribution": info.distribution, "version": info.version}
        else:
            plugins[name] = {"distribution": name, "version": ""}
    return {"ksi": __version__, "python": platform.python_version(), "plugins": plugins}
