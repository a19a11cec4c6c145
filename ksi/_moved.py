"""Old module paths that still import, with a warning, for one release.

The second structural pass (0.2) moved ``ksi.runner`` into ``ksi.attempt``,
``ksi.runs``, ``ksi.rundir``, ``ksi.generations`` and ``ksi.reporting``, and the built-in
strategies and distillers from ``ksi.knowledge`` into ``ksi.generations``. A
plugin written against an old path keeps working: importing it gives the module
at its new path (the same object, so its state is shared) and a
:class:`DeprecationWarning` that names the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: Old module path -> where it lives now.
MOVED: dict[str, str] = {
    "ksi.runner.models": "ksi.records",
    "ksi.runner.generation_models": "ksi.records",
    "ksi.runner.layout": "ksi.layout",
    "ksi.runner.job": "ksi.attempt.job",
    "ksi.runner.attempt": "ksi.attempt.execute",
    "ksi.runner.capture": "ksi.attempt.capture",
    "ksi.runner.diff": "ksi.attempt.diff",
    "ksi.runner.envscrub": "ksi.attempt.envscrub",
    "ksi.runner.cancel": "ksi.attempt.cancel",
    "ksi.runner.diskfull": "ksi.attempt.diskfull",
    "ksi.runner.components": "ksi.attempt.components",
    "ksi.runner.safety": "ksi.attempt.safety",
    "ksi.runner.run_state": "ksi.rundir.run_state",
    "ksi.runner.journal": "ksi.rundir.journal",
    "ksi.runner.config": "ksi.rundir.config",
    "ksi.runner.progress": "ksi.runs.progress",
    "ksi.runner.driver": "ksi.runs.driver",
    "ksi.runner.api": "ksi.runs.api",
    "ksi.runner.check": "ksi.runs.check",
    "ksi.runner.regrade": "ksi.runs.regrade",
    "ksi.runner.generations": "ksi.generations.steps",
    "ksi.runner.phases": "ksi.generations.phases",
    "ksi.runner.generation_setup": "ksi.generations.setup",
    "ksi.runner.generation_summary": "ksi.generations.figures",
    "ksi.knowledge.strategies": "ksi.generations.strategies",
    "ksi.knowledge.evidence_distiller": "ksi.generations.evidence_distiller",
    "ksi.knowledge.agent_distiller": "ksi.generations.agent_distiller",
    "ksi.knowledge.evidence": "ksi.generations.evidence",
    "ksi.runner.summary": "ksi.reporting.summary",
    "ksi.runner.report": "ksi.reporting.report",
    "ksi.runner.attention": "ksi.reporting.attention",
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}; import it from there "
            "(the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already imported."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(new))


_FINDER = _MovedFinder()


def install() -> None:
    """Answer imports of the old paths (idempotent; the packages that moved call it)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
