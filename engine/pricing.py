"""What an LLM call costs in dollars: a price per model, per million tokens — input, cached input,
cache writes and output — and the price of a call's tokens (cached prompt tokens priced as
cached, those written to a prompt cache as written).

The table is configurable: an agent's configuration gives prices of its own (`AgentConfig.prices`),
which override the examples below, model by model. A model with no price has no cost — `None`,
never zero, so a turn on an unpriced model says "cost unknown" rather than "free".

`EXAMPLE_PRICES` are example list prices, copied by hand from the providers' public pricing pages
as they stood on 2025-06-01 (no network was used to check them since). They are there so that a
cost shows out of the box; check them against the current pricing page, and set the prices you
actually pay in the agent's configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

PER_TOKENS = 1_000_000  # prices are per this many tokens
_SNAPSHOT_DATE = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class ModelPrice(BaseModel):
    """Dollars per 1M tokens. `cached_input` prices the prompt tokens a provider's prompt cache
    served (OpenAI's `cached_tokens`, Bedrock's `cacheReadInputTokens`); `cache_write` those a
    request wrote to it (Bedrock's `cacheWriteInputTokens`: Anthropic's models charge 1.25 times
    the input price for them). Left out, either costs as much as any input token."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def cost(
        self,
        prompt_tokens: int,
        cached_prompt_tokens: int,
        completion_tokens: int,
        cache_write_tokens: int = 0,
    ) -> float:
        """Dollars for one call: its prompt tokens read from the cache at the cached price, those
        written to it at the cache-write price, the others at the input price, its completion
        tokens at the output price."""
        cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
        written = min(max(cache_write_tokens, 0), prompt_tokens - cached)
        cached_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write is None else self.cache_write
        dollars = (
            (prompt_tokens - cached - written) * self.input
            + cached * cached_price
            + written * write_price
            + completion_tokens * self.output
        )
        return dollars / PER_TOKENS


# Example list prices (USD per 1M tokens) as published on 2025-06-01 — examples to check, not
# quotes. OpenAI: platform.openai.com/docs/pricing; Bedrock: aws.amazon.com/bedrock/pricing
# (us-east-1, on demand; cached input = the cache-read price; cache write = Anthropic's 1.25 times
# the input price).
EXAMPLE_PRICES: dict[str, ModelPrice] = {
    # infra/offline's model runs in-process: it has no per-token price (a real figure, not a guess)
    "offline-heuristic": ModelPrice(input=0.0, cached_input=0.0, output=0.0),
    "gpt-4o-mini": ModelPrice(input=0.15, cached_input=0.075, output=0.60),
    "gpt-4o": ModelPrice(input=2.50, cached_input=1.25, output=10.00),
    "gpt-4.1-mini": ModelPrice(input=0.40, cached_input=0.10, output=1.60),
    "gpt-4.1-nano": ModelPrice(input=0.10, cached_input=0.025, output=0.40),
    "gpt-4.1": ModelPrice(input=2.00, cached_input=0.50, output=8.00),
    "anthropic.claude-3-5-haiku-20241022-v1:0": ModelPrice(
        input=0.80, cached_input=0.08, cache_write=1.00, output=4.00
    ),
    "anthropic.claude-3-7-sonnet-20250219-v1:0": ModelPrice(
        input=3.00, cached_input=0.30, cache_write=3.75, output=15.00
    ),
    "amazon.nova-micro-v1:0": ModelPrice(input=0.035, cached_input=0.00875, output=0.14),
    "amazon.nova-lite-v1:0": ModelPrice(input=0.06, cached_input=0.015, output=0.24),
    "amazon.nova-pro-v1:0": ModelPrice(input=0.80, cached_input=0.20, output=3.20),
}


class PriceTable:
    """Prices by model id: the examples, overridden by the agent's own."""

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None) -> None:
        self.prices: dict[str, ModelPrice] = dict(EXAMPLE_PRICES if prices is None else prices)

    def with_overrides(self, prices: Mapping[str, ModelPrice]) -> PriceTable:
        return PriceTable({**self.prices, **prices})

    def price(self, model: str) -> ModelPrice | None:
        """The model's price. A dated snapshot the provider answers with (`gpt-4o-mini-2024-07-18`)
        costs what its model does unless priced itself, and so does a Bedrock cross-region
        inference profile (`us.anthropic…`)."""
        for name in (model, _SNAPSHOT_DATE.sub("", model)):
            found = self.prices.get(name)
            if found is None and name.count(".") >= 2:
                found = self.prices.get(name.split(".", 1)[1])
            if found is not None:
                return found
        return None

    def cost(
        self,
        model: str,
        prompt_tokens: int,
        cached_prompt_tokens: int,
        completion_tokens: int,
        cache_write_tokens: int = 0,
    ) -> float | None:
        """Dollars for one call of `model`, or None when the table has no price for it."""
        price = self.price(model)
        if price is None:
            return None
        return price.cost(
            prompt_tokens, cached_prompt_tokens, completion_tokens, cache_write_tokens
        )


def format_dollars(dollars: float | None) -> str:
    """`$0.00123` (five decimals: a turn costs fractions of a cent), or "cost unknown"."""
    if dollars is None:
        return "cost unknown"
    return f"${dollars:.5f}"
