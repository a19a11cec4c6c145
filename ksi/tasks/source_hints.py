"""Which installed task source reads a file the ``custom`` source does not.

A user who runs ``ksi run tasks.csv`` has a file of some other format; the
error names the installed task sources that say they read it (an optional
``file_suffixes`` class attribute, e.g. ``(".csv",)``), or else lists the
installed sources, so the fix (``--task-source NAME`` or installing a plugin)
is in the message.
"""

from __future__ import annotations

from ksi.plugins import registry


def sources_for_suffix(suffix: str, *, besides: str = "custom") -> str:
    """A sentence naming the task sources that read ``suffix`` files ("" when unsure)."""
    try:
        sources = [reg for reg in registry("task source") if reg.name != besides]
    except Exception:  # a broken plugin set must not hide the original problem
        return ""
    suffix = suffix.lower()
    readers = [
        reg
        for reg in sources
        if suffix
        and suffix in tuple(s.lower() for s in getattr(reg.obj, "file_suffixes", ()) or ())
    ]
    if readers:
        names = " or ".join(f"--task-source {reg.name}" for reg in readers)
        plugins = ", ".join(sorted({reg.plugin for reg in readers}))
        return f"; installed task sources read {suffix} files: give {names} (plugin {plugins})"
    if sources:
        listed = ", ".join(reg.name for reg in sources)
        return (
            f"; other installed task sources: {listed} (give --task-source NAME if one reads "
            f"this file; `ksi plugins` says what each adds)"
        )
    return "; no other task source is installed (`ksi install PLUGIN` adds one)"
