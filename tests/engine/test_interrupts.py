"""Interrupting tools: a selector's pick resumes the journey in a later turn; an interrupter
returns an action (a link) and a later event resumes."""

from __future__ import annotations

import pytest

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.model import ToolKind
from engine.testing import ScriptedLLM
from engine.tool_calls import resolve_pick
from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, spec_of, tool
from tests.engine.pipeline_kit import (
    Harness,
    advance,
    chain_journey,
    compose_echo,
    make_agent,
    match_when,
    per_journey,
    step_number,
)

CALLS: list[str] = []


@tool(description="list the customer's orders", kind=ToolKind.SELECTOR)
def list_orders() -> ToolResult:
    CALLS.append("list_orders")
    return ToolResult(
        data=[{"id": "o1", "label": "Order #1 (shoes)"}, {"id": "o2", "label": "Order #2 (hat)"}]
    )


@tool(description="open the address form", kind=ToolKind.INTERRUPTER)
def address_form() -> ToolResult:
    return ToolResult(
        view={"type": "link", "url": "https://example.test/form"},
        control={"prompt": "Ask the customer to fill in the address form"},
    )


REFUND = chain_journey(
    "refund",
    "Refund",
    "The customer wants a refund",
    [("pick", "tool:list_orders"), ("confirm", "Confirm the refund for the selected order")],
)
MOVE = chain_journey(
    "move",
    "Change address",
    "The customer moved",
    [("form", "tool:address_form"), ("thanks", "Thank the customer for the new address")],
)


def harness(journey, script) -> tuple[Harness, ScriptedLLM]:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"refund": True, "moved": True}))
    llm.on(JourneyNodeSelection, per_journey(script))
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(journeys=[journey], tools=[spec_of(list_orders), spec_of(address_form)])
    tools = InProcessDispatcher(ToolRegistry([list_orders, address_form]))
    return Harness(agent, llm, tools=tools, index=False), llm


@pytest.mark.parametrize(
    "pick", [{"choice": "o2"}, {"text": "2"}, {"text": "order #2 (hat)"}], ids=str
)
async def test_selector_pick_resumes_the_journey_in_the_next_turn(pick: dict) -> None:
    CALLS.clear()
    journey = REFUND[0]
    pick_step, confirm = step_number(journey, "pick"), step_number(journey, "confirm")
    h, _ = harness(REFUND, {"Refund": [advance(pick_step), advance(confirm)]})
    await h.start()

    asked = await h.say("I want a refund")
    assert asked.state.pending_interrupt is not None
    assert [o["id"] for o in asked.reply.data["options"]] == ["o1", "o2"]
    assert "pick one of these options" in asked.reply.text or asked.reply.text

    picked = await h.say(
        pick.get("text", ""), **({"choice": pick["choice"]} if "choice" in pick else {})
    )

    assert picked.state.pending_interrupt is None
    assert picked.state.journey_paths["refund"] == ("pick", "confirm")
    assert picked.state.collected_values()["list_orders_selection"]["id"] == "o2"
    assert "Confirm the refund" in picked.reply.text
    assert CALLS == ["list_orders"]  # the selector is not run again on the pick


async def test_an_answer_that_picks_nothing_keeps_the_selector_open() -> None:
    journey = REFUND[0]
    h, _ = harness(REFUND, {"Refund": [advance(step_number(journey, "pick"))]})
    await h.start()
    await h.say("I want a refund")

    out = await h.say("hmm, not sure")

    assert out.state.pending_interrupt is not None
    assert out.state.journey_paths["refund"] == ("pick",)


async def test_interrupter_returns_an_action_and_a_later_event_resumes() -> None:
    journey = MOVE[0]
    form, thanks = step_number(journey, "form"), step_number(journey, "thanks")
    h, _ = harness(MOVE, {"Change address": [advance(form), advance(thanks)]})
    await h.start()

    asked = await h.say("I moved to a new place")
    assert asked.reply.data["view"] == {"type": "link", "url": "https://example.test/form"}
    assert asked.state.pending_interrupt.kind == "interrupter"

    done = await h.say("done", metadata={"resume": {"street": "Main St 1"}})

    assert done.state.pending_interrupt is None
    assert done.state.journey_paths["move"] == ("form", "thanks")
    assert "Thank the customer" in done.reply.text


def test_pick_resolution_is_strict_about_ambiguity() -> None:
    options = [
        {"id": "a", "label": "Blue shirt", "value": 1},
        {"id": "b", "label": "Blue hat", "value": 2},
    ]
    assert resolve_pick(options, None, "blue") is None
    assert resolve_pick(options, None, "hat") == 2
    assert resolve_pick(options, "a", "") == 1
    assert resolve_pick(options, None, "3") is None
