"""Bounds on values users give KSI, in a module light enough for the CLI to import."""

from __future__ import annotations

#: The longest timeout KSI accepts where a user gives one (7 days). ``poll`` takes
#: milliseconds in a C int, so a wait of more than ~24.8 days cannot be asked for
#: in one call; every place a timeout enters refuses more than this.
MAX_TIMEOUT_SEC = 7 * 24 * 3600.0


def timeout_problem(value: object, shown: object = None) -> str | None:
    """Why ``value`` is not a usable timeout in seconds (None when it is).

    The one rule for every place a timeout enters (tasks file, ``--timeout``,
    evaluator options): a finite number > 0 and at most :data:`MAX_TIMEOUT_SEC`.
    The message says ``got <shown>`` (``value`` unless given).
    """
    got = f"got {value if shown is None else shown!r}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number of seconds > 0, {got}"
    try:
        seconds = float(value)
    except OverflowError:
        seconds = float("inf")
    if seconds != seconds or seconds <= 0:
        return f"must be a number of seconds > 0, {got}"
    if seconds > MAX_TIMEOUT_SEC:
        return (
            f"must be at most {MAX_TIMEOUT_SEC:g} seconds (7 days), {got}; give a shorter timeout"
        )
    return None
