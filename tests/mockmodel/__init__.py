"""A scripted mock model server for end-to-end tests of real agent CLIs (see ``server.py``)."""

from __future__ import annotations

from .server import (
    EXHAUSTED,
    MODEL_CALL,
    RATE_LIMITED,
    UNAUTHORIZED,
    Answer,
    Dialect,
    Hang,
    HttpError,
    MockModel,
    MockUsage,
    Reply,
    Request,
    Served,
    Step,
    ToolCall,
    tool_call_id,
)


def all_dialects() -> list[Dialect]:
    """Every dialect this package has, in routing order (one module each)."""
    from . import anthropic, gemini

    found: list[Dialect] = [anthropic.DIALECT, gemini.DIALECT]
    for optional in ("openai_chat", "openai_responses"):  # added on their own branch
        try:
            module = __import__(f"{__name__}.{optional}", fromlist=["DIALECT"])
        except ModuleNotFoundError:
            continue
        found.append(module.DIALECT)
    return found


__all__ = [
    "EXHAUSTED",
    "MODEL_CALL",
    "RATE_LIMITED",
    "UNAUTHORIZED",
    "Answer",
    "Dialect",
    "Hang",
    "HttpError",
    "MockModel",
    "MockUsage",
    "Reply",
    "Request",
    "Served",
    "Step",
    "ToolCall",
    "all_dialects",
    "tool_call_id",
]
