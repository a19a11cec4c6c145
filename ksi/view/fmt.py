"""How the views write numbers: scores, shares, money, durations, sizes (one place for all)."""

from __future__ import annotations

#: What a missing figure shows (an en dash).
NONE = "\u2013"


def score(value: float | None) -> str:
    return NONE if value is None else f"{value:.2f}"


def signed(value: float | None) -> str:
    return NONE if value is None else f"{value:+.2f}"


def pct(value: float | None) -> str:
    return NONE if value is None else f"{value:.0%}"


def money(value: float | None) -> str:
    return NONE if value is None else f"${value:.4f}"


def secs(value: float | None) -> str:
    """``3.2 s`` under a minute, ``4m 05s`` under an hour, ``2h 03m`` beyond."""
    if value is None:
        return NONE
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(int(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {seconds:02d}s"


def size(value: int) -> str:
    if value < 1024:
        return f"{value} B"
    if value < 1024 * 1024:
        return f"{value / 1024:.1f} KB"
    return f"{value / (1024 * 1024):.1f} MB"


def num(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


def usage_reported(tokens: int, cost: float | None) -> bool:
    """The one rule for "not reported": no token and no cost (a 0 would claim a count)."""
    return bool(tokens) or cost is not None


def tokens(value: int, cost: float | None) -> str:
    """A token count, or the dash when the agent reported no usage at all."""
    return num(value) if usage_reported(value, cost) else NONE
