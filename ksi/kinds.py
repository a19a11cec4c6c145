"""The kinds of component a plugin can provide, each described once.

A task source, an evaluator, an agent, an environment, an executor, a
strategy and a distiller are each a :class:`ComponentKind`: the name that
messages and ``ksi plugins`` use, the hook that registers one, the protocol
it follows and the base class holding the defaults of its optional members
(both in :mod:`ksi.interfaces`), and the command-line flag that carries its
options. The plugin manager, the registry, :func:`ksi.attempt.components.resolve`,
the CLI and the plugin scaffold read these facts here, so a new kind, or a
new optional member, is one edit.

The protocol and the base class are named, not imported: :mod:`ksi.plugins`
imports this module for ``ksi --help``, which must not pay for importing
:mod:`ksi.interfaces` (and the models behind it). For the same reason
:class:`ComponentKind` is a frozen dataclass rather than an attrs class.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from ksi import hookspecs

if TYPE_CHECKING:
    from ksi.interfaces import (
        Agent,
        Distiller,
        Environment,
        Evaluator,
        Executor,
        Strategy,
        TaskSource,
    )

#: The protocol a kind's components follow (``Agent`` for :data:`AGENT`).
C = TypeVar("C")


def _interfaces() -> ModuleType:
    # Imported on first use, not with this module: see the module docstring.
    return importlib.import_module("ksi.interfaces")


@dataclasses.dataclass(frozen=True)
class ComponentKind(Generic[C]):
    """One kind of component: how a plugin registers it, what it must do, how a user sets it."""

    #: How messages and listings name it (``"task source"``); also the key of
    #: ``ksi plugins --json``'s ``components``.
    name: str
    #: ``"task sources"``: listings and "Valid task sources: ..." messages.
    plural: str
    #: The hook (a function of :mod:`ksi.hookspecs`) whose ``register`` callback adds one.
    hook: Callable[[hookspecs.Register], None]
    #: The protocol in :mod:`ksi.interfaces` its components follow.
    protocol_name: str
    #: The class in :mod:`ksi.interfaces` with the defaults of its optional members;
    #: a component may subclass it, and one that does not is completed with it.
    base_name: str
    #: The command-line flag that carries its options (for error messages).
    option_flag: str
    #: The ``ksi.run`` keyword that carries them (error messages to a Python caller).
    option_keyword: str

    def __str__(self) -> str:
        return self.name

    @property
    def hook_name(self) -> str:
        """``ksi_register_agents``: the name plugins implement."""
        return self.hook.__name__

    @property
    def protocol(self) -> type:
        """The protocol class (imports :mod:`ksi.interfaces`)."""
        value: type = getattr(_interfaces(), self.protocol_name)
        return value

    @property
    def base(self) -> type:
        """The base class holding the optional members' defaults (imports :mod:`ksi.interfaces`)."""
        value: type = getattr(_interfaces(), self.base_name)
        return value

    @property
    def optional_members(self) -> dict[str, Any]:
        """Member name -> its default, as the base class defines them.

        Read from the class itself, so a default added there is optional
        everywhere from then on, with no second list to keep in step.
        """
        base = self.base
        return {name: getattr(base, name) for name in dir(base) if not name.startswith("_")}

    def required_methods(self) -> list[str]:
        """The methods a component must have: its protocol's, minus the optional ones."""
        optional = self.optional_members
        return [
            name
            for name, value in vars(self.protocol).items()
            if not name.startswith("_") and callable(value) and name not in optional
        ]

    def missing_methods(self, component: object) -> list[str]:
        """The required methods ``component`` lacks (empty when it follows the protocol)."""
        return [m for m in self.required_methods() if not callable(getattr(component, m, None))]

    def lacks_optional(self, component: object) -> bool:
        """Whether ``component`` leaves out an optional member (it then needs the defaults)."""
        if isinstance(component, self.base):
            return False
        return any(not hasattr(component, name) for name in self.optional_members)

    def complete(self, component: object) -> C:
        """``component`` as this kind's protocol, its missing optional members defaulted.

        A component that subclasses :attr:`base`, or has every optional member,
        is returned as it is; any other is wrapped once (this is the only place
        that asks an object which members it has), so code holding it reads
        ``agent.required_env`` or calls ``environment.credential_warning(...)``
        as typed. Call it where a component is resolved, after checking
        :meth:`missing_methods`.
        """
        if not self.lacks_optional(component):
            return cast(C, component)
        return cast(C, _completed_class(self.base)(component, self))


class _Completed:
    """A component completed with its kind's defaults: see :meth:`ComponentKind.complete`.

    Subclassed once per kind together with the kind's base class. The members
    the component has are copied onto this instance (shadowing the base
    class's defaults); anything else, its required methods and its own
    extras, is looked up on the component.
    """

    def __init__(self, inner: object, kind: ComponentKind[Any]) -> None:
        self._inner = inner
        self._kind = kind.name
        self.name = str(getattr(inner, "name", None) or type(inner).__name__)
        for member in kind.optional_members:
            if hasattr(inner, member):
                setattr(self, member, getattr(inner, member))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_kind"):
            raise AttributeError(name)  # protocols (copy, pickle) and a half-built instance
        return getattr(self._inner, name)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as the component itself, completed again where it is unpickled.
        return (_complete_again, (self._kind, self._inner))

    def __repr__(self) -> str:
        return f"{self._inner!r} (completed as {self._kind})"


_COMPLETED: dict[type, type[_Completed]] = {}


def _completed_class(base: type) -> type[_Completed]:
    cls = _COMPLETED.get(base)
    if cls is None:
        made = type(f"Completed{base.__name__}", (_Completed, base), {"__module__": __name__})
        cls = _COMPLETED.setdefault(base, made)
    return cls


def _complete_again(kind: str, inner: object) -> object:
    return kind_named(kind).complete(inner)


TASK_SOURCE: ComponentKind[TaskSource] = ComponentKind(
    name="task source",
    plural="task sources",
    hook=hookspecs.ksi_register_task_sources,
    protocol_name="TaskSource",
    base_name="TaskSourceBase",
    option_flag="--task-source-option",
    option_keyword="task_source_options",
)
EVALUATOR: ComponentKind[Evaluator] = ComponentKind(
    name="evaluator",
    plural="evaluators",
    hook=hookspecs.ksi_register_evaluators,
    protocol_name="Evaluator",
    base_name="EvaluatorBase",
    option_flag="--evaluator-option",
    option_keyword="evaluator_options",
)
AGENT: ComponentKind[Agent] = ComponentKind(
    name="agent",
    plural="agents",
    hook=hookspecs.ksi_register_agents,
    protocol_name="Agent",
    base_name="AgentBase",
    option_flag="--agent-option",
    option_keyword="agent_options",
)
ENVIRONMENT: ComponentKind[Environment] = ComponentKind(
    name="environment",
    plural="environments",
    hook=hookspecs.ksi_register_environments,
    protocol_name="Environment",
    base_name="EnvironmentBase",
    option_flag="--environment-option",
    option_keyword="environment_options",
)
EXECUTOR: ComponentKind[Executor] = ComponentKind(
    name="executor",
    plural="executors",
    hook=hookspecs.ksi_register_executors,
    protocol_name="Executor",
    base_name="ExecutorBase",
    option_flag="--executor-option",
    option_keyword="executor_options",
)
STRATEGY: ComponentKind[Strategy] = ComponentKind(
    name="strategy",
    plural="strategies",
    hook=hookspecs.ksi_register_strategies,
    protocol_name="Strategy",
    base_name="StrategyBase",
    # A strategy takes no options; the flag that names it is what a message points at.
    option_flag="--strategy",
    option_keyword="strategy",
)
DISTILLER: ComponentKind[Distiller] = ComponentKind(
    name="distiller",
    plural="distillers",
    hook=hookspecs.ksi_register_distillers,
    protocol_name="Distiller",
    base_name="DistillerBase",
    option_flag="--distiller-option",
    option_keyword="distiller_options",
)

#: Every kind, in the order listings show them.
KINDS: tuple[ComponentKind[Any], ...] = (
    TASK_SOURCE,
    EVALUATOR,
    AGENT,
    ENVIRONMENT,
    EXECUTOR,
    STRATEGY,
    DISTILLER,
)
_BY_NAME: dict[str, ComponentKind[Any]] = {k.name: k for k in KINDS}


def kind_named(kind: str | ComponentKind[Any]) -> ComponentKind[Any]:
    """The kind called ``kind`` (``"task source"``), or a kind as given.

    Names are still accepted where a kind is expected (``registry("agent")``),
    so plugins and scripts written against the names keep working.
    """
    if isinstance(kind, ComponentKind):
        return kind
    found = _BY_NAME.get(kind)
    if found is None:
        raise ValueError(
            f"unknown component kind {kind!r}; expected one of {[k.name for k in KINDS]}"
        )
    return found
