"""Bounded, display-safe pieces of files an attempt wrote (logs, prompt, diff).

A report never inlines a log in full: an agent that printed a gigabyte must
not make a gigabyte page. :func:`read_excerpt_inside` reads at most ``limit`` bytes
(the head of a diff or a prompt, where the story starts; the tail of a log,
where it ends), cuts at a line boundary when one is near, and says how much
was left out, so the page can say so next to a link to the whole file.

Every excerpt goes through :func:`ksi.text.printable`: control characters
(ANSI colour codes, a terminal title escape, a right-to-left override) are
shown as visible escapes such as ``\\x1b[31m``, never passed on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Literal

import attrs

from ksi.fstree import open_file_inside
from ksi.text import printable

#: How far from the cut a line boundary is looked for (bytes).
_LINE_SLACK = 512


@attrs.frozen
class Excerpt:
    """What part of a file is shown."""

    text: str
    #: The file's size in bytes (0 when it is missing).
    size: int
    #: Bytes of the file ``text`` comes from.
    shown: int
    #: ``head``: the start is shown; ``tail``: the end is shown.
    end: Literal["head", "tail"] = "head"
    exists: bool = True

    @property
    def cut(self) -> bool:
        return self.shown < self.size

    @property
    def omitted(self) -> int:
        return self.size - self.shown


MISSING = Excerpt(text="", size=0, shown=0, exists=False)


def read_excerpt_inside(
    root: Path | str, rel: str, limit: int, *, end: Literal["head", "tail"] = "head"
) -> Excerpt:
    """At most ``limit`` bytes of ``root/rel`` (its start or its end), as printable text.

    A missing or unreadable file gives :data:`MISSING`; bad UTF-8 is replaced,
    never an error (an agent's output is whatever it printed). A run directory
    may come from someone else: a file of an attempt that is a link (or sits
    below one) is :data:`MISSING` too, never followed out of the run.
    """
    try:
        fd = open_file_inside(root, rel)
    except OSError:
        return MISSING
    with os.fdopen(fd, "rb") as fh:
        try:
            return _excerpt(fh, limit, end)
        except OSError:
            return MISSING


def _excerpt(fh: BinaryIO, limit: int, end: Literal["head", "tail"]) -> Excerpt:
    limit = max(0, limit)
    size = os.fstat(fh.fileno()).st_size
    if size <= limit:
        data = fh.read(limit)
    elif end == "head":
        data = fh.read(limit)
        cut = data.rfind(b"\n", max(0, limit - _LINE_SLACK))
        if cut != -1:
            data = data[: cut + 1]
    else:
        fh.seek(size - limit)
        data = fh.read(limit)
        cut = data.find(b"\n", 0, _LINE_SLACK)
        if cut != -1:
            data = data[cut + 1 :]
    text = data.decode("utf-8", errors="replace")
    return Excerpt(
        text=printable(text, multiline=True), size=size, shown=len(data), end=end, exists=True
    )


def text_excerpt(text: str, limit: int, *, end: Literal["head", "tail"] = "head") -> Excerpt:
    """The same for text already in memory (an eval output tail kept in the record)."""
    data = text.encode("utf-8", errors="surrogatepass")
    size = len(data)
    if size > limit:
        data = data[:limit] if end == "head" else data[size - limit :]
    shown = data.decode("utf-8", errors="replace")
    return Excerpt(text=printable(shown, multiline=True), size=size, shown=len(data), end=end)
