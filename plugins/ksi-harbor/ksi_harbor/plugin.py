"""The module KSI loads through the ``ksi`` entry point: it registers the harbor components."""

from __future__ import annotations

from ksi.hookspecs import Register, hookimpl
from ksi_harbor.evaluator import HarborEvaluator
from ksi_harbor.source import HarborTaskSource


@hookimpl
def ksi_register_task_sources(register: Register) -> None:
    register(HarborTaskSource)


@hookimpl
def ksi_register_evaluators(register: Register) -> None:
    register(HarborEvaluator)
