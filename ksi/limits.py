"""Bounds on values users give KSI, in a module light enough for the CLI to import."""

from __future__ import annotations

import math

#: The longest timeout KSI accepts where a user gives one (7 days). ``poll`` takes
#: milliseconds in a C int, so a wait of more than ~24.8 days cannot be asked for
#: in one call; every place a timeout enters refuses more than this.
MAX_TIMEOUT_SEC = 7 * 24 * 3600.0

#: The most attempts per task a run takes (``--attempts``): pass@k needs tens, not
#: millions, and a typo of a billion would otherwise plan (and journal) forever.
MAX_ATTEMPTS = 10_000

#: The most generations a run takes (``--generations``): learning shows in a handful and
#: a long study takes tens; a typo of a million would plan, run and distil without end
#: (and the attempt numbers of generation g grow with g times ``--attempts``).
MAX_GENERATIONS = 1_000


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


def cost_problem(value: object) -> str | None:
    """Why ``value`` is not a usable spending limit in USD (None when it is).

    ``nan`` compares false with every spend, so it would switch the budget off
    while the run said it had one; ``inf`` is no budget either: leave it out.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number of dollars > 0, got {value!r}"
    if not math.isfinite(value) or value <= 0:
        return f"must be a finite number of dollars > 0, got {value!r} (no limit: leave it out)"
    return None
