"""Looking up and instantiating a run's components by name (or taking objects as given)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ksi.errors import UserInputError
from ksi.options import create_component
from ksi.plugins import registry

#: The command-line flag that carries each kind's options, for error messages.
OPTION_FLAGS = {
    "agent": "--agent-option",
    "environment": "--environment-option",
    "evaluator": "--evaluator-option",
    "executor": "--executor-option",
    "task source": "--task-source-option",
}


def resolve(kind: str, spec: Any, options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """Return ``(instance, plugin name)`` for a name, a class, or a ready instance."""
    options = options or {}
    flag = OPTION_FLAGS.get(kind, "--option")
    if isinstance(spec, str):
        reg = registry(kind).get(spec)
        return create_component(reg.obj, options, kind=kind, option_flag=flag), reg.plugin
    # A class is built with the options; a ready instance refuses them (never ignores them).
    return create_component(spec, options, kind=kind, option_flag=flag), "(python object)"


def grades_on_host(evaluator: Any) -> bool:
    """Whether ``evaluator`` grades a directory on the host (``grades_in == "host"``).

    The other kind grades inside the attempt's environment, through its exec
    handle, so it can only run while a run has that environment up.
    """
    return getattr(evaluator, "grades_in", "host") == "host"


def resolve_host_evaluator(
    spec: Any, options: Mapping[str, Any] | None, *, refusal: str
) -> tuple[Any, str]:
    """Resolve an evaluator that must grade on the host (``ksi grade``, regrade).

    One that grades inside an environment is refused with a
    :class:`~ksi.errors.UserInputError`: ``evaluator 'NAME' <refusal>``.
    """
    grader, plugin = resolve("evaluator", spec, options)
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
