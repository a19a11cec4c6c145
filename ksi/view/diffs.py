"""Reading a ``diff.patch`` for display: each line's kind, and per-file counts.

The highlighter is this classification: the HTML template gives each kind a
colour, ``ksi show`` a rich style. It knows the lines
:mod:`ksi.attempt.diff` writes (git-style headers, hunks, ``\\ No newline``
markers, ``Binary files ... differ``, the ``# ksi:`` notes) and nothing more:
a line it does not recognise is context, shown as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

import attrs

from ksi.attempt.diff import header_path

LineKind = Literal["file", "meta", "hunk", "add", "del", "context", "note"]

_META_PREFIXES = (
    "--- ",
    "+++ ",
    "index ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "rename from",
    "rename to",
    "Binary files ",
    "\\ No newline",
)


class DiffLine(NamedTuple):
    """One line (a tuple: a diff has many, and the report builds them by the hundred thousand)."""

    kind: LineKind
    text: str


@attrs.frozen
class FileChange:
    """One file of a diff: its path and the lines added and removed (in what was read)."""

    path: str
    added: int = 0
    removed: int = 0
    binary: bool = False


def line_kind(line: str, *, in_hunk: bool) -> LineKind:
    """The kind of one diff line; ``in_hunk`` tells ``--- a`` (removed text) from a header."""
    if line.startswith("diff --git "):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("# ksi:"):
        return "note"
    if in_hunk:
        if line.startswith("+"):
            return "add"
        if line.startswith("-"):
            return "del"
        if line.startswith("\\"):
            return "meta"
        return "context"
    if line.startswith(_META_PREFIXES):
        return "meta"
    return "context"


def classify(text: str) -> list[DiffLine]:
    """Every line of ``text`` (a diff) with its kind."""
    lines: list[DiffLine] = []
    in_hunk = False
    for line in text.splitlines():
        kind = line_kind(line, in_hunk=in_hunk)
        if kind == "file":
            in_hunk = False
        elif kind == "hunk":
            in_hunk = True
        lines.append(DiffLine(kind, line))
    return lines


def file_changes(lines: Iterable[DiffLine]) -> list[FileChange]:
    """Per file: lines added and removed, from classified lines."""
    files: list[FileChange] = []
    path: str | None = None
    added = removed = 0
    binary = False
    for line in lines:
        if line.kind == "file":
            if path is not None:
                files.append(FileChange(path, added, removed, binary))
            path = header_path(line.text) or line.text[len("diff --git ") :]
            added = removed = 0
            binary = False
        elif line.kind == "add":
            added += 1
        elif line.kind == "del":
            removed += 1
        elif line.kind == "meta" and line.text.startswith("Binary files "):
            binary = True
    if path is not None:
        files.append(FileChange(path, added, removed, binary))
    return files
