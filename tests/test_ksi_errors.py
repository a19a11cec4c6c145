"""Every exception class KSI defines is a ``KsiError``: the CLI tells a deliberate error
(one line, its exit code) from a bug (a traceback) by that alone."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import ksi
from ksi.errors import KsiError

#: Not modules of their own: old paths that import another module, and the CLI entry.
_NOT_MODULES = ("ksi.runner", "ksi.__main__")


def test_every_exception_class_of_ksi_derives_from_ksi_error() -> None:
    strays = []
    for info in pkgutil.walk_packages(ksi.__path__, "ksi."):
        if info.name.startswith(_NOT_MODULES):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
                and not issubclass(obj, (KsiError, Warning))
            ):
                strays.append(f"{module.__name__}.{name}")
    assert strays == []
