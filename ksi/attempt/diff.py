"""The attempt's ``diff.patch``: what the agent changed, as a git-style unified diff.

It compares the seed (the task's starting files) with the *captured* repo
(what was graded), so the patch shows exactly the work that counted. It is
made with :mod:`difflib` in-process: no ``git`` or ``diff`` on the host, no
subprocess per file.

Format, close to ``git diff`` so reviewers and tools read it as they expect:
``diff --git a/x b/x`` headers, ``new file mode``/``deleted file mode``/
``old mode``/``new mode`` lines, ``--- a/x``/``+++ b/x`` (``/dev/null`` for
an added or removed side), ``\\ No newline at end of file`` markers, and
``Binary files a/x and b/x differ`` for files with a NUL byte in their first
8000 bytes (git's rule). Text is decoded as UTF-8 with replacement characters,
so the patch is always valid UTF-8 (file names keep their raw bytes).
Symlinks are shown as git shows them: their target is the content.

Bounded on both ends: a file over :data:`MAX_TEXT_DIFF_BYTES` on either side
gets a one-line note instead of a line diff (difflib is slow on huge inputs),
and the patch stops at ``max_bytes`` with a final ``# ksi: diff truncated``
line; :class:`DiffStats` still counts every change.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

from ksi.attempt.capture import same_file_content, walk_tree

#: Default cap on the size of one diff.patch (5 MiB).
DEFAULT_MAX_DIFF_BYTES = 5 * 1024 * 1024
#: Files larger than this on either side are reported, not line-diffed.
MAX_TEXT_DIFF_BYTES = 1024 * 1024
#: git looks for a NUL byte in this many leading bytes to call a file binary.
_BINARY_SNIFF = 8000

TRUNCATION_MARK = "# ksi: diff truncated"


_HEADER = "diff --git a/"


def header_path(line: str) -> str | None:
    """The path a ``diff --git a/P b/P`` line of a ``diff.patch`` names, or ``None``.

    ``write_diff`` writes the same path on both sides, so the header is split at its
    middle, which stays right for a path that itself holds ``" b/"``. Readers of
    ``diff.patch`` (the notes' files touched, the viewer's per-file counts) ask here
    rather than parsing the header their own way.
    """
    if not line.startswith(_HEADER):
        return None
    rest = line[len(_HEADER) :].rstrip("\n")
    half = (len(rest) - 3) // 2
    if half > 0 and rest[half : half + 3] == " b/" and rest[:half] == rest[half + 3 :]:
        return rest[:half]
    return None


@attrs.frozen
class DiffStats:
    """Counts over every change, including any past the truncation point."""

    files_changed: int
    insertions: int
    deletions: int
    truncated: bool = False
    #: The patch's first bytes, as many as the writer asked to keep.
    head: bytes = b""


@attrs.frozen
class _Entry:
    path: str
    is_link: bool
    mode: int
    size: int

    @property
    def git_mode(self) -> str:
        if self.is_link:
            return "120000"
        return "100755" if self.mode & 0o111 else "100644"


def write_diff(
    seed: Path,
    captured: Path,
    out: Path,
    *,
    max_bytes: int = DEFAULT_MAX_DIFF_BYTES,
    keep_head: int = 0,
) -> DiffStats:
    """Write the unified diff from ``seed`` to ``captured`` into ``out``.

    A missing ``seed`` or ``captured`` directory counts as empty. ``.pyc``
    files and ``__pycache__`` directories are ignored on both sides, as
    capture drops them. Nothing changed, no file: ``out`` is only written
    when there is a difference (and an older ``out`` is removed). The returned stats
    hold the file's first ``keep_head`` bytes (its evidence, without reading it back).
    """
    old = _scan(os.fspath(seed))
    new = _scan(os.fspath(captured))
    files = insertions = deletions = 0
    written = 0
    truncated = False
    patch = _Patch(Path(out), keep_head)
    try:
        for rel in sorted(old.keys() | new.keys()):
            chunk, ins, dels = _file_diff(rel, old.get(rel), new.get(rel))
            if not chunk:
                continue
            files += 1
            insertions += ins
            deletions += dels
            if truncated:
                continue
            data = chunk.encode("utf-8", "surrogateescape")
            if written + len(data) <= max_bytes:
                patch.write(data)
                written += len(data)
                continue
            cut = data[: max(0, max_bytes - written)]
            patch.write(cut[: cut.rfind(b"\n") + 1])
            truncated = True
        if truncated:
            patch.write(
                f"{TRUNCATION_MARK} at {max_bytes} bytes; the attempt's diff stats count"
                " every change\n".encode()
            )
    finally:
        patch.close()
    return DiffStats(files, insertions, deletions, truncated, bytes(patch.head))


class _Patch:
    """``diff.patch``, created at its first byte: an attempt that changed nothing has none."""

    def __init__(self, path: Path, keep_head: int = 0) -> None:
        self.path = path
        self.fh: BinaryIO | None = None
        self.keep_head = keep_head
        self.head = bytearray()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a stale patch must not stand for this diff

    def write(self, data: bytes) -> None:
        if self.fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fh = open(self.path, "wb")  # noqa: SIM115 (closed by close())
        self.fh.write(data)
        if len(self.head) < self.keep_head:
            self.head += data[: self.keep_head - len(self.head)]

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


def _scan(root: str) -> dict[str, _Entry]:
    """Regular files and symlinks under ``root`` by relative path (symlinks not followed)."""
    found: dict[str, _Entry] = {}
    for rel, entry in walk_tree(root):
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            found[rel] = _Entry(entry.path, stat.S_ISLNK(st.st_mode), st.st_mode, st.st_size)
    return found


def _file_diff(rel: str, old: _Entry | None, new: _Entry | None) -> tuple[str, int, int]:
    """One file's patch text and its +/- line counts; ``""`` when unchanged."""
    if old is not None and new is not None and old.is_link != new.is_link:
        # git shows a type change as a deletion then an addition.
        gone, _, dels = _file_diff(rel, old, None)
        came, ins, _ = _file_diff(rel, None, new)
        return gone + came, ins, dels
    if old is not None and new is not None and _unchanged(old, new):
        return "", 0, 0
    head = f"{_HEADER}{rel} b/{rel}\n"
    if old is None and new is not None:
        head += f"new file mode {new.git_mode}\n"
    elif new is None and old is not None:
        head += f"deleted file mode {old.git_mode}\n"
    elif old is not None and new is not None and old.git_mode != new.git_mode:
        head += f"old mode {old.git_mode}\nnew mode {new.git_mode}\n"
    a_name = f"a/{rel}" if old is not None else "/dev/null"
    b_name = f"b/{rel}" if new is not None else "/dev/null"
    too_big = [e.size for e in (old, new) if e is not None and e.size > MAX_TEXT_DIFF_BYTES]
    if too_big:
        return (
            (
                head
                + f"Files {a_name} and {b_name} differ (too large to diff: {max(too_big)} bytes)\n"
            ),
            0,
            0,
        )
    a = _read(old)
    b = _read(new)
    if a is None or b is None:
        return head + f"Files {a_name} and {b_name} differ (unreadable)\n", 0, 0
    if b"\0" in a[:_BINARY_SNIFF] or b"\0" in b[:_BINARY_SNIFF]:
        return head + f"Binary files {a_name} and {b_name} differ\n", 0, 0
    if a == b:
        return head, 0, 0  # a mode-only change, or an empty file added/removed
    body, ins, dels = _unified(_lines(a), _lines(b), a_name, b_name)
    return head + body, ins, dels


def _unchanged(old: _Entry, new: _Entry) -> bool:
    if old.git_mode != new.git_mode:
        return False
    if old.is_link:
        try:
            return os.readlink(old.path) == os.readlink(new.path)
        except OSError:
            return False
    return same_file_content(old.path, new.path, old.size, new.size)


def _read(entry: _Entry | None) -> bytes | None:
    if entry is None:
        return b""
    try:
        if entry.is_link:
            return os.fsencode(os.readlink(entry.path))
        with open(entry.path, "rb") as fh:
            return fh.read(MAX_TEXT_DIFF_BYTES + 1)
    except OSError:
        return None


def _lines(data: bytes) -> list[str]:
    """Split on ``\\n`` only (``str.splitlines`` would also split on form feeds)."""
    parts = data.decode("utf-8", "replace").split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _unified(a: list[str], b: list[str], a_name: str, b_name: str) -> tuple[str, int, int]:
    out: list[str] = []
    ins = dels = 0
    for i, line in enumerate(_diff_lines(a, b, a_name, b_name)):
        if i >= 2:  # after the ---/+++ header
            if line.startswith("+"):
                ins += 1
            elif line.startswith("-"):
                dels += 1
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out), ins, dels


def _diff_lines(a: list[str], b: list[str], a_name: str, b_name: str) -> Iterator[str]:
    return difflib.unified_diff(a, b, a_name, b_name)
