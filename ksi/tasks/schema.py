"""Reading and checking a ``custom`` tasks file, reporting every problem at once.

This module only reads: it parses the file, checks every record against the
schema in ``docs/your-own-tasks.md`` and returns clean :class:`TaskRecord`
values plus the list of :class:`~ksi.models.Problem` found. Turning records
into :class:`~ksi.models.TaskSpec` (and writing starting files) is
:mod:`ksi.tasks.custom`'s job.

Validation is hand-written rather than done with cattrs so that each problem
can name the field path (``$.eval.timeout_sec``), say what is expected and
suggest a fix. A record that needs no normalizing (the usual one) is checked
whole in one pass (:func:`plain_record`), and only a record that fails it goes
through the field-by-field checker that words its problems: loading 10,000
records costs about 2.05 times parsing their JSON.
"""

from __future__ import annotations

import codecs
import contextlib
import difflib
import gc
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeGuard, TypeVar

import attrs

from ksi.limits import MAX_TIMEOUT_SEC
from ksi.models import Problem
from ksi.relpaths import MAX_PATH_BYTES, clean_relative_path, is_clean_text
from ksi.task_parts import DEFAULT_EVAL_TIMEOUT_SEC
from ksi.tasks.source_hints import sources_for_directory, sources_for_suffix
from ksi.tasks.workspace_rules import path_length_problem, workspace_dir_problem

RECORD_KEYS = ("task_id", "prompt", "workspace_dir", "files", "eval", "solution")
EVAL_KEYS = ("command", "timeout_sec")
SOLUTION_KEYS = ("files", "command")

#: Suffixes read as one JSON array / as one record per line.
JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")

_RECORD_KEYSET = frozenset(RECORD_KEYS)
_EVAL_KEYSET = frozenset(EVAL_KEYS)
_SOLUTION_KEYSET = frozenset(SOLUTION_KEYS)


@attrs.frozen
class TaskRecord:
    """One valid record, normalized (paths cleaned, defaults filled in)."""

    task_id: str
    prompt: str
    #: ``line 7`` (JSONL) or ``record 3`` (JSON array), as used in problems.
    location: str
    #: Resolved starting directory, or ``None``.
    workspace_dir: Path | None
    #: Inline starting files (normalized relative path -> content), or ``None``.
    files: dict[str, str] | None
    eval_command: str
    eval_timeout_sec: float
    #: ``{"files": {...}, "command": "..."}`` with only the keys given, or ``None``.
    solution: dict[str, Any] | None


T = TypeVar("T")

#: What :func:`parse_tasks_file` makes of each clean record: called with the
#: fields of :class:`TaskRecord`, in its order (``TaskRecord`` itself by default).
MakeRecord = Callable[
    [str, str, str, "Path | None", "dict[str, str] | None", str, float, "dict[str, Any] | None"],
    T,
]


@attrs.frozen
class ParsedFile(Generic[T]):
    """The outcome of reading one tasks file: records if clean, problems otherwise."""

    records: list[T]
    problems: list[Problem]


def describe(value: Any) -> str:
    """A short rendering of a JSON value for 'got ...' in messages."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # pragma: no cover - only JSON values arrive here
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unknown_key_message(key: str, valid: tuple[str, ...], where: str) -> str:
    msg = f"unknown key {key!r} {where}"
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    msg += f"; did you mean {close[0]!r}?" if close else "."
    return msg + f" Valid keys: {', '.join(valid)}"


class _RecordChecker:
    """Checks one record; collects problems with the record's location and id."""

    def __init__(self, display: str, location: str, base_dir: Path) -> None:
        self.display = display
        self.location = location
        self.base_dir = base_dir
        self.task_id: str | None = None
        self.problems: list[Problem] = []

    def add(self, field: str, message: str) -> None:
        self.problems.append(Problem(self.display, message, self.location, self.task_id, field))

    # -- scalar helpers ------------------------------------------------------
    def text(self, value: Any, field: str, what: str) -> str | None:
        """A non-blank string, or ``None`` after recording a problem."""
        if not isinstance(value, str):
            self.add(field, f"must be a string ({what}), got {describe(value)}")
            return None
        if not value.strip():
            self.add(field, f"must not be empty ({what})")
            return None
        if not is_clean_text(value):
            self.add(
                field,
                "contains an unpaired UTF-16 surrogate escape (\\udXXX); "
                "remove it or use the real character",
            )
            return None
        return value

    def unknown_keys(self, obj: dict[str, Any], valid: tuple[str, ...], prefix: str) -> None:
        where = "in the record" if prefix == "$" else f"in {prefix}"
        for key in obj:
            if key not in valid:
                self.add(
                    f"{prefix}.{key}" if _simple(key) else f"{prefix}[{describe(key)}]",
                    _unknown_key_message(key, valid, where),
                )

    def files(self, value: Any, field: str) -> dict[str, str] | None:
        """A ``{relative/path: content}`` map, normalized; ``None`` after a problem."""
        if not isinstance(value, dict):
            self.add(
                field,
                "must be an object mapping relative file paths to their "
                f'contents, e.g. {{"main.py": "print(1)\\n"}}; got {describe(value)}',
            )
            return None
        ok = True
        out: dict[str, str] = {}
        for raw_path, content in value.items():
            if (
                len(raw_path) <= MAX_PATH_BYTES
                and _PLAIN_PATH.match(raw_path)
                and raw_path not in out
                and isinstance(content, str)
                and (content.isascii() or is_clean_text(content))
            ):
                out[raw_path] = content  # the common case, checked in one regex
                continue
            key_field = f"{field}[{describe(raw_path)}]"
            path = self._rel_path(raw_path, key_field)
            if not isinstance(content, str):
                self.add(
                    key_field,
                    f"file content must be a string (the file's text), got {describe(content)}",
                )
                ok = False
            elif not is_clean_text(content):
                self.add(
                    key_field,
                    "file content contains an unpaired UTF-16 surrogate "
                    "escape (\\udXXX); it cannot be written as UTF-8",
                )
                ok = False
            if path is None:
                ok = False
                continue
            if path in out:
                self.add(
                    key_field, f"names the same file as another entry ({path!r}); keep one of them"
                )
                ok = False
                continue
            if isinstance(content, str):
                out[path] = content
        if not ok:
            return None
        # A path cannot be both a file and a directory ("a" and "a/b").
        for path in out:
            cut = path.rfind("/")
            while cut > 0:
                parent = path[:cut]
                cut = path.rfind("/", 0, cut)
                if parent in out:
                    self.add(
                        f"{field}[{describe(path)}]",
                        f"{parent!r} is listed as a file, so it cannot also be a "
                        "directory; rename one of them",
                    )
                    ok = False
                    break
        return out if ok else None

    def _rel_path(self, raw: str, field: str) -> str | None:
        path, why = clean_relative_path(raw)
        if why:
            self.add(field, why)
            return None
        return path


#: A relative path that needs no normalizing: components of ordinary characters,
#: not starting with a dot, at most 64 characters each.
_PLAIN_PATH = re.compile(
    r"[\w\-+@,=~][\w\-+@,=~.]{0,63}(?:/[\w\-+@,=~][\w\-+@,=~.]{0,63})*\Z", re.ASCII
)


def _simple(key: str) -> bool:
    return key.isidentifier()


def _plain_text(value: Any) -> TypeGuard[str]:
    """A non-blank string that can be written as UTF-8 (what :meth:`_RecordChecker.text` wants)."""
    return (
        type(value) is str
        and bool(value)
        and not value.isspace()
        and (value.isascii() or is_clean_text(value))
    )


def _plain_files(value: Any, known: dict[str, tuple[str, ...]]) -> TypeGuard[dict[str, str]]:
    """Files :meth:`_RecordChecker.files` would keep as they are: plain paths to text, no path
    both a file and a directory. ``known`` maps the paths already found plain to their parent
    directories: most tasks of a file share most of their paths, and a dict lookup costs a
    tenth of the pattern."""
    if type(value) is not dict:
        return False
    for path, content in value.items():
        parents = known.get(path)
        if parents is None:
            if not (type(path) is str and len(path) <= MAX_PATH_BYTES and _PLAIN_PATH.match(path)):
                return False
            parents = known[path] = _parents(path)
        if type(content) is not str or not (content.isascii() or is_clean_text(content)):
            return False
        for parent in parents:
            if parent in value:
                return False
    return True


def _parents(path: str) -> tuple[str, ...]:
    """``a/b/c`` -> ``("a/b", "a")``: the directories a file path needs."""
    out = []
    cut = path.rfind("/")
    while cut > 0:
        out.append(path[:cut])
        cut = path.rfind("/", 0, cut)
    return tuple(out)


def plain_record(
    raw: Any, known: dict[str, tuple[str, ...]]
) -> tuple[str, str, dict[str, str] | None, str, float, dict[str, Any] | None] | None:
    """``(task_id, prompt, files, eval command, eval timeout, solution)`` of a valid record
    that needs no normalizing (no ``workspace_dir``, plain paths), checked in one pass; None
    for any other record, which :func:`check_record` then checks field by field.

    Accepts exactly what :func:`check_record` accepts unchanged, so the two
    agree on every record this returns. ``known``: the file paths found plain
    so far (shared by the records of one file).
    """
    if type(raw) is not dict or not raw.keys() <= _RECORD_KEYSET:
        return None
    task_id, prompt = raw.get("task_id"), raw.get("prompt")
    if not (_plain_text(task_id) and _plain_text(prompt)) or raw.get("workspace_dir") is not None:
        return None
    files = raw.get("files")
    if files is not None and not _plain_files(files, known):
        return None
    command, timeout = "", DEFAULT_EVAL_TIMEOUT_SEC
    spec = raw.get("eval")
    if spec is not None:
        if type(spec) is not dict or not spec.keys() <= _EVAL_KEYSET:
            return None
        given = spec.get("command")
        if not _plain_text(given):
            return None
        command = given
        if "timeout_sec" in spec:
            value = spec["timeout_sec"]
            if type(value) not in (int, float) or not 0 < value <= MAX_TIMEOUT_SEC:
                return None  # also NaN, infinity and bools
            timeout = float(value)
    solution = raw.get("solution")
    if solution is not None:
        if type(solution) is not dict or not solution.keys() <= _SOLUTION_KEYSET:
            return None
        sol_files, sol_command = solution.get("files"), solution.get("command")
        if sol_files is None and sol_command is None:
            return None
        if sol_files is not None and not _plain_files(sol_files, known):
            return None
        if sol_command is not None and not _plain_text(sol_command):
            return None
        if len(solution) != (sol_files is not None) + (sol_command is not None):
            solution = {k: v for k, v in solution.items() if v is not None}  # "files": null
    return task_id, prompt, files, command, timeout, solution


def check_record(
    raw: Any, display: str, location: str, base_dir: Path
) -> tuple[TaskRecord | None, list[Problem]]:
    """Check one parsed JSON value; return the clean record or the problems."""
    c = _RecordChecker(display, location, base_dir)
    if not isinstance(raw, dict):
        hint = ""
        if isinstance(raw, list):
            hint = " (a JSON array of records belongs in a .json file, not .jsonl)"
        c.add(
            "$",
            "each task record must be a JSON object like "
            '{"task_id": "...", "prompt": "..."}, got ' + describe(raw) + hint,
        )
        return None, c.problems

    raw_id = raw.get("task_id")
    if "task_id" not in raw:
        c.add("$.task_id", 'is required: add "task_id": "<a unique name>" to the record')
        task_id = None
    else:
        task_id = c.text(raw_id, "$.task_id", "a unique name for the task")
    c.task_id = task_id

    c.unknown_keys(raw, RECORD_KEYS, "$")

    if "prompt" not in raw:
        c.add("$.prompt", 'is required: add "prompt": "<the instruction for the agent>"')
        prompt = None
    else:
        prompt = c.text(raw["prompt"], "$.prompt", "the instruction shown to the agent")

    workspace_dir = _workspace_dir(c, raw.get("workspace_dir"))
    files = None
    if raw.get("files") is not None:
        files = c.files(raw["files"], "$.files")
    if raw.get("workspace_dir") is not None and raw.get("files") is not None:
        c.add(
            "$",
            "sets both 'files' and 'workspace_dir'; they are mutually exclusive: "
            "keep one way of giving starting files",
        )

    eval_command, timeout = _eval(c, raw.get("eval"))
    solution = _solution(c, raw.get("solution"))

    if c.problems or task_id is None or prompt is None:
        return None, c.problems
    return TaskRecord(
        task_id, prompt, location, workspace_dir, files, eval_command, timeout, solution
    ), []


def _workspace_dir(c: _RecordChecker, value: Any) -> Path | None:
    if value is None:
        return None
    text = c.text(
        value, "$.workspace_dir", "a directory of starting files, relative to the tasks file"
    )
    if text is None:
        return None
    if "\x00" in text:
        c.add("$.workspace_dir", "must not contain a NUL character")
        return None
    too_long = path_length_problem(text, "the path")
    if too_long:
        c.add("$.workspace_dir", too_long)
        return None
    try:
        path = (c.base_dir / Path(text).expanduser()).resolve()
        is_dir = path.is_dir()
        exists = is_dir or path.exists()
    except (OSError, RuntimeError) as exc:
        c.add("$.workspace_dir", f"cannot be read ({exc}): {text!r}")
        return None
    if not is_dir:
        what = "is not a directory" if exists else "does not exist"
        c.add(
            "$.workspace_dir",
            f"{describe(text)} {what} (resolved to {str(path)!r}, "
            "relative to the tasks file); create it or fix the path",
        )
        return None
    refused = workspace_dir_problem(text, path, c.base_dir)
    if refused:
        c.add("$.workspace_dir", refused)
        return None
    return path


def _timeout(c: _RecordChecker, value: Any, field: str) -> float | None:
    msg = "must be a number > 0"
    hint = " (seconds, e.g. 300)"
    if isinstance(value, bool) or not isinstance(value, int | float):
        c.add(field, f"{msg}, got {describe(value)}{hint}")
        return None
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        c.add(field, f"{msg}, got {describe(value)}{hint}")
        return None
    if seconds > MAX_TIMEOUT_SEC:
        c.add(
            field,
            f"must be at most {MAX_TIMEOUT_SEC:g} seconds (7 days), got {describe(value)}; "
            "give a shorter timeout",
        )
        return None
    return seconds


def _eval(c: _RecordChecker, value: Any) -> tuple[str, float]:
    if value is None:
        return "", DEFAULT_EVAL_TIMEOUT_SEC
    if not isinstance(value, dict):
        c.add(
            "$.eval",
            'must be an object like {"command": "python3 test_x.py", '
            f'"timeout_sec": 300}}, got {describe(value)}',
        )
        return "", DEFAULT_EVAL_TIMEOUT_SEC
    c.unknown_keys(value, EVAL_KEYS, "$.eval")
    command = ""
    if "command" not in value:
        c.add(
            "$.eval.command",
            "is required when 'eval' is given: the shell command "
            "that grades the workspace (omit 'eval' entirely for an unscored task)",
        )
    else:
        command = c.text(value["command"], "$.eval.command", "a shell command") or ""
    timeout = DEFAULT_EVAL_TIMEOUT_SEC
    if "timeout_sec" in value:
        timeout = _timeout(c, value["timeout_sec"], "$.eval.timeout_sec") or timeout
    return command, timeout


def _solution(c: _RecordChecker, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        c.add(
            "$.solution",
            'must be an object like {"files": {"main.py": "..."}} and/or '
            f'{{"command": "..."}}, got {describe(value)}',
        )
        return None
    c.unknown_keys(value, SOLUTION_KEYS, "$.solution")
    out: dict[str, Any] = {}
    if value.get("files") is not None:
        files = c.files(value["files"], "$.solution.files")
        if files is not None:
            out["files"] = files
    if value.get("command") is not None:
        command = c.text(value["command"], "$.solution.command", "a shell command run in repo/")
        if command is not None:
            out["command"] = command
    if value.get("files") is None and value.get("command") is None:
        c.add(
            "$.solution",
            "needs 'files' (written into repo/) and/or 'command' (run in "
            "repo/); remove 'solution' if the task has none",
        )
    return out


# -- reading the file -------------------------------------------------------------


def _decode_error_problem(
    display: str,
    data: bytes,
    exc: UnicodeDecodeError,
    line_offset: int = 0,
    location: str | None = None,
) -> Problem:
    start = exc.start
    line = data.count(b"\n", 0, start) + 1 + line_offset
    col = start - (data.rfind(b"\n", 0, start) + 1) + 1
    return Problem(
        display,
        f"is not valid UTF-8 text (byte 0x{data[start]:02x} at column {col}); "
        "save the file as UTF-8",
        location if location is not None else f"line {line}",
    )


def _json_error(display: str, exc: ValueError, line: int | None, jsonl: bool) -> Problem:
    if isinstance(exc, json.JSONDecodeError):
        where = f"line {line if line is not None else exc.lineno}"
        msg = f"invalid JSON at column {exc.colno}: {exc.msg}"
        if not jsonl and exc.msg == "Extra data":
            msg += " (one record per line? then name the file .jsonl)"
        return Problem(display, msg, where)
    message = str(exc)
    if "integer string conversion" in message:
        message = "a number has more than 4300 digits"
    return Problem(display, f"invalid JSON: {message}", f"line {line}" if line else "")


def _loads(text: str) -> Any:
    return json.loads(text)


#: The JSON decoder's scanner: one value from an index, ``(value, end)`` (typeshed omits it).
#: Reading a JSONL line with it skips ``json.loads``'s per-call overhead (a third of a short
#: record's time); a line that does not start with its value, or has text after it, goes to
#: ``json.loads`` for the value or the exact error.
_SCAN_ONCE: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def read_raw_records(path: Path, display: str) -> tuple[Iterable[tuple[str, Any]], list[Problem]]:
    """Parse ``path`` into ``(location, value)`` pairs; problems for what cannot be parsed.

    A ``.jsonl`` file's lines are parsed as the pairs are iterated, and its lines'
    problems join the list as they are met: read it once the pairs are exhausted. So a
    loader checks, builds and frees each record while it is fresh in the CPU's caches
    rather than walking 10,000 of them three times (7% of loading them).
    """
    suffix = path.suffix.lower()
    if path.is_dir():
        return [], [
            Problem(
                display,
                "is a directory; the custom source reads a .json or .jsonl tasks file"
                + sources_for_directory(),
            )
        ]
    if suffix not in JSON_SUFFIXES + JSONL_SUFFIXES:
        return [], [
            Problem(
                display,
                f"unsupported file type {suffix or '(no suffix)'!r}: "
                "a tasks file of the custom source must end in .json (one JSON array of "
                "records) or .jsonl (one record per line)" + sources_for_suffix(suffix),
            )
        ]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], [Problem(display, "tasks file does not exist; check the path")]
    except OSError as exc:
        return [], [Problem(display, f"cannot read tasks file: {exc.strerror or exc}")]
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    if not data or data.isspace():  # not data.strip(): that copies the whole file
        return [], [
            Problem(
                display, "tasks file is empty; add at least one record with 'task_id' and 'prompt'"
            )
        ]
    if suffix in JSONL_SUFFIXES:
        return _read_jsonl(data, display)
    return _read_json(data, display)


def _read_json(data: bytes, display: str) -> tuple[list[tuple[str, Any]], list[Problem]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [_decode_error_problem(display, data, exc)]
    try:
        value = _loads(text)
    except RecursionError:
        return [], [Problem(display, "JSON is nested too deeply to read")]
    except ValueError as exc:
        return [], [_json_error(display, exc, None, jsonl=False)]
    if not isinstance(value, list):
        return [], [
            Problem(
                display,
                "a .json tasks file must hold a JSON array of task "
                f"records, got {describe(value)} (for one record per line, "
                "name the file .jsonl)",
            )
        ]
    if not value:
        return [], [Problem(display, "tasks file holds no records; add at least one")]
    return [(f"record {i}", v) for i, v in enumerate(value, start=1)], []


def _read_jsonl(data: bytes, display: str) -> tuple[Iterator[tuple[str, Any]], list[Problem]]:
    problems: list[Problem] = []
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        # Decode line by line so one bad line does not hide the others.
        lines = []
        for n, raw_line in enumerate(data.split(b"\n"), start=1):
            try:
                lines.append(raw_line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                problems.append(_decode_error_problem(display, raw_line, exc, location=f"line {n}"))
                lines.append("")
    return _jsonl_records(lines, display, problems), problems


def _jsonl_records(
    lines: list[str], display: str, problems: list[Problem]
) -> Iterator[tuple[str, Any]]:
    """Each line's record in turn, its problem added to ``problems`` instead."""
    found = False
    scan = _SCAN_ONCE
    for n, line in enumerate(lines, start=1):
        if line[:1] != "{" and not line.strip(" \t\r"):
            continue
        try:
            try:  # _loads_line, inlined: a call per line is a tenth of a short record's time
                value, end = scan(line, 0)
            except StopIteration:
                value, end = json.loads(line), len(line)
            if end != len(line) and line[end:].strip():
                value = json.loads(line)
        except RecursionError:
            problems.append(Problem(display, "JSON is nested too deeply to read", f"line {n}"))
            continue
        except ValueError as exc:
            problems.append(_json_error(display, exc, n, jsonl=True))
            continue
        found = True
        yield f"line {n}", value
    if not found and not problems:
        problems.append(
            Problem(display, "tasks file has only blank lines; add at least one record")
        )


def parse_tasks_file(
    path: Path, display: str | None = None, make: MakeRecord[Any] = TaskRecord
) -> ParsedFile[Any]:
    """Read and check a whole tasks file; every problem is returned, none raised.

    Each clean record becomes ``make(task_id, prompt, location, workspace_dir,
    files, eval_command, eval_timeout_sec, solution)`` (a :class:`TaskRecord`
    by default; a loader builds its tasks directly, with no record in between).
    """
    display = display if display is not None else str(path)
    with _gc_paused():
        return _parse(path, display, make)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a file's tasks are built, and none over them after.

    Loading builds tens of thousands of objects and frees none, so each
    collection would walk them all again for nothing (a sixth of loading
    10,000 tasks). Once they are built, they go straight to the oldest
    generation (``freeze`` then ``unfreeze``: two list splices, no walk), where
    only a full collection looks at them: otherwise the first two collections
    after the load walk them on their way there (about 2 ms each for 10,000
    tasks, the first one within the load). Whatever else was young at that
    moment moves up with them and is still collected, by the next full one.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
        gc.freeze()
        gc.unfreeze()
    finally:
        gc.enable()


def _parse(path: Path, display: str, make: MakeRecord[Any]) -> ParsedFile[Any]:
    raw_records, problems = read_raw_records(path, display)
    base_dir = path.resolve().parent
    records: list[Any] = []
    first_seen: dict[str, str] = {}
    known: dict[str, tuple[str, ...]] = {}
    for location, raw in raw_records:
        plain = plain_record(raw, known)
        checked: TaskRecord | None = None
        if plain is not None:
            task_id, prompt, files, command, timeout, solution = plain
            if task_id not in first_seen:
                first_seen[task_id] = location
                records.append(
                    make(task_id, prompt, location, None, files, command, timeout, solution)
                )
                continue
            raw_id: Any = task_id  # a duplicate: said below
        else:
            checked, found = check_record(raw, display, location, base_dir)
            problems.extend(found)
            raw_id = raw.get("task_id") if isinstance(raw, dict) else None
        if isinstance(raw_id, str) and raw_id.strip():
            task_id = raw_id
            if task_id in first_seen:
                problems.append(
                    Problem(
                        display,
                        f"duplicate task_id (first used at {first_seen[task_id]}); "
                        "task ids must be unique within the file",
                        location,
                        task_id,
                        "$.task_id",
                    )
                )
                checked = None
            else:
                first_seen[task_id] = location
        if checked is not None:
            records.append(make(*attrs.astuple(checked, recurse=False)))
    problems.sort(key=_problem_order)
    return ParsedFile(records if not problems else [], problems)


def _problem_order(problem: Problem) -> int:
    """Problems in file order (line or record number); whole-file problems first."""
    _, _, number = problem.location.partition(" ")
    return int(number) if number.isdigit() else 0
