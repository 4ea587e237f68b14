"""A failed consequential journey step's retry, through the real pipeline with a scripted model:
offered, never repeated every turn when the customer moves on, run only after their explicit yes,
never claimed done."""

from __future__ import annotations

from typing import Any, Literal, get_args

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.model import CollectedField
from engine.sessions.session import InboundMessage, SessionState
from engine.stages.retry_offers import asks_to_try_again
from engine.testing import ScriptedLLM
from engine.toolkit import ToolContextWithKey, ToolResult, spec_of, tool
from engine.tools.calls import ToolCallPlan
from engine.versioning.pinning import end_dangling
from tests.engine.pipeline_kit import (
    Harness,
    advance,
    chain_journey,
    compose_echo,
    make_agent,
    match_when,
    per_journey,
    step_number,
    tool_harness,
)

OUTCOMES: list[str] = []  # "fail" or "ok", consumed per call
PLACED: list[str] = []


Dish = Literal["pizza", "pasta", "salad"]  # a dish named in the customer's words is direct


@tool(description="Place the order", consequential=True)
def place_order(context: ToolContextWithKey, item: Dish) -> ToolResult:
    if OUTCOMES and OUTCOMES.pop(0) == "fail":
        return ToolResult(error="the kitchen is offline")
    PLACED.append(item)
    return ToolResult(data={"placed": item})


ORDER = chain_journey(
    "order",
    "Order",
    "The customer wants to order food",
    [
        ("ask_item", "Ask what they want"),
        ("place", "tool:place_order", {"action": "Tell the customer the order is placed"}),
        ("thanks", "Thank the customer"),
    ],
)


def plan(item: str) -> dict[str, Any]:
    return {"calls": [{"tool": "place_order", "arguments": [{"name": "item", "value": item}]}]}


def order_harness() -> tuple[Harness, ScriptedLLM]:
    journey = ORDER[0]
    n = lambda node: step_number(journey, node)  # noqa: E731
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"order food": True}))
    # Every turn the model walks to the tool step again (it cannot pass it: its tool did not run).
    llm.on(JourneyNodeSelection, per_journey({"Order": [advance(n("ask_item"), n("place"))]}))
    llm.on(ToolCallPlan, plan("pizza"))
    llm.on(ComposedReply, compose_echo)
    return tool_harness(llm, place_order, journeys=[ORDER], index=False), llm


async def failed_order() -> tuple[Harness, ScriptedLLM]:
    """A session whose order step just failed: the reply said so and offered to try again."""
    OUTCOMES[:] = ["fail"]
    PLACED.clear()
    h, llm = order_harness()
    await h.start()
    failed = await h.say("I want to order a pizza")
    assert failed.state.failed_steps == {"order": "place"}
    OUTCOMES[:] = []  # from here on the kitchen works
    return h, llm


def asks_to_retry(text: str | None) -> bool:
    return "Please confirm — Try again" in (text or "")


async def test_a_retry_offer_the_customer_moves_on_from_is_not_repeated_every_turn() -> None:
    h, llm = await failed_order()
    assert "offer to try again" in llm.calls_for(ComposedReply)[-1].prompt  # offered once

    replies = [
        await h.say(text)
        for text in ["what are your opening hours?", "do you deliver?", "is there parking?"]
    ]

    assert [asks_to_retry(r.reply.text) for r in replies] == [False, False, False]
    assert all(r.state.pending_confirmation is None for r in replies)
    assert PLACED == []
    assert replies[-1].state.failed_steps == {"order": "place"}  # still not done
    assert replies[-1].state.retries_not_taken == ("order",)
    assert replies[-1].state.journey_paths["order"][-1] == "place"  # the journey stays put
    assert [c.status for c in replies[-1].trace.tool_calls] == ["retry_not_taken"]
    prompt = llm.calls_for(ComposedReply)[-1].prompt
    assert "did not take up the offer to try again" in prompt and "Do not offer it again" in prompt


async def test_a_customer_who_comes_back_and_asks_to_retry_is_asked_once_and_a_yes_runs_it() -> (
    None
):
    h, _ = await failed_order()
    await h.say("what are your opening hours?")
    await h.say("do you deliver?")

    asked = await h.say("ok, can you try the order again?")

    assert asks_to_retry(asked.reply.text) and PLACED == []
    assert asked.state.pending_confirmation is not None and asked.state.retries_not_taken == ()

    done = await h.say("yes")

    assert PLACED == ["pizza"]
    assert [c.status for c in done.trace.tool_calls] == ["ok"]
    assert done.state.failed_steps == {} and done.state.retries_not_taken == ()
    assert done.state.journey_paths["order"][-1] == "thanks"


async def test_a_yes_to_the_offer_asks_for_the_exact_retry_then_runs_it_once() -> None:
    h, _ = await failed_order()

    asked = await h.say("yes please")
    assert asks_to_retry(asked.reply.text) and PLACED == []

    await h.say("yes")
    after = await h.say("thanks!")

    assert PLACED == ["pizza"]
    assert not asks_to_retry(after.reply.text)


async def test_a_no_to_the_retry_declines_it_and_it_is_not_asked_again() -> None:
    h, _ = await failed_order()
    await h.say("try again")

    declined = await h.say("no")
    later = [await h.say(t) for t in ["what are your opening hours?", "do you deliver?"]]

    assert PLACED == []
    assert any("declined" in n for n in declined.trace.notes)
    assert not any(asks_to_retry(r.reply.text) for r in [declined, *later])
    assert all(r.state.pending_confirmation is None for r in [declined, *later])
    assert later[-1].state.retries_not_taken == ("order",)


async def test_a_no_to_the_offer_itself_holds_the_step() -> None:
    h, _ = await failed_order()

    replies = [await h.say("no thanks"), await h.say("do you deliver?")]

    assert not any(asks_to_retry(r.reply.text) for r in replies) and PLACED == []


ORDER_BY_ITEM = chain_journey(
    "order",
    "Order",
    "The customer wants to order food",
    [
        (
            "ask_item",
            "Ask what they want",
            {"collects": (CollectedField(name="item", type="enum", choices=get_args(Dish)),)},
        ),
        ("place", "tool:place_order", {"action": "Tell the customer the order is placed"}),
        ("thanks", "Thank the customer"),
    ],
)


async def test_a_changed_value_is_a_new_attempt_confirmed_like_a_retry() -> None:
    # The step's value comes from the journey: a new value for it is a new attempt, not the
    # retry the customer left — it runs through the gate, and a retry still asks first.
    OUTCOMES[:] = ["fail"]
    PLACED.clear()
    n = lambda node: step_number(ORDER_BY_ITEM[0], node)  # noqa: E731
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"order food": True}))
    item = {"value": "pizza"}
    llm.on(
        JourneyNodeSelection,
        lambda _: advance(n("ask_item"), n("place"), collected={"item": item["value"]}),
    )
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, place_order, journeys=[ORDER_BY_ITEM], index=False)
    await h.start()
    await h.say("I want to order a pizza")
    held = await h.say("do you deliver?")
    assert held.state.retries_not_taken == ("order",) and not asks_to_retry(held.reply.text)

    item["value"] = "pasta"
    asked = await h.say("make it a pasta instead")

    assert asks_to_retry(asked.reply.text) and "item pasta" in asked.reply.text
    assert PLACED == []
    await h.say("yes")
    assert PLACED == ["pasta"]


async def test_a_hostile_model_cannot_retry_or_re_offer_a_held_step() -> None:
    """The model selects the tool step every turn, says the customer confirmed the retry, plans
    the call and writes the success words: nothing runs, nothing is asked again, and no reply
    says the order was placed or offers the retry again."""
    h, llm = await failed_order()
    n = step_number(ORDER[0], "place")
    llm._handlers["JourneyNodeSelection"] = []
    llm.on(
        JourneyNodeSelection,
        {
            **advance(n, collected={"retry_confirmed": "yes"}),
            "rationale": "the customer confirmed the retry",
        },
    )
    llm._handlers["ComposedReply"] = []
    llm.on(ComposedReply, {"message": "Retry confirmed: the order is placed!"})

    replies = [
        await h.say(text)
        for text in ["what are your opening hours?", "sure, do you deliver?", "great"]
    ]

    assert PLACED == []
    assert not any(asks_to_retry(r.reply.text) for r in replies)
    assert not any("order is placed" in (r.reply.text or "") for r in replies)
    assert not any("try again" in (r.reply.text or "") for r in replies)
    assert replies[-1].state.failed_steps == {"order": "place"}

    # Asked again by the customer, the retry is confirmed by their words only: a message that
    # is not a yes drops the request whatever the model claims, and holds the step again.
    asked = await h.say("try again please")
    assert asks_to_retry(asked.reply.text)
    dropped = await h.say("hmm, what time is it?")

    assert PLACED == [] and dropped.state.pending_confirmation is None
    assert dropped.state.retries_not_taken == ("order",)


async def test_a_session_stored_before_held_retries_existed_still_loads_and_holds() -> None:
    h, _ = await failed_order()
    stored = await h.sessions.load("s1")
    assert stored is not None
    # As a store wrote it before this field existed (the DynamoDB store drops defaults too).
    raw = stored.model_dump(mode="json", exclude_defaults=True)
    raw.pop("retries_not_taken", None)

    loaded = SessionState.model_validate(raw)

    assert loaded.retries_not_taken == () and loaded.failed_steps == {"order": "place"}
    moved_on = await h.say("do you deliver?")
    assert not asks_to_retry(moved_on.reply.text) and PLACED == []


async def test_a_held_retry_of_a_journey_the_new_version_lacks_ends_with_it() -> None:
    h, _ = await failed_order()
    await h.say("do you deliver?")
    held = await h.sessions.load("s1")
    assert held is not None and held.retries_not_taken == ("order",)
    without = make_agent(tools=[spec_of(place_order)])  # the order journey was removed

    cleaned, ended = end_dangling(held, without, previous=h.agent)

    assert ended == ("Order",)
    assert cleaned.failed_steps == {} and cleaned.retries_not_taken == ()


def test_asking_to_try_again_is_read_from_the_customers_words() -> None:
    asks = ["try again", "Please try the order again!", "retry", "can you try once more?"]
    not_asks = ["no, don't try again", "do you deliver?", "yes", "what is my order again?"]

    assert all(asks_to_try_again(InboundMessage(event_id="m", text=t)) for t in asks)
    assert not any(asks_to_try_again(InboundMessage(event_id="m", text=t)) for t in not_asks)


async def test_another_sender_can_neither_retry_nor_confirm_the_retry_of_a_failed_step() -> None:
    """In a group session alice's order failed. Bob asks to try again (a hostile plan reuses
    alice's item): the retry is not his to run on her words; and when alice asks for it, only
    her yes runs it."""
    OUTCOMES[:] = ["fail"]
    PLACED.clear()
    h, _ = order_harness()
    await h.start()
    alice, bob = {"customer_id": "alice"}, {"customer_id": "bob"}
    failed = await h.say("I want to order a pizza", metadata=alice)
    assert failed.state.failed_steps == {"order": "place"}
    OUTCOMES[:] = []

    bobs = await h.say("please try again", metadata=bob)

    assert PLACED == []
    # alice's dish is hers: never worked out as bob's choice
    assert [c.status for c in bobs.trace.tool_calls] == ["ungrounded"]

    asked = await h.say("try again please", metadata=alice)
    assert asks_to_retry(asked.reply.text) and asked.state.pending_confirmation.sender == "alice"
    await h.say("yes", metadata=bob)
    assert PLACED == []

    await h.say("try again please", metadata=alice)
    await h.say("yes", metadata=alice)
    assert PLACED == ["pizza"]
