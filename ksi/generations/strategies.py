"""The built-in generation strategies: ``retry-unsolved`` (the default) and ``all``."""

from __future__ import annotations

from typing import ClassVar

from ksi.hookspecs import Register, hookimpl
from ksi.knowledge.models import PlanRequest


class RetryUnsolved:
    """Every task not solved yet; the run stops when none is left.

    A task that cannot be scored (no eval) is not unsolved: it runs in the first
    generation, which shows it cannot be scored, and never again.
    """

    name: ClassVar[str] = "retry-unsolved"
    aliases: ClassVar[tuple[str, ...]] = ("unsolved",)
    description: ClassVar[str] = (
        "Each generation runs every task not solved yet (best score below "
        "--solved-threshold), --attempts each; a task that cannot be scored (no eval) "
        "runs once; stops when no task is left."
    )

    def plan(self, request: PlanRequest) -> list[str]:
        return [t.task_id for t in request.tasks if not t.solved and t.scorable]


class AllTasks:
    """Every task, every generation: measures stability rather than saving attempts."""

    name: ClassVar[str] = "all"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Each generation runs every task again, solved or not (how stable is the agent?)."
    )

    def plan(self, request: PlanRequest) -> list[str]:
        return [t.task_id for t in request.tasks]


@hookimpl(trylast=True)
def ksi_register_strategies(register: Register) -> None:
    register(RetryUnsolved)
    register(AllTasks)
