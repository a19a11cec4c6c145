"""KSI runs coding agents on tasks and grades every attempt.

The public API: :func:`run`, :class:`TaskSpec`, :data:`hookimpl`,
:class:`KsiError` and friends. Importing ``ksi`` imports nothing but the
version: each name is imported the first time it is used (module
``__getattr__``), so ``ksi --help`` and a plugin's ``import ksi`` stay quick.
Importing ``ksi`` loads no plugin either; plugins are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ksi._version import __version__

if TYPE_CHECKING:
    from ksi.errors import KsiError, TaskLoadError, UserInputError
    from ksi.hookspecs import hookimpl
    from ksi.models import EvalResult, Problem, TaskSpec
    from ksi.records import RunSummary

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

#: Public name -> the module that defines it.
_LAZY = {
    "EvalResult": "ksi.models",
    "Problem": "ksi.models",
    "TaskSpec": "ksi.models",
    "KsiError": "ksi.errors",
    "TaskLoadError": "ksi.errors",
    "UserInputError": "ksi.errors",
    "hookimpl": "ksi.hookspecs",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ksi' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def run(*args: Any, **kwargs: Any) -> RunSummary:
    """Run agents on tasks; see :func:`ksi.runs.api.run` for the arguments."""
    # start-up: `import ksi` imports only the version; the runner on first call
    from ksi.runs.api import run as _run

    return _run(*args, **kwargs)
