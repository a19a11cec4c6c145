"""Data nested too deeply to parse: saying which field, on which line.

Python's ``json`` and ``tomllib`` parse nested arrays and tables by
recursion, so a file holding 100,000 ``[`` raises ``RecursionError``, which
``ksi`` would otherwise report as a bug in itself. A task file comes from
someone else and an answer file from the agent: both are input to judge,
never a reason to crash. A reader catches ``RecursionError`` from the parser
and calls :func:`json_depth_problem` or :func:`toml_depth_problem`, which
scan the text without recursion and name the field whose value is nested
too deeply (``$.train[0].input[0]...``) and its line, so the problem reads
like every other one in the file.
"""

from __future__ import annotations

import re

import attrs

#: How many components of the path to a too-deep value a message names.
SHOWN_COMPONENTS = 6

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]', re.DOTALL)
_TOML_TOKENS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""'
    r"|'''.*?'''"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*'"
    r"|#[^\n]*"
    r"|\n|[\[\]{}=,.]|[A-Za-z0-9_-]+",
    re.DOTALL,
)
_BARE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@attrs.frozen
class TooDeep:
    """Where a document's nesting is deepest: the field holding it and its line."""

    #: Path of the deepest value, its first :data:`SHOWN_COMPONENTS` components
    #: (``$.train[0].input[0][0][0]...``).
    field: str
    line: int
    depth: int

    @property
    def message(self) -> str:
        return (
            f"nested {self.depth:,} levels deep (line {self.line}), too deep to read; "
            "no task or answer needs more than a few levels"
        )


def _field(frames: list[list[object]], depth: int) -> str:
    text = "$"
    for kind, label in frames[:SHOWN_COMPONENTS]:
        if kind == "a":
            text += f"[{label}]"
        elif isinstance(label, str):
            text += f".{label}" if _BARE_KEY.match(label) else f"[{label!r}]"
    return text + ("..." if depth > SHOWN_COMPONENTS else "")


class _Deepest:
    """The containers open at the scan's position, and the deepest point seen.

    ``base`` frames name where the value sits (a TOML table and key) and do
    not count towards its depth.
    """

    def __init__(self, base: list[list[object]]) -> None:
        self.frames: list[list[object]] = [list(f) for f in base]
        self.base = len(base)
        self.depth = 0
        self.best: list[list[object]] = [list(f) for f in base[:SHOWN_COMPONENTS]]
        self.best_pos = 0

    def open(self, kind: str, pos: int) -> None:
        self.frames.append([kind, 0 if kind == "a" else None])
        depth = len(self.frames) - self.base
        if depth > self.depth:
            self.depth = depth
            self.best = [list(f) for f in self.frames[:SHOWN_COMPONENTS]]
            self.best_pos = pos

    def close(self) -> None:
        if len(self.frames) > self.base:
            self.frames.pop()

    @property
    def top(self) -> list[object] | None:
        return self.frames[-1] if len(self.frames) > self.base else None

    def found(self, text: str) -> TooDeep:
        line = text.count("\n", 0, self.best_pos) + 1
        return TooDeep(_field(self.best, self.base + self.depth), line, self.depth)


def json_depth_problem(text: str) -> TooDeep:
    """Where the JSON ``text`` nests deepest (call it when the parser gave up)."""
    scan = _Deepest([])
    expect_key = False
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        top = scan.top
        if token in ("[", "{"):
            scan.open("a" if token == "[" else "o", match.start())
            expect_key = token == "{"
        elif token in ("]", "}"):
            scan.close()
            expect_key = False
        elif token == ",":
            if top is not None and top[0] == "a":
                top[1] = int(str(top[1])) + 1
            expect_key = top is not None and top[0] == "o"
        elif token.startswith('"') and expect_key and top is not None:
            top[1] = token[1:-1]
            expect_key = False
    return scan.found(text)


def _key_text(token: str) -> str:
    return token[1:-1] if token[:1] in ("'", '"') else token


def toml_depth_problem(text: str) -> TooDeep:
    """Where the TOML ``text`` nests deepest (call it when the parser gave up).

    Table headers (``[a.b]``) and keys (``key =``, also inside inline tables)
    name the path; array indices follow.
    """
    table: list[str] = []
    key: list[str] = []
    header: list[str] = []
    in_header = False
    line_start = True
    scan: _Deepest | None = None
    deepest: _Deepest | None = None
    for match in _TOML_TOKENS.finditer(text):
        token = match.group()
        if token.startswith("#"):
            continue
        if scan is not None:  # inside the value of `key =`
            top = scan.top
            if token in ("[", "{"):
                scan.open("a" if token == "[" else "o", match.start())
            elif top is None:
                if token == "\n":
                    if deepest is None or scan.depth > deepest.depth:
                        deepest = scan
                    scan, key, line_start = None, [], True
            elif token in ("]", "}"):
                scan.close()
            elif token == ",":
                top[1] = int(str(top[1])) + 1 if top[0] == "a" else None
            elif top[0] == "o" and top[1] is None and token not in ("=", ".", "\n"):
                top[1] = _key_text(token)
            continue
        if token == "\n":
            line_start, key, in_header = True, [], False
        elif in_header:
            if token == "]":
                table = list(header)
            elif token not in ("[", "."):
                header.append(_key_text(token))
        elif line_start and token == "[":
            in_header, header, line_start = True, [], False
        elif token == "=":
            scan = _Deepest([["o", part] for part in (*table, *key)])
        else:
            line_start = False
            if token != ".":
                key.append(_key_text(token))
    if scan is not None and (deepest is None or scan.depth > deepest.depth):
        deepest = scan
    return deepest.found(text) if deepest is not None else TooDeep("$", 1, 0)
