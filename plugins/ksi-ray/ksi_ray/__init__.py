"""KSI's ``ray`` executor: attempts run on the nodes of a Ray cluster, each exactly once."""

from typing import Any


def __getattr__(name: str) -> Any:
    """``__version__`` on first use: ``importlib.metadata`` costs every ``ksi`` command ~15 ms.

    KSI imports this package whenever it loads its plugins (``ksi --help`` too), while only
    a worker's version check reads the version.
    """
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("ksi-ray")
    except PackageNotFoundError:  # imported from a checkout that is not installed
        found = "0.0.0+checkout"
    globals()["__version__"] = found
    return found
