"""A model that stays rate-limited (a 429 after the turn's retries): with `defer_rate_limited`
the turn ends with `ModelRateLimited` and commits nothing; without it, and for every other
model failure, the fallback reply as before."""

from __future__ import annotations

import pytest

from engine.compose import ComposedReply
from engine.errors import LLMTransientError, ModelRateLimited, is_rate_limit
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.own_lines import FALLBACK_REPLY
from engine.sessions.session import EventKind, InboundMessage
from engine.testing import ScriptedLLM
from engine.toolkit import ToolResult, tool
from engine.tools.calls import ToolCallPlan
from tests.engine.pipeline_kit import Harness, compose_echo, make_agent, match_when, tool_harness

GREETING = Guideline(id="g", condition="the customer greets", action="Greet them back")


def rate_limited(retry_after: float = 0.01) -> LLMTransientError:
    return LLMTransientError("429 Rate limit reached", status=429, retry_after=retry_after)


def deferring(llm: ScriptedLLM) -> Harness:
    """An engine that defers rate-limited turns (the deployments' default)."""
    h = Harness(make_agent(guidelines=[GREETING]), llm, index=False)
    h.engine.pipeline.defer_rate_limited = True
    return h


def test_only_a_429_is_the_rate_limit_signal() -> None:
    assert is_rate_limit(rate_limited())
    assert not is_rate_limit(LLMTransientError("503", status=503))
    assert not is_rate_limit(LLMTransientError("timed out"))
    assert not is_rate_limit(RuntimeError("429"))


async def test_a_rate_limited_turn_is_deferred_and_leaves_the_session_as_it_was() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, rate_limited(retry_after=0.25))
    llm.on(ComposedReply, compose_echo)
    h = deferring(llm)
    await h.start()
    before = await h.sessions.load("s1")

    with pytest.raises(ModelRateLimited) as raised:
        await h.say("hello")

    assert raised.value.retry_after == 0.25
    assert await h.sessions.load("s1") == before  # no event, no reply, no state change
    # Matching was retried within the turn (3 attempts), then nothing more was asked of the
    # rate-limited model: composing the reply would have been thrown away.
    assert len(llm.calls_for(GuidelineMatchBatch)) == 3
    assert llm.calls_for(ComposedReply) == []


async def test_the_deferred_message_is_answered_once_the_model_has_room() -> None:
    llm = ScriptedLLM()
    llm.on(
        GuidelineMatchBatch,
        rate_limited(),
        rate_limited(),
        rate_limited(),
        match_when({"greets": True}),
    )
    llm.on(ComposedReply, compose_echo)
    h = deferring(llm)
    await h.start()
    message = InboundMessage(event_id="tg-1", text="hello")

    with pytest.raises(ModelRateLimited):
        await h.engine.handle("s1", [message])
    out = await h.engine.handle("s1", [message])  # the queue delivers it again

    messages = [e for e in out.state.events if e.kind is EventKind.MESSAGE]
    assert [m.text for m in messages] == ["hello", "Greet them back"]
    assert not out.reply.data.get("fallback")


async def test_a_rate_limited_reply_is_deferred_too() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"greets": True}))
    llm.on(ComposedReply, rate_limited())
    h = deferring(llm)
    await h.start()
    before = await h.sessions.load("s1")

    with pytest.raises(ModelRateLimited):
        await h.say("hello")

    assert await h.sessions.load("s1") == before
    assert len(llm.calls_for(ComposedReply)) == 3


async def test_a_429_that_clears_within_the_turn_is_answered_normally() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, rate_limited(), match_when({"greets": True}))
    llm.on(ComposedReply, compose_echo)
    h = deferring(llm)
    await h.start()

    out = await h.say("hello")

    assert out.reply is not None and out.reply.text == "Greet them back"


@pytest.mark.parametrize(
    "failure",
    [
        LLMTransientError("503 from the provider", status=503, retry_after=0.01),
        LLMTransientError("request timed out", retry_after=0.01),
    ],
    ids=["5xx", "timeout"],
)
async def test_other_model_failures_still_give_the_fallback_reply(
    failure: LLMTransientError,
) -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, failure)
    llm.on(ComposedReply, failure)
    h = deferring(llm)
    await h.start()

    out = await h.say("hello")

    messages = [e for e in out.state.events if e.kind is EventKind.MESSAGE]
    assert [m.text for m in messages] == ["hello", FALLBACK_REPLY]


async def test_without_deferral_a_rate_limited_turn_gives_the_fallback_reply() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, rate_limited())
    llm.on(ComposedReply, rate_limited())
    h = Harness(make_agent(guidelines=[GREETING]), llm, index=False)
    await h.start()

    out = await h.say("hello")

    messages = [e for e in out.state.events if e.kind is EventKind.MESSAGE]
    assert [m.text for m in messages] == ["hello", FALLBACK_REPLY]
    assert llm.calls_for(ComposedReply)  # every call is still tried, as before


ORDERS: list[str] = []


@tool(description="look up an order")
def order_status(order: str) -> ToolResult:
    ORDERS.append(order)
    return ToolResult(data={"order": order, "status": "shipped"})


async def test_a_turn_whose_tool_already_ran_commits_instead_of_deferring() -> None:
    ORDERS.clear()
    asks = Guideline(
        id="o", condition="asks about an order", action="Tell the status", tools=("order_status",)
    )
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"order": True}))
    llm.on(
        ToolCallPlan,
        {"calls": [{"tool": "order_status", "arguments": [{"name": "order", "value": "7"}]}]},
    )
    llm.on(ComposedReply, rate_limited())
    h = tool_harness(llm, order_status, guidelines=[asks], index=False)
    h.engine.pipeline.defer_rate_limited = True
    await h.start()

    out = await h.say("where is order 7?")

    assert ORDERS == ["7"]  # it ran once, and its event is kept: a retry would run it again
    assert [(c.tool, c.status) for c in out.trace.tool_calls] == [("order_status", "ok")]
    assert out.reply is not None and out.reply.text == FALLBACK_REPLY
    assert any("not deferred" in note for note in out.trace.notes)
