"""Looking up and instantiating a run's components by name (or taking objects as given).

:func:`resolve` builds a component of any kind (agent, environment, evaluator,
executor, strategy, distiller...) from a registered name, a class or a ready
instance, typed by its kind (:mod:`ksi.kinds`). One that lacks a required
method is refused here, naming it; one that leaves out an optional member (a
quick agent class given to :func:`ksi.run` with no ``check_tasks`` or
``required_env``) gets the kind's documented default, so the runner never has
to ask an object what it can do (an evaluator's feedback rounds, an optional
protocol of its own, are asked in one place: :attr:`Components.feedback`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

import attrs

from ksi.attempt.job import ComponentSpec
from ksi.attempt.safety import configure_host_grading, decide_eval_isolation
from ksi.errors import UserInputError
from ksi.interfaces import Agent, Environment, Evaluator, Executor, GivesFeedback
from ksi.kinds import AGENT, ENVIRONMENT, EVALUATOR, EXECUTOR, KINDS, ComponentKind, kind_named
from ksi.options import create_component
from ksi.plugins import registry

C = TypeVar("C")

#: The command-line flag that carries each kind's options (kept for code that read it
#: here; :attr:`ksi.kinds.ComponentKind.option_flag` is where it is declared).
OPTION_FLAGS = {k.name: k.option_flag for k in KINDS}


@overload
def resolve(
    kind: ComponentKind[C], spec: Any, options: Mapping[str, Any] | None = None
) -> tuple[C, str]: ...
@overload
def resolve(kind: str, spec: Any, options: Mapping[str, Any] | None = None) -> tuple[Any, str]: ...
def resolve(
    kind: ComponentKind[Any] | str, spec: Any, options: Mapping[str, Any] | None = None
) -> tuple[Any, str]:
    """Return ``(component, plugin name)`` for a name, a class, or a ready instance.

    The component follows ``kind``'s protocol: one that lacks a required
    method is refused here, naming it, and one that leaves out optional
    members gets the kind's defaults (:meth:`ksi.kinds.ComponentKind.complete`).
    """
    kind = kind_named(kind)
    options = options or {}
    if isinstance(spec, str):
        reg = registry(kind).get(spec)
        obj = create_component(
            reg.obj,
            options,
            kind=kind.name,
            option_flag=kind.option_flag,
            option_keyword=kind.option_keyword,
        )
        plugin = reg.plugin
    else:
        # A class is built with the options; a ready instance refuses them (never ignores them).
        obj = create_component(
            spec,
            options,
            kind=kind.name,
            option_flag=kind.option_flag,
            option_keyword=kind.option_keyword,
        )
        plugin = "(python object)"
    missing = kind.missing_methods(obj)
    if missing:
        raise UserInputError(
            f"{kind} {component_name(obj)!r} ({plugin}) lacks {', '.join(missing)}; "
            f"see ksi.interfaces.{kind.protocol_name} for what a {kind} implements"
        )
    return kind.complete(obj), plugin


def grades_on_host(evaluator: Evaluator) -> bool:
    """Whether ``evaluator`` grades a directory on the host (``grades_in == "host"``).

    The other kind grades inside the attempt's environment, through its exec
    handle, so it can only run while a run has that environment up.
    """
    return evaluator.grades_in == "host"


def resolve_host_evaluator(
    spec: Any, options: Mapping[str, Any] | None, *, refusal: str
) -> tuple[Evaluator, str]:
    """Resolve an evaluator that must grade on the host (``ksi grade``, regrade).

    One that grades inside an environment is refused with a
    :class:`~ksi.errors.UserInputError`: ``evaluator 'NAME' <refusal>``.
    """
    grader, plugin = resolve(EVALUATOR, spec, options)
    if not grades_on_host(grader):
        raise UserInputError(f"evaluator {component_name(grader)!r} {refusal}")
    return grader, plugin


def component_name(obj: Any) -> str:
    return str(getattr(obj, "name", None) or type(obj).__name__)


def spec_name(spec: Any) -> str:
    """How a component given by name, class or instance is written in ``run.json``.

    Stable from one Python process to the next, so a resume with a fresh
    instance of the same class is recognised as the same run.
    """
    if isinstance(spec, str):
        return spec
    cls = spec if isinstance(spec, type) else type(spec)
    return str(getattr(spec, "name", None) or f"{cls.__module__}:{cls.__qualname__}")


@attrs.frozen
class Components:
    """A run's three attempt components, resolved and typed."""

    agent: Agent
    environment: Environment
    evaluator: Evaluator
    #: Plugin names, for run.json's versions.
    plugins: tuple[str, ...] = ()
    #: How host grades run: ``none`` or ``sandbox`` (decided from ``--eval-isolation``).
    eval_isolation: str = "none"

    @property
    def grades_in(self) -> Literal["host", "environment"]:
        return "host" if grades_on_host(self.evaluator) else "environment"

    @property
    def feedback(self) -> GivesFeedback | None:
        """The evaluator, when it asks for more than one round per attempt."""
        ev = self.evaluator
        if isinstance(ev, GivesFeedback) and isinstance(ev.rounds, int) and ev.rounds > 1:
            return ev
        return None


def resolve_components(
    agent: ComponentSpec,
    environment: ComponentSpec,
    evaluator: ComponentSpec,
    *,
    eval_isolation: str = "none",
    eval_in: str = "host",
    eval_env: Sequence[str] = (),
) -> Components:
    """The three components, the evaluator set up for host grading.

    ``eval_isolation`` is ``--eval-isolation`` on the driver (``auto`` decided
    here, from the environment); a job carries the decision, so a worker
    process applies the same one.
    """
    a, a_plugin = resolve(AGENT, agent.ref, agent.options)
    env, env_plugin = resolve(ENVIRONMENT, environment.ref, environment.options)
    ev, ev_plugin = resolve(EVALUATOR, evaluator.ref, evaluator.options)
    isolation = decide_eval_isolation(eval_isolation, env, eval_in=eval_in)
    ev = configure_host_grading(ev, isolation=isolation, pass_env=eval_env)
    return Components(
        agent=a,
        environment=env,
        evaluator=ev,
        plugins=(a_plugin, env_plugin, ev_plugin),
        eval_isolation=isolation,
    )


def resolve_executor(name: str, options: Mapping[str, Any] | None = None) -> Executor:
    obj, _ = resolve(EXECUTOR, name, options)
    return obj
