"""KSI runs coding agents on tasks and grades every attempt.

The public API: :func:`run`, :class:`TaskSpec`, :data:`hookimpl`,
:class:`KsiError` and friends. Importing ``ksi`` loads no plugin; plugins are
loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ksi.errors import KsiError, TaskLoadError, UserInputError
from ksi.hookspecs import hookimpl
from ksi.models import EvalResult, Problem, TaskSpec

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ksi.runner.models import RunSummary

__all__ = [
    "EvalResult",
    "KsiError",
    "Problem",
    "TaskLoadError",
    "TaskSpec",
    "UserInputError",
    "__version__",
    "hookimpl",
    "run",
]


def run(*args: Any, **kwargs: Any) -> RunSummary:
    """Run agents on tasks; see :func:`ksi.runner.api.run` for the arguments."""
    from ksi.runner.api import run as _run

    return _run(*args, **kwargs)
