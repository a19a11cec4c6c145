"""The module KSI loads through the ``ksi`` entry point: the polyglot source, evaluator, commands.

Only the hook marker is imported here; the components are imported when KSI
first asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ksi.hookspecs import Register, hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def ksi_register_task_sources(register: Register) -> None:
    from ksi_polyglot.source import PolyglotTaskSource

    register(PolyglotTaskSource)


@hookimpl
def ksi_register_evaluators(register: Register) -> None:
    from ksi_polyglot.evaluator import PolyglotEvaluator

    register(PolyglotEvaluator)


@hookimpl
def ksi_register_commands(cli: typer.Typer) -> None:
    from ksi_polyglot.commands import polyglot_app

    cli.add_typer(polyglot_app, name="polyglot")
