"""KSI's own plugins, registered first and imported only when one of their hooks is called.

They are registered exactly like third-party ones, but each module is
imported only when one of its hooks is first called (:class:`LazyBuiltin`),
so a command that needs no agent never imports the agents. Every built-in
hook is ``trylast``, so a plugin can override a built-in on purpose.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from ksi import hookspecs

#: Built-in plugins (module -> the hooks it implements).
#: tests/test_plugins.py checks this table against the modules themselves.
BUILTIN_HOOKS: dict[str, tuple[str, ...]] = {
    "ksi.tasks.custom": ("ksi_register_task_sources",),
    "ksi.eval.command": ("ksi_register_evaluators",),
    "ksi.agents.builtin": ("ksi_register_agents",),
    "ksi.agents.claude_code": ("ksi_register_agents",),
    "ksi.agents.codex": ("ksi_register_agents",),
    "ksi.agents.aider": ("ksi_register_agents",),
    "ksi.agents.gemini_cli": ("ksi_register_agents",),
    "ksi.agents.opencode": ("ksi_register_agents",),
    "ksi.agents.mini_swe_agent": ("ksi_register_agents",),
    "ksi.agents.acp": ("ksi_register_agents",),
    "ksi.environments.local": ("ksi_register_environments",),
    "ksi.environments.sandbox": ("ksi_register_environments",),
    "ksi.environments.docker": ("ksi_register_environments",),
    "ksi.executors.local": ("ksi_register_executors",),
    "ksi.executors.processes": ("ksi_register_executors",),
    "ksi.generations.strategies": ("ksi_register_strategies",),
    "ksi.generations.evidence_distiller": ("ksi_register_distillers",),
    "ksi.generations.agent_distiller": ("ksi_register_distillers",),
    "ksi.generations.model_distiller": ("ksi_register_distillers",),
    "ksi.observers.report": ("ksi_run_started", "ksi_attempt_finished", "ksi_run_finished"),
}


def _argnames(function: Callable[..., Any]) -> list[str]:
    return [
        p.name
        for p in inspect.signature(function, follow_wrapped=False).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


class LazyBuiltin:
    """Stands in for a built-in plugin module until one of its hooks is called.

    Each hook is a function pluggy sees with the hookspec's arguments and
    ``trylast``; the first call imports the module and forwards to the real
    function (with the arguments it declares).
    """

    def __init__(self, module_name: str, hooks: tuple[str, ...]) -> None:
        self.__name__ = module_name
        for hook in hooks:
            setattr(self, hook, self._forwarder(module_name, hook))

    @staticmethod
    def _forwarder(module_name: str, hook: str) -> Callable[..., Any]:
        spec = getattr(hookspecs, hook)
        spec_args = _argnames(spec)
        real: list[tuple[Callable[..., Any], list[str]]] = []

        def forward(*args: Any, **kwargs: Any) -> Any:
            if not real:
                function = getattr(importlib.import_module(module_name), hook)
                real.append((function, _argnames(function)))
            function, wanted = real[0]
            kwargs.update(zip(spec_args, args, strict=False))
            return function(**{k: v for k, v in kwargs.items() if k in wanted})

        forward.__name__ = hook
        forward.__wrapped__ = spec  # type: ignore[attr-defined]  # pluggy reads the arguments here
        return hookspecs.hookimpl(trylast=True)(forward)
