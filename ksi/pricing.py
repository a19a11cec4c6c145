"""What tokens cost, when whoever spent them reported only the tokens.

Claude Code prints the cost of its run; Codex, Gemini CLI and the model APIs
(the ``model`` distiller's calls) give token counts only. Without a cost,
``--max-cost`` cannot see that spend, so KSI prices those tokens from a
maintained price table, the ``genai-prices`` package (``pip install
'ksi[pricing]'``; ``ksi[model]`` brings it too). Its bundled table is read,
never updated over the network, and the usage says the cost is an estimate
and from which table (``cost_estimated``, ``price_table``). A cost the agent
reported always wins: :func:`priced` leaves it as it is.

Without the package, or for a model the table does not know, nothing is
estimated: the cost stays unknown, as before, and ``--max-cost`` does not
count that spend.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import attrs

from ksi.models import Usage

if TYPE_CHECKING:
    from types import ModuleType

#: The package name, as pip knows it (messages, and the ``price_table`` it writes).
TABLE_PACKAGE = "genai-prices"


@attrs.frozen
class Estimate:
    """The estimated cost of some tokens, and the table it came from."""

    cost_usd: float
    #: ``"genai-prices 0.2.3"``: the package whose bundled table priced the tokens.
    table: str
    #: The model as the table knows it (``gpt-4o-mini`` for ``openai/gpt-4o-mini``).
    model: str


@functools.cache
def _table() -> ModuleType | None:
    """The ``genai_prices`` module, or None when it is not installed."""
    try:
        # optional (the pricing extra), and heavy: megabytes of prices, read on first use.
        import genai_prices
    except ImportError:
        return None
    return genai_prices


def table_version() -> str | None:
    """``"genai-prices 0.2.3"``, or None when the package is not installed."""
    table = _table()
    return None if table is None else f"{TABLE_PACKAGE} {table.__version__}"


def _candidates(model: str, provider: str | None) -> list[tuple[str, str | None]]:
    """``(model, provider)`` pairs to look up, most specific first.

    A ``provider/model`` name (litellm's, OpenCode's) names its provider; a
    provider hint (the API a call went to) comes next; the bare name, with the
    table guessing the provider, last, as a proxy may serve any provider's models.
    """
    pairs: list[tuple[str, str | None]] = []
    prefix, slash, rest = model.partition("/")
    if slash and rest:
        pairs.append((rest, prefix.lower()))
        model = rest
    if provider:
        pairs.append((model, provider))
    pairs.append((model, None))
    return list(dict.fromkeys(pairs))


def estimate(
    model: str | None,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    calls: int = 1,
    provider: str | None = None,
) -> Estimate | None:
    """What these tokens cost with ``model``, or None (no table, unknown model, no tokens).

    ``input_tokens`` are the *uncached* ones (KSI's usage convention). With
    ``calls`` > 1 the tokens are taken as spread evenly over that many model
    calls and each is priced on its own, so a model whose price rises with a
    request's size (long-context tiers) is not charged the top tier for a sum
    of small requests.
    """
    total_input = input_tokens + cache_read_tokens + cache_write_tokens
    if not model or total_input + output_tokens <= 0:
        return None  # before the table: loading it costs a run's first attempt 60 ms
    table = _table()
    if table is None:
        return None
    calls = max(calls, 1)
    # genai-prices counts cached tokens inside input_tokens (the OpenAI convention).
    usage: Any = table.Usage(
        input_tokens=total_input / calls if calls > 1 else total_input,
        output_tokens=output_tokens / calls if calls > 1 else output_tokens,
        cache_read_tokens=cache_read_tokens / calls if calls > 1 else cache_read_tokens,
        cache_write_tokens=cache_write_tokens / calls if calls > 1 else cache_write_tokens,
    )
    for name, provider_id in _candidates(model, provider):
        try:
            price = table.calc_price(usage, name, provider_id=provider_id)
        except (LookupError, ValueError):
            continue
        return Estimate(
            cost_usd=float(price.total_price) * calls,
            table=f"{TABLE_PACKAGE} {table.__version__}",
            model=str(price.model.id),
        )
    return None


def priced(usage: Usage, model: str | None, *, provider: str | None = None) -> Usage:
    """``usage`` with an estimated cost when it has tokens but no cost; else as it is."""
    if usage.cost_usd is not None:
        return usage  # a reported cost always wins
    found = estimate(
        model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        calls=usage.turns or 1,
        provider=provider,
    )
    if found is None:
        return usage
    return attrs.evolve(
        usage, cost_usd=found.cost_usd, cost_estimated=True, price_table=found.table
    )
