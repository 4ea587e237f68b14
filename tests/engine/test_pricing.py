"""The cost of a turn in dollars: prices per model (cached prompt tokens priced as cached), the
agent's own prices over the examples, and an unpriced model's cost unknown — never zero."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine.agent_config import AgentConfig, LLMPurpose
from engine.authoring.serialized import load_agent
from engine.errors import LLMError
from engine.llm import TurnLLM
from engine.ports import Generation, Usage
from engine.pricing import EXAMPLE_PRICES, ModelPrice, PriceTable, format_dollars
from engine.trace import LLMCallRecord, TurnTrace, explain, summarize

PRICE = ModelPrice(input=2.0, cached_input=0.5, output=8.0)


def _trace(*calls: LLMCallRecord) -> TurnTrace:
    return TurnTrace(
        turn_id="t1", session_id="s1", agent_id="a", agent_version="v", llm_calls=list(calls)
    )


def test_cached_prompt_tokens_cost_the_cached_price_and_the_rest_the_input_price() -> None:
    uncached = PRICE.cost(prompt_tokens=10_000, cached_prompt_tokens=0, completion_tokens=500)
    cached = PRICE.cost(prompt_tokens=10_000, cached_prompt_tokens=8_192, completion_tokens=500)

    assert uncached == pytest.approx((10_000 * 2.0 + 500 * 8.0) / 1e6)
    assert cached == pytest.approx((1_808 * 2.0 + 8_192 * 0.5 + 500 * 8.0) / 1e6)
    assert cached < uncached
    # a price without a cached rate charges cached tokens as any input token
    flat = ModelPrice(input=2.0, output=8.0)
    assert flat.cost(10_000, 8_192, 500) == pytest.approx(uncached)
    # more cached tokens than prompt tokens (a provider's miscount) never makes a call cheaper
    assert PRICE.cost(100, 1_000, 0) == pytest.approx(100 * 0.5 / 1e6)


def test_tokens_written_to_a_prompt_cache_cost_the_cache_write_price() -> None:
    """Bedrock's cache points: Anthropic's models charge a write to the cache above input."""
    claude = ModelPrice(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0)
    written = claude.cost(2_000, 0, 100, cache_write_tokens=1_500)
    read = claude.cost(2_000, 1_500, 100)

    assert written == pytest.approx((500 * 3.0 + 1_500 * 3.75 + 100 * 15.0) / 1e6)
    assert read == pytest.approx((500 * 3.0 + 1_500 * 0.3 + 100 * 15.0) / 1e6)
    # without a write price, a written token costs what any input token does
    assert PRICE.cost(2_000, 0, 100, 1_500) == PRICE.cost(2_000, 0, 100)
    # reads and writes never count more tokens than the prompt has
    assert claude.cost(1_000, 800, 0, 900) == pytest.approx((800 * 0.3 + 200 * 3.75) / 1e6)
    table = PriceTable()
    sonnet = "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
    assert table.cost(sonnet, 2_000, 0, 100, 1_500) == pytest.approx(written)
    record = LLMCallRecord(
        purpose="select_journey_node",
        schema_name="S",
        model=sonnet,
        prompt_tokens=2_000,
        cache_write_tokens=1_500,
        completion_tokens=100,
        cost_usd=written,
    )
    assert any("(1500 written to cache)" in line for line in explain(_trace(record)))


def test_an_unknown_model_has_no_cost_and_the_turn_says_so() -> None:
    table = PriceTable()
    assert table.cost("my-own-finetune", 1_000, 0, 100) is None
    priced = LLMCallRecord(purpose="compose", schema_name="S", model="gpt-4o-mini", cost_usd=0.001)
    unpriced = LLMCallRecord(purpose="match_guidelines", schema_name="S", model="my-own-finetune")
    trace = _trace(priced, unpriced)

    assert trace.cost_usd is None  # not 0.001: one call's cost is unknown
    [llm_line] = [line for line in summarize(trace) if line.startswith("llm:")]
    assert llm_line.endswith("cost unknown (no price for my-own-finetune)")
    assert any("on my-own-finetune" in line and "cost unknown" in line for line in explain(trace))
    assert _trace(priced).cost_usd == pytest.approx(0.001)
    assert format_dollars(None) == "cost unknown" and format_dollars(0.0012) == "$0.00120"


def test_a_dated_snapshot_or_a_cross_region_profile_costs_what_its_model_does() -> None:
    table = PriceTable()
    assert table.price("gpt-4o-mini-2024-07-18") == EXAMPLE_PRICES["gpt-4o-mini"]
    profile = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
    assert table.price(profile) == EXAMPLE_PRICES["anthropic.claude-3-5-haiku-20241022-v1:0"]
    assert table.price("gpt-4o-mini-turbo") is None  # a name that merely starts alike is not it


class _Answer(BaseModel):
    ok: bool = True


class _CachingLLM:
    """An adapter reporting what a provider with a prompt cache reports."""

    async def generate(self, prompt: str, schema: type[_Answer], *, model: str) -> Generation:
        usage = Usage(prompt_tokens=4_000, completion_tokens=50, cached_prompt_tokens=3_072)
        return Generation(value=schema(), usage=usage, model=model, latency_ms=1.0)


async def test_each_call_is_priced_by_the_agents_own_prices_over_the_examples() -> None:
    config = AgentConfig(
        models={LLMPurpose.COMPOSE: "gpt-4o"},
        default_model="gpt-4o-mini",
        prices={"gpt-4o-mini": ModelPrice(input=1.0, cached_input=0.1, output=2.0)},
    )
    trace = _trace()
    llm = TurnLLM(_CachingLLM(), config, trace)

    await llm.generate(LLMPurpose.MATCH_GUIDELINES, "match?", _Answer)
    await llm.generate(LLMPurpose.COMPOSE, "reply?", _Answer)

    matching, compose = trace.llm_calls
    assert matching.cached_prompt_tokens == 3_072
    assert matching.cost_usd == pytest.approx((928 * 1.0 + 3_072 * 0.1 + 50 * 2.0) / 1e6)
    assert compose.cost_usd == EXAMPLE_PRICES["gpt-4o"].cost(4_000, 3_072, 50)  # the example
    assert trace.cost_usd == pytest.approx(matching.cost_usd + compose.cost_usd)
    assert trace.cached_prompt_tokens == 6_144
    [llm_line] = [line for line in summarize(trace) if line.startswith("llm:")]
    assert "8000 prompt (6144 cached) + 100 completion tokens" in llm_line
    assert llm_line.endswith(format_dollars(trace.cost_usd))


def test_an_agent_document_sets_its_prices_in_its_config() -> None:
    document = {
        "agent": {
            "id": "priced",
            "name": "Priced",
            "config": {
                "default_model": "our-model",
                "prices": {"our-model": {"input": 0.2, "cached_input": 0.05, "output": 0.8}},
            },
        },
        "guidelines": [{"condition": "The customer greets you", "action": "Greet them back"}],
    }
    agent = load_agent(document)
    assert agent.config.prices == {
        "our-model": ModelPrice(input=0.2, cached_input=0.05, output=0.8)
    }
    # an agent that sets no prices keeps the version it was published under
    assert "prices" not in AgentConfig().model_dump(exclude_defaults=True)


class _FailingLLM:
    """An adapter whose every request fails for good (no usage comes back)."""

    async def generate(self, prompt: str, schema: type[_Answer], *, model: str) -> Generation:
        raise LLMError("the provider refused the request")


async def test_a_failed_call_on_a_priced_model_costs_its_reported_tokens_not_an_unknown() -> None:
    trace = _trace()
    llm = TurnLLM(_FailingLLM(), AgentConfig(default_model="gpt-4o-mini"), trace)

    with pytest.raises(LLMError):
        await llm.generate(LLMPurpose.MATCH_GUIDELINES, "match?", _Answer)

    [failed] = trace.llm_calls
    assert failed.error and failed.prompt_tokens == 0
    assert failed.cost_usd == 0.0  # priced at the tokens it reported: a failure is no unknown
    assert trace.cost_usd == 0.0
