"""The one rule for where a task may put a file: a relative path inside ``repo/``.

Starting files (``files``) and reference solutions (``solution.files``) both
name files to write under ``repo/``; the loader and the ``oracle`` agent (for
hand-built tasks) check them with this same function, so both accept and
refuse the same paths with the same words.
"""

from __future__ import annotations

#: Longest file name most filesystems accept.
MAX_NAME_BYTES = 255
#: Longest path under ``repo/``: the system's PATH_MAX (4096) less 1024 bytes for
#: the run directory in front of it (``<run>/attempts/<task>/<n>/workspace/repo/``).
MAX_PATH_BYTES = 3072
_HINT = 'use a relative path such as "src/main.py"'


def is_clean_text(text: str) -> bool:
    """False for strings holding lone surrogates (valid JSON, not writable as UTF-8)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_relative_path(raw: str) -> tuple[str, str]:
    """``(normalized path, "")`` for a usable path, or ``("", why not, with the fix)``.

    Backslashes count as separators, ``.`` and empty components are dropped.
    """
    if not raw.strip():
        return "", f"file path must not be empty; {_HINT}"
    if raw.startswith(("/", "\\")) or (
        len(raw) > 2 and raw[0].isalpha() and raw[1] == ":" and raw[2] in "/\\"
    ):
        return "", f"file path must be relative to repo/, got absolute path {raw!r}; {_HINT}"
    if "\x00" in raw or not is_clean_text(raw):
        return "", f"file path contains a NUL character or an unpaired surrogate; {_HINT}"
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        return "", f"file path must stay inside repo/: '..' is not allowed; {_HINT}"
    if not parts:
        return "", f"file path {raw!r} names no file; {_HINT}"
    for part in parts:
        if len(part) > 63 and len(part.encode("utf-8")) > MAX_NAME_BYTES:
            return "", (
                f"file name {part[:20]!r}... is longer than {MAX_NAME_BYTES} bytes; shorten it"
            )
    path = "/".join(parts)
    size = len(path.encode("utf-8"))
    if size > MAX_PATH_BYTES:
        return "", (
            f"file path is {size} bytes long, over the {MAX_PATH_BYTES}-byte limit (the "
            f"system's 4096-byte PATH_MAX less room for the run directory); shorten it"
        )
    return path, ""
