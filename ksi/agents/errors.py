"""Classifying how a coding-agent CLI run ended.

The runner acts on an attempt's status: ``rate_limited`` and ``overloaded``
attempts are retried with backoff (``--retries``); ``auth_error``,
``connection_error``, ``tools_refused``, ``budget_exceeded`` and ``error`` make
the attempt an unscored ``agent_error`` (reported apart from ordinary failures,
never retried; the first three stop the run from launching more, see
:mod:`ksi.runs.stops`, and a resume runs them again);
``context_exceeded`` is the agent's own failure and is graded like any other
attempt. Every CLI words these
errors differently, but they all pass on the provider's wording (HTTP status,
error type), so one ordered list of patterns covers them; each agent adds
what its own structured output says (e.g. Claude Code's ``error_max_turns``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from ksi.connection import CONNECTION_PATTERN
from ksi.models import AgentStatus

#: An HTTP status as CLIs print it ("status 429", "API Error: 529", "429 Too Many"),
#: never a bare number (which could be a token count).
_HTTP = r"(?:status|http|error|code)\W{{0,3}}(?:code\W{{0,3}})?{code}\b|(?-i:\b{code} [A-Z][a-z])"

#: (status, pattern) in priority order: the first match wins. Budget patterns
#: come before rate-limit ones because providers report an exhausted balance
#: as HTTP 429 too ("insufficient_quota"); context before auth because a
#: context error message can mention the API key's model. Connection failures
#: come last: a CLI that reached the provider and got an answer (401, 429...) says
#: so, and that answer is the reason, whatever it said of the retries before it.
_PATTERNS: tuple[tuple[AgentStatus, str], ...] = (
    (
        AgentStatus.CONTEXT_EXCEEDED,
        r"context[_ ]?length[_ ]?exceeded|context[_ ]?window[_ ]?exceeded"
        r"|exceeds? (?:the )?(?:model'?s? )?context (?:window|limit|length)"
        r"|prompt is too long|maximum context length|input is too long"
        r"|ContextWindowExceededError|too many tokens|token limit exceeded"
        r"|exceeds the [\d,]+ token limit|larger than the context window"
        r"|exceeds the maximum number of tokens",
    ),
    (
        AgentStatus.BUDGET_EXCEEDED,
        r"insufficient[_ ]quota|credit balance is too low|usage limit (?:reached|exceeded)"
        r"|hit your usage limit|exceeded your current quota|billing|payment required"
        r"|spend(?:ing)? limit|budget (?:limit|exceeded)|max(?:imum)?[_ ]budget"
        r"|LimitsExceeded|cost limit|requests per day|daily (?:quota|limit)",
    ),
    (
        AgentStatus.AUTH_ERROR,
        _HTTP.format(code="40[13]") + r"|unauthori[sz]ed|authentication[_ ]?(?:error|failed)"
        r"|invalid[_ ]?(?:x-)?api[_ ]?key|incorrect api key|api key not valid"
        r"|invalid bearer token|not logged in|please run /login|please log ?in"
        r"|permission[_ ]denied.*api|AuthenticationError|ProviderAuthError"
        r"|missing (?:an )?api key|no api key|api[_ ]key.*(?:not set|missing|required)",
    ),
    (
        AgentStatus.RATE_LIMITED,
        _HTTP.format(code="(?:429|529|503)") + r"|rate[_ ]?limit|too many requests|overloaded"
        r"|resource[_ ]?exhausted|RateLimitError|server(?:s)? (?:are|is) (?:down|busy)"
        r"|service unavailable|try again later|quota exceeded for quota metric",
    ),
    (AgentStatus.CONNECTION_ERROR, CONNECTION_PATTERN),
)


@functools.cache
def _compiled() -> tuple[tuple[AgentStatus, re.Pattern[str]], ...]:
    """:data:`_PATTERNS` compiled on first use (2 ms): only a failed attempt needs them."""
    return tuple((status, re.compile(pattern, re.IGNORECASE)) for status, pattern in _PATTERNS)


def classify_text(texts: Iterable[str]) -> AgentStatus | None:
    """The status the first matching error text implies, or ``None`` when nothing matches."""
    joined = "\n".join(t for t in texts if t)
    if not joined.strip():
        return None
    for status, pattern in _compiled():
        if pattern.search(joined):
            return status
    return None


def first_line(text: str, limit: int = 500) -> str:
    """A short, single-paragraph version of an error for the attempt record."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
