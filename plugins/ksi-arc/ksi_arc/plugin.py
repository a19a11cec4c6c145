"""The module KSI loads through the ``ksi`` entry point: it registers the ARC components.

Only the hook marker is imported here; the components are imported when KSI
first asks for them, so ``ksi --help`` stays fast with the plugin installed.
"""

from __future__ import annotations

from ksi.hookspecs import Register, hookimpl


@hookimpl
def ksi_register_task_sources(register: Register) -> None:
    from ksi_arc.source import ArcTaskSource

    register(ArcTaskSource)


@hookimpl
def ksi_register_evaluators(register: Register) -> None:
    from ksi_arc.evaluator import ArcEvaluator

    register(ArcEvaluator)
