"""The module KSI loads through the ``ksi`` entry point: it registers the harbor components.

KSI imports every installed plugin's entry-point module to start (``ksi --help``
lists the commands plugins add), so this module imports only the hook marker;
the components are imported when KSI first asks for them.
"""

from __future__ import annotations

from ksi.hookspecs import Register, hookimpl


@hookimpl
def ksi_register_task_sources(register: Register) -> None:
    from ksi_harbor.source import HarborTaskSource

    register(HarborTaskSource)


@hookimpl
def ksi_register_evaluators(register: Register) -> None:
    from ksi_harbor.evaluator import HarborEvaluator

    register(HarborEvaluator)
