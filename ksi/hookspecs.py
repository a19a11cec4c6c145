"""The complete list of KSI's extension points.

A plugin is a module (or object) whose functions are decorated with
:data:`hookimpl` and named after a hook below. Built-in components are
registered through these same hooks by KSI's default plugins, so anything a
built-in does, a third-party plugin can do too.

KSI calls the implementations in pluggy's order (``tryfirst`` ones first,
``trylast`` ones last, otherwise the newest plugin first), each plugin on its
own so one that raises is skipped alone; hook wrappers are refused. A name
registered from a ``tryfirst`` hook overrides the same name from another
plugin (built-ins register ``trylast``); otherwise a built-in keeps its
name (the plugin's component is reported and skipped) and any other double
registration is a clash. See docs/plugins.md.

Two families of hooks exist:

* ``ksi_register_*``: called once, the first time KSI needs that kind of
  component. Each receives a ``register`` callback; call it once per component
  class you provide. KSI validates the component, records which plugin
  registered it (shown by ``ksi plugins``) and reports a name clash naming
  both plugins.
* lifecycle observers (``ksi_run_started``, ``ksi_generation_started``,
  ``ksi_attempt_finished``, ``ksi_generation_finished``, ``ksi_run_finished``):
  called as a run progresses, for reporting and streaming results elsewhere.
  Their return values are ignored; an exception in an observer is logged in
  the run and never loses an attempt.

Hook arguments are passed by name and a hook implementation may accept any
subset of them, so a hook can gain arguments without breaking plugins.
The component protocols each hook expects are in :mod:`ksi.interfaces`, each
with a base class holding the defaults of its optional members
(``AgentBase``...); :mod:`ksi.kinds` ties each ``ksi_register_*`` hook to its
kind of component.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import typer

    from ksi.records import AttemptRecord, RunInfo, RunSummary

PROJECT_NAME = "ksi"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
#: Decorate a function with this to implement a KSI hook.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

Register = Callable[[Any], None]


@hookspec
def ksi_register_task_sources(register: Register) -> None:
    """Register task sources: where tasks come from and how they are checked.

    Called once, the first time KSI looks up a task source (``--task-source``,
    ``ksi tasks``, :func:`ksi.tasks.loaders.load_tasks_for_source`).

    :param register: call ``register(SourceClass)`` for each source. The class
        follows :class:`ksi.interfaces.TaskSource`: ``name``, ``aliases``,
        ``description``, ``default_evaluator``, ``load(path)`` returning a list
        of :class:`ksi.models.TaskSpec`, and ``validate(path)`` returning every
        :class:`ksi.models.Problem` in the input; optionally ``file_suffixes``
        (``(".csv",)``), so a user who gives such a file to another source is
        told to use this one, and ``reads_directories = True`` for the same
        about a directory.
    :returns: nothing.
    """


@hookspec
def ksi_register_evaluators(register: Register) -> None:
    """Register evaluators: what turns a finished workspace into a score.

    Called once, the first time KSI looks up an evaluator (``--evaluator``,
    a task source's ``default_evaluator``, ``ksi grade``).

    :param register: call ``register(EvaluatorClass)`` for each evaluator. The
        class follows :class:`ksi.interfaces.Evaluator`; it is instantiated
        with the user's evaluator options as keyword arguments, and its
        ``grades_in`` says whether it grades a host copy of the captured
        repo (``"host"``) or inside the attempt's environment
        (``"environment"``).
    :returns: nothing.
    """


@hookspec
def ksi_register_agents(register: Register) -> None:
    """Register agents: how to invoke a coding agent on a task.

    Called once, the first time KSI looks up an agent (``--agent``,
    ``ksi agents``).

    :param register: call ``register(AgentClass)`` for each agent. The class
        follows :class:`ksi.interfaces.Agent`; it is instantiated with the
        ``--agent-option`` values as keyword arguments (unknown keys are
        rejected before the run starts).
    :returns: nothing.
    """


@hookspec
def ksi_register_environments(register: Register) -> None:
    """Register environments: where an agent process runs (local, sandbox, docker...).

    Called once, the first time KSI looks up an environment
    (``--environment``).

    :param register: call ``register(EnvironmentClass)`` for each environment,
        following :class:`ksi.interfaces.Environment`.
    :returns: nothing.
    """


@hookspec
def ksi_register_executors(register: Register) -> None:
    """Register executors: how attempts are scheduled (one machine, a cluster).

    Called once, the first time KSI looks up an executor (``--executor``).

    :param register: call ``register(ExecutorClass)`` for each executor,
        following :class:`ksi.interfaces.Executor`.
    :returns: nothing.
    """


@hookspec
def ksi_register_strategies(register: Register) -> None:
    """Register generation strategies: which tasks each generation of a run runs.

    Called once, the first time KSI looks up a strategy (``--strategy``).

    :param register: call ``register(StrategyClass)`` for each strategy,
        following :class:`ksi.interfaces.Strategy`: ``plan(request)`` gets a
        :class:`ksi.knowledge.models.PlanRequest` (each task's best score and
        whether it is solved) and returns the task ids to run, or nothing to
        stop. Built-ins: ``retry-unsolved`` (the default) and ``all``.
    :returns: nothing.
    """


@hookspec
def ksi_register_distillers(register: Register) -> None:
    """Register distillers: what turns a generation's scored attempts into notes.

    Called once, the first time KSI looks up a distiller (``--distiller``).

    :param register: call ``register(DistillerClass)`` for each distiller,
        following :class:`ksi.interfaces.Distiller`; it is instantiated with
        the ``--distiller-option`` values as keyword arguments, and its
        ``distill(request)`` gets a :class:`ksi.knowledge.models.DistillRequest`
        (evidence from scored attempts only) and returns a
        :class:`ksi.knowledge.models.DistillResult`. Built-ins: ``evidence``
        (the default, no model) and ``agent``.
    :returns: nothing.
    """


@hookspec
def ksi_register_commands(cli: typer.Typer) -> None:
    """Add commands to the ``ksi`` command line.

    Called once, only when the command line needs plugin commands: to list
    them (``ksi --help``) or to run a command that is not built in. A name a
    built-in command already has is ignored.

    :param cli: a :class:`typer.Typer` whose commands and groups become
        ``ksi``'s; add commands with ``@cli.command()`` or groups with
        ``cli.add_typer(...)``. A :class:`ksi.errors.KsiError` raised by such
        a command is reported like a built-in command's (``error: ...``, its
        exit code).
    :returns: nothing.
    """


@hookspec
def ksi_run_started(run: RunInfo) -> None:
    """A run is about to launch its first attempt (also called on resume).

    :param run: the run's configuration, directory and the attempts planned.
    :returns: ignored.
    """


@hookspec
def ksi_attempt_finished(run: RunInfo, record: AttemptRecord) -> None:
    """An attempt finished and its record is durably in the journal.

    Called from the driver's thread (never an attempt's), once per journal
    record, once its line is synced to disk.

    :param run: the run it belongs to.
    :param record: the attempt's record exactly as journalled.
    :returns: ignored.
    """


@hookspec
def ksi_generation_started(run: RunInfo, generation: int, task_ids: tuple[str, ...]) -> None:
    """A generation is about to launch its attempts (also called when a resume continues it).

    :param run: the run.
    :param generation: the generation's number (1 for the first).
    :param task_ids: the tasks it runs, hold-outs included.
    :returns: ignored.
    """


@hookspec
def ksi_generation_finished(run: RunInfo, generation: int, knowledge: Any) -> None:
    """A generation's attempts are journalled and its notes (if any) are stored.

    :param run: the run.
    :param generation: the generation's number.
    :param knowledge: the :class:`ksi.knowledge.models.Knowledge` stored after it,
        or ``None`` (no distillation: ``--knowledge none``, or the last generation
        of a run of one).
    :returns: ignored.
    """


@hookspec
def ksi_run_finished(run: RunInfo, summary: RunSummary) -> None:
    """A run ended: completed, stopped by the user, or stopped by ``--max-cost``.

    :param run: the run.
    :param summary: the summary derived from the journal.
    :returns: ignored.
    """
