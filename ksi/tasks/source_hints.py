"""Which installed task source reads a file (or directory) the ``custom`` source does not.

A user who runs ``ksi run tasks.csv`` has a file of some other format; the
error names the installed task sources that say they read it (an optional
``file_suffixes`` class attribute, e.g. ``(".csv",)``), or else lists the
installed sources, so the fix (``--task-source NAME`` or installing a plugin)
is in the message. ``ksi run some/dir`` is the same with ``reads_directories``.
"""

from __future__ import annotations

from ksi.kinds import TASK_SOURCE
from ksi.plugins import registry
from ksi.registry import Registration


def _other_sources(besides: str) -> list[Registration] | None:
    try:
        return [reg for reg in registry(TASK_SOURCE) if reg.name != besides]
    except Exception:  # a broken plugin set must not hide the original problem
        return None


def _give(readers: list[Registration]) -> str:
    names = " or ".join(f"--task-source {reg.name}" for reg in readers)
    plugins = ", ".join(sorted({reg.plugin for reg in readers}))
    return f"give {names} (plugin {plugins})"


def sources_for_directory(*, besides: str = "custom") -> str:
    """A sentence naming the task sources that read a directory ("" when unsure)."""
    sources = _other_sources(besides)
    if sources is None:
        return ""
    readers = [reg for reg in sources if getattr(reg.obj, "reads_directories", False) is True]
    if readers:
        return f"; installed task sources that read a directory: {_give(readers)}"
    return (
        "; a task source from a plugin may read directories, and none installed does "
        "(`ksi plugins` lists them; `ksi install PLUGIN` adds one)"
    )


def sources_for_suffix(suffix: str, *, besides: str = "custom") -> str:
    """A sentence naming the task sources that read ``suffix`` files ("" when unsure)."""
    sources = _other_sources(besides)
    if sources is None:
        return ""
    suffix = suffix.lower()
    readers = [
        reg
        for reg in sources
        if suffix
        and suffix in tuple(s.lower() for s in getattr(reg.obj, "file_suffixes", ()) or ())
    ]
    if readers:
        return f"; installed task sources read {suffix} files: {_give(readers)}"
    if sources:
        listed = ", ".join(reg.name for reg in sources)
        return (
            f"; other installed task sources: {listed} (give --task-source NAME if one reads "
            f"this file; `ksi plugins` says what each adds)"
        )
    return "; no other task source is installed (`ksi install PLUGIN` adds one)"
