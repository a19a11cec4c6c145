"""The scoring contract shared by evaluators that grade with a command.

Kept apart from :mod:`ksi.eval.command` so that any evaluator that runs a
test command (on the host or inside an environment) scores exit codes and
``score.json`` files exactly the same way:

* exit 0 scores 1.0, any other exit scores 0.0;
* a ``score.json`` holding ``{"score": x}`` with ``0 <= x <= 1`` overrides
  the exit-code score;
* a ``score.json`` that cannot be used is ignored, and the reason is returned
  so it can be shown to the task author instead of vanishing;
* a ``score.json`` giving full marks to a command that failed is still the
  score, but :func:`score_conflict` says why it is suspect: the eval command
  runs the agent's code, and any code in its process tree (an imported
  module, a subprocess working in the same directory) can write that file.
  A process cannot tell its own code from code it imported, so KSI cannot
  know who wrote it; it can only say that the two verdicts disagree.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import attrs

SCORE_FILE = "score.json"
#: A score file larger than this is not read (a partial-credit score is a few bytes).
MAX_SCORE_FILE_BYTES = 64 * 1024


def score_from_exit_code(exit_code: int) -> float:
    """1.0 for a clean exit, 0.0 for anything else (including death by a signal)."""
    return 1.0 if exit_code == 0 else 0.0


def score_conflict(exit_code: int, score: float) -> str | None:
    """Why a ``score.json`` score is suspect, or ``None``: full marks from a failed command.

    Partial credit with a failing exit (``exit 1`` and ``0.5``) is the
    contract at work; full marks while the tests failed is what the agent's
    code would write to forge a grade.
    """
    if exit_code == 0 or score < 1.0:
        return None
    return (
        f"suspect: {SCORE_FILE} gave {score:g} but the eval command exited {exit_code}; "
        "code the eval command ran (the agent's, if it imports or runs it) may have "
        f"written it. --evaluator-option score_json=false lets the exit code alone decide"
    )


@attrs.frozen
class ScoreFile:
    """What a ``score.json`` said: a usable score, or why it was ignored.

    Neither (both ``None``) when there was no file at all, which is not a problem.
    """

    score: float | None = None
    problem: str | None = None


def read_score_file(workdir: Path) -> ScoreFile:
    """Read ``workdir/score.json`` as the eval command left it; never raises."""
    path = workdir / SCORE_FILE
    if not path.exists() and not path.is_symlink():
        return ScoreFile()
    where = f"{SCORE_FILE} ignored"
    if path.is_symlink() or not path.is_file():
        return ScoreFile(problem=f"{where}: it is not a regular file")
    try:
        size = path.stat().st_size
        if size > MAX_SCORE_FILE_BYTES:
            return ScoreFile(
                problem=f"{where}: {size} bytes is over the {MAX_SCORE_FILE_BYTES}-byte limit"
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return ScoreFile(problem=f"{where}: it is not UTF-8 text")
    except OSError as exc:
        return ScoreFile(problem=f"{where}: cannot read it ({exc.strerror or exc})")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return ScoreFile(
            problem=f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
        )
    except RecursionError:
        return ScoreFile(problem=f"{where}: its JSON is nested too deeply to read")
    except ValueError:  # the only other one: an integer over Python's 4300-digit limit
        return ScoreFile(problem=f"{where}: a number in it has more than 4300 digits")
    return _score_from_json(data)


def _score_from_json(data: object) -> ScoreFile:
    where = f"{SCORE_FILE} ignored"
    expected = 'expected an object like {"score": 0.5}'
    if not isinstance(data, dict):
        return ScoreFile(problem=f"{where}: {expected}, got a JSON {_json_type(data)}")
    if "score" not in data:
        return ScoreFile(problem=f'{where}: no "score" key; {expected}')
    value = data["score"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ScoreFile(
            problem=f'{where}: "score" must be a number from 0 to 1, got a JSON '
            f"{_json_type(value)} ({_short_json(value)})",
        )
    try:
        score = float(value)
    except OverflowError:  # an integer too large for a float is far above 1
        score = math.inf
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        return ScoreFile(
            problem=f'{where}: "score" must be between 0 and 1 inclusive, got {_short_json(value)}',
        )
    # -0.0 passes the range check; shown as "-0.00" it looks like a bug, so it is 0.0.
    return ScoreFile(score=score + 0.0)


def _short_json(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def remove_stale_score_file(workdir: Path) -> str | None:
    """Delete a ``score.json`` the eval command did not write; return a note when one existed.

    Whatever is there (a file, a symlink, even a directory) came from an
    earlier attempt or from the agent, and must not count as the eval
    command's verdict.
    """
    path = workdir / SCORE_FILE
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    else:
        return None
    return f"deleted a stale {SCORE_FILE} before running the eval command"
