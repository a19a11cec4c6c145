"""Showing text KSI did not write (task ids, eval output, plugin errors) on a terminal.

A task id like ``"x\\x1b[2J"`` or an eval command printing ``"\\x1b]0;owned\\x07"``
would otherwise clear the screen, retitle the window or (with some
terminals) do worse; a right-to-left override makes a line read differently
from what it holds. :func:`printable` shows every such character as a visible
escape (``\\x1b``, ``\\u202e``) instead; every place the CLI prints such text
goes through it. Rich output additionally passes cells as
:class:`rich.text.Text` so ``[brackets]`` in an id are never read as markup.
"""

from __future__ import annotations

import functools
import re

#: C0 controls except newline and tab, DEL, C1 controls, bidi controls, line and
#: paragraph separators, and lone surrogates (which cannot be written as UTF-8).
_UNSAFE_MULTILINE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
)
#: The same plus newline and tab: one table cell, one line.
_UNSAFE_LINE = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"


@functools.cache
def _unsafe(chars: str, ascii_only: bool) -> re.Pattern[str]:
    """The class of ``chars``, compiled on first use; for ASCII text only its ASCII part.

    The whole class takes 3 ms to compile (its ranges beyond Latin-1): a run that
    prints only ASCII never pays it.
    """
    if ascii_only:  # C0 controls and DEL
        chars = chars[: chars.index("\x7f") + 1]
    return re.compile(f"[{chars}]")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control character shown as an escape, safe for a terminal.

    With ``multiline`` newlines and tabs are kept (an eval's output tail);
    ``\\r\\n`` becomes ``\\n``. Without it the result is one line (a task id
    in a table). Ordinary text, any script, emoji included, is unchanged.
    """
    if multiline:
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        return _unsafe(_UNSAFE_MULTILINE, text.isascii()).sub(_escape, text)
    return _unsafe(_UNSAFE_LINE, text.isascii()).sub(_escape, text)
