"""One look for every command's help: arguments written as NAME, never ``{NAME}``.

Recent typer releases print a required argument as ``{run_dir}`` in the
usage line and a repeatable one's type as ``<list[str]>``; neither is what a
user types, and both clash with the ``KEY=VALUE``/``NAME`` metavars of the
options beside them. :func:`plain_help` rewrites a command (and its
subcommands) to print ``RUN_DIR`` and ``PACKAGE...`` instead. Older typer
releases already do, so the override only changes what they would not call. A group's
command list shows each summary whole (wrapped), never cut short with "...".
"""

from __future__ import annotations

from typing import Any

import typer.core


class _PlainArgument(typer.core.TyperArgument):
    """A typer argument shown as ``NAME``/``[NAME]``/``NAME...`` in usage, no list type."""

    def _usage_display_name(self) -> str:
        name = str(self.metavar or self.name or "").upper()
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return name if self.required else f"[{name}]"

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.nargs != 1:
            return None  # "PACKAGE..." already says it repeats
        return str(super().display_type_rich(ctx) or "") or None


def plain_help(command: Any) -> Any:
    """``command`` with its arguments (and its subcommands') shown the plain way."""
    for param in getattr(command, "params", ()):
        if type(param) is typer.core.TyperArgument:
            param.__class__ = _PlainArgument
    for sub in (getattr(command, "commands", None) or {}).values():
        plain_help(sub)
        if not getattr(sub, "short_help", None) and getattr(sub, "help", None):
            # A group lists its commands by summary: the whole first paragraph, never cut.
            sub.short_help = first_paragraph(sub.help)
    return command


def first_paragraph(text: str) -> str:
    """A help text's first paragraph on one line (a command's summary)."""
    return " ".join(text.strip().split("\n\n")[0].split())
