"""Looking up and instantiating a run's components by name (or taking objects as given)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
