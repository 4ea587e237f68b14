"""Pipeline tests with the scripted LLM: the seed's own examples, end to end through one turn."""

from __future__ import annotations

import pytest

from engine.agent_config import AgentConfig, TurnBudget
from engine.compose import ComposedReply
from engine.errors import LLMTransientError
from engine.matching.guidelines import CustomerDependentBatch, GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.model import Guideline
from engine.own_lines import FALLBACK_REPLY
from engine.sessions.session import EventKind
from engine.testing import ScriptedLLM
from tests.engine.pipeline_kit import (
    Harness,
    chain_journey,
    compose_echo,
    customer_dependent,
    make_agent,
    match_when,
    priority,
    step_number,
)

FLIGHT = chain_journey(
    "flight",
    "Book a flight",
    "The customer wants to book a flight",
    [("dest", "Ask where the customer wants to fly to"), ("date", "Ask for the departure date")],
)
HOTEL = chain_journey(
    "hotel",
    "Book a hotel",
    "The customer wants to book a hotel room",
    [("checkin", "Ask for the check-in date"), ("nights", "Ask how many nights")],
)


def wants(word: str):
    return lambda message: word in message


def enter_first_step(prompt: str) -> dict:
    """Node selection that enters a journey at its BEGIN HERE step (read from the map)."""
    for line in prompt.splitlines():
        if line.startswith("STEP "):
            number = line.split(":")[0].removeprefix("STEP ")
            return {"journey_applies": True, "step_advancement": [number], "next_step": number}
    raise AssertionError("no steps in the journey map")


async def test_flight_and_hotel_activate_two_journeys_at_once() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"flight": wants("flight"), "hotel": wants("hotel")}))
    llm.on(JourneyNodeSelection, enter_first_step)
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(journeys=[FLIGHT, HOTEL]), llm)
    await h.start()

    out = await h.say("I want to book a flight and a hotel")

    assert set(out.trace.activated_journeys) == {"flight", "hotel"}
    assert out.state.journey_paths == {"flight": ("dest",), "hotel": ("checkin",)}
    assert "Ask where the customer wants to fly to" in out.reply.text
    assert "Ask for the check-in date" in out.reply.text


async def test_low_probability_journey_is_activated_by_supplemental_matching() -> None:
    llm = ScriptedLLM()
    # The customer's words point the vector recall at the flight journey only (top_k = 1) …
    llm.on(GuidelineMatchBatch, match_when({"flight": wants("flight"), "hotel": wants("stay")}))
    llm.on(JourneyNodeSelection, enter_first_step)
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(journeys=[FLIGHT, HOTEL]), llm)
    await h.start()

    out = await h.say("book a flight to Paris, and somewhere to stay there")

    # … but the hotel journey's condition is global and matched, so it still activates.
    assert out.trace.high_probability_journeys == ["flight"]
    assert out.trace.supplemental_journeys == ["hotel"]
    assert out.state.journey_paths["hotel"] == ("checkin",)
    rounds = {c.label: c.round for c in out.trace.llm_calls if c.purpose == "select_journey_node"}
    assert rounds == {"flight": 1, "hotel": 2}


async def test_customer_who_no_longer_wants_to_book_leaves_the_journey() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"flight": wants("flight")}))
    llm.on(
        JourneyNodeSelection,
        enter_first_step,
        {"journey_applies": False, "next_step": "NONE", "rationale": "customer stopped"},
    )
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(journeys=[FLIGHT]), llm)
    await h.start()
    await h.say("I want to book a flight")

    out = await h.say("I don't want to book anymore")

    assert out.state.journey_paths["flight"] == ("dest", None)
    assert out.state.active_journey_ids == []
    assert out.trace.journeys[-1].how == "exit"
    assert "fly to" not in out.reply.text


async def test_customer_dependent_step_waits_for_the_answer() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"flight": wants("flight")}))
    dest = step_number(FLIGHT[0], "dest")
    date = step_number(FLIGHT[0], "date")
    llm.on(
        JourneyNodeSelection,
        enter_first_step,
        # The customer asks something else: the destination was not given, so the step stays.
        {"journey_applies": True, "step_advancement": [dest], "next_step": dest},
        {"journey_applies": True, "step_advancement": [dest, date], "next_step": date},
    )
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(journeys=[FLIGHT]), llm)
    await h.start()
    await h.say("I want to book a flight")

    waiting = await h.say("do you have a lounge?")
    answered = await h.say("To Rome please")

    assert waiting.state.journey_paths["flight"] == ("dest",)
    assert "fly to" in waiting.reply.text
    assert answered.state.journey_paths["flight"] == ("dest", "date")
    assert "departure date" in answered.reply.text


async def test_non_continuous_guideline_is_not_reapplied() -> None:
    greet = Guideline(id="greet", condition="The customer greets", action="Greet back")
    asked: list[str] = []

    def matcher(prompt: str) -> dict:
        asked.append(prompt)
        return match_when({"greets": True})(prompt)

    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, matcher)
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(guidelines=[greet]), llm)
    await h.start()

    first = await h.say("hi")
    second = await h.say("hi again")

    assert first.state.applied_guideline_ids == ("greet",)
    # Second turn: greet goes to the previously-applied group, whose question is "apply again?".
    assert "### Actions already taken (g1)" in asked[-1]
    assert "Greet back" in first.reply.text
    assert [m.batch for m in second.trace.matches if m.guideline_id == "greet"] == [
        "previously_applied"
    ]


async def test_continuous_guideline_is_evaluated_as_actionable_every_turn() -> None:
    tone = Guideline(
        id="tone",
        condition="The customer is upset",
        action="Apologize",
        metadata={"continuous": True},
    )
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"upset": True}))
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(guidelines=[tone]), llm)
    await h.start()
    await h.say("this is terrible")

    out = await h.say("still terrible")

    assert out.state.applied_guideline_ids == ()
    assert [m.batch for m in out.trace.matches] == ["actionable"]
    assert "Apologize" in out.reply.text


async def test_customer_dependent_guideline_stays_until_the_customer_supplies_it() -> None:
    verify = Guideline(
        id="verify",
        condition="The customer asks about their order",
        action="Ask for the order number",
        metadata=customer_dependent("gave the order number", "asked for the order number"),
    )
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"order": True}))
    llm.on(
        CustomerDependentBatch,
        {
            "verdicts": [
                {"id": "g1", "condition_holds": True, "customer_completed": False, "score": 8}
            ]
        },
        {
            "verdicts": [
                {"id": "g1", "condition_holds": True, "customer_completed": True, "score": 8}
            ]
        },
    )
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(guidelines=[verify]), llm)
    await h.start()

    first = await h.say("where is my order?")
    waiting = await h.say("hmm, let me look")
    done = await h.say("it is 12345")

    assert first.state.pending_customer_guideline_ids == ("verify",)
    assert "Ask for the order number" in waiting.reply.text
    assert waiting.state.pending_customer_guideline_ids == ("verify",)
    assert done.state.pending_customer_guideline_ids == ()
    assert done.state.applied_guideline_ids == ("verify",)
    assert "order number" not in done.reply.text


async def test_guideline_overrides_journey_state_by_priority() -> None:
    urgent = Guideline(
        id="urgent",
        condition="The customer reports an emergency",
        action="Handle the emergency before anything else",
    )
    llm = ScriptedLLM()
    llm.on(
        GuidelineMatchBatch,
        match_when({"flight": wants("flight"), "emergency": wants("emergency")}),
    )
    dest = step_number(FLIGHT[0], "dest")
    date = step_number(FLIGHT[0], "date")
    llm.on(
        JourneyNodeSelection,
        enter_first_step,
        {"journey_applies": True, "step_advancement": [dest, date], "next_step": date},
    )
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(
        guidelines=[urgent], journeys=[FLIGHT], relationships=[priority(urgent, FLIGHT[0])]
    )
    h = Harness(agent, llm)
    await h.start()
    await h.say("I want to book a flight")

    out = await h.say("wait, there is an emergency")

    assert "Handle the emergency" in out.reply.text
    assert "fly to" not in out.reply.text
    assert [(r.kind, r.effect) for r in out.trace.relations] == [("priority", "suppressed")]
    # The journey stays active where it was: the suppressed step was not performed.
    assert out.state.journey_paths["flight"] == ("dest",)
    assert "departure date" not in out.reply.text


async def test_turn_without_tools_takes_at_most_two_llm_rounds() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"flight": wants("flight")}))
    llm.on(JourneyNodeSelection, enter_first_step)
    llm.on(ComposedReply, compose_echo)
    greetings = [
        Guideline(id=f"g{i}", condition=f"Condition number {i}", action="x") for i in range(30)
    ]
    h = Harness(make_agent(guidelines=greetings, journeys=[FLIGHT]), llm)
    await h.start()

    out = await h.say("I want to book a flight")

    assert out.trace.llm_rounds == 2
    # 30 actionable guidelines and the journey's observational condition share one packed
    # matching call; plus node selection and composition.
    assert len(out.trace.llm_calls) == 3
    assert [c.label for c in out.trace.llm_calls if c.schema_name == "GuidelineMatchBatch"] == [
        "packed[31]"
    ]


async def test_budget_exhaustion_composes_with_what_it_has() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"flight": wants("flight")}))
    llm.on(JourneyNodeSelection, enter_first_step)
    llm.on(ComposedReply, compose_echo)
    config = AgentConfig(budget=TurnBudget(max_llm_calls=2))
    h = Harness(make_agent(journeys=[FLIGHT], config=config), llm)
    await h.start()

    out = await h.say("I want to book a flight")

    assert len(out.trace.llm_calls) == 2
    assert out.trace.llm_calls[-1].purpose == "compose"
    assert any(n.startswith("budget:") for n in out.trace.notes)
    assert out.reply is not None


async def test_failing_llm_keeps_the_customer_message_and_replies_with_a_fallback() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, LLMTransientError("503", status=503))
    llm.on(ComposedReply, LLMTransientError("503", status=503))
    h = Harness(
        make_agent(guidelines=[Guideline(id="g", condition="c", action="a")]), llm, index=False
    )
    h.engine.pipeline.deps.llm = llm
    await h.start()

    out = await h.say("hello?")

    messages = [e for e in out.state.events if e.kind is EventKind.MESSAGE]
    assert [m.text for m in messages] == ["hello?", FALLBACK_REPLY]
    assert any("composition failed" in n for n in out.trace.notes)


async def test_redelivered_message_is_answered_once() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({}))
    llm.on(ComposedReply, compose_echo)
    h = Harness(
        make_agent(guidelines=[Guideline(id="g", condition="c", action="a")]), llm, index=False
    )
    await h.start()
    from engine.sessions.session import InboundMessage

    first = await h.engine.handle("s1", [InboundMessage(event_id="tg-1", text="hi")])
    again = await h.engine.handle("s1", [InboundMessage(event_id="tg-1", text="hi")])

    assert again.replayed and again.reply == first.reply
    stored = await h.sessions.load("s1")
    assert stored is not None and len(stored.events) == 2


@pytest.mark.parametrize("explain", [False, True])
async def test_explain_mode_changes_only_the_rationale_instructions(explain: bool) -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({}))
    llm.on(ComposedReply, compose_echo)
    config = AgentConfig(explain=explain)
    h = Harness(
        make_agent(guidelines=[Guideline(id="g", condition="c", action="a")], config=config),
        llm,
        index=False,
    )
    await h.start()
    await h.say("hi")
    prompt = llm.calls_for(GuidelineMatchBatch)[0].prompt
    assert ("explain your reasoning" in prompt) is explain


async def test_trace_summary_names_matches_journeys_and_llm_cost() -> None:
    from engine.trace import summarize

    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"flight": wants("flight")}))
    llm.on(JourneyNodeSelection, enter_first_step)
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(journeys=[FLIGHT]), llm)
    await h.start()

    out = await h.say("I want to book a flight")

    lines = summarize(out.trace)
    assert lines[0] == "matched: start of flight"
    assert "journey flight: moved → dest" in lines
    assert lines[-1].startswith("llm: 3 calls in 2 rounds")
    # With the agent, journeys are named by their titles, never by internal ids.
    titled = summarize(out.trace, h.agent)
    assert titled[0] == f"matched: start of {FLIGHT[0].title}"
    assert f"journey {FLIGHT[0].title}: moved → dest" in titled
    assert not any("journey:" in line for line in titled)


async def test_a_new_run_of_a_journey_does_not_reuse_the_previous_runs_values() -> None:
    from engine.model import CollectedField

    trip = chain_journey(
        "trip",
        "Trip",
        "The customer wants a trip",
        [("dest", "Ask for the destination", {"collects": (CollectedField(name="city"),)})],
    )
    dest = step_number(trip[0], "dest")
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"trip": wants("trip")}))
    llm.on(
        JourneyNodeSelection,
        {
            "journey_applies": True,
            "step_advancement": [dest],
            "next_step": dest,
            "collected": [{"name": "city", "value": "Rome"}],
        },
        {"journey_applies": True, "step_advancement": [dest], "next_step": "NONE"},
        {"journey_applies": True, "step_advancement": [dest], "next_step": dest},
    )
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(journeys=[trip]), llm)
    await h.start()
    await h.say("a trip to Rome")
    done = await h.say("thanks")
    assert done.state.completed_journeys == ("trip",)

    again = await h.say("another trip please")

    assert again.state.journey_paths["trip"][-1] == "dest"
    assert again.state.collected_values("trip") == {}


async def test_journey_scoped_guideline_still_applies_in_the_turn_its_journey_exits() -> None:
    from engine.model import journey_tag

    confirm = Guideline(
        id="confirm_cancel",
        condition="The customer cancels the booking",
        action="Confirm that nothing was booked",
        tags=(journey_tag("flight"),),
    )
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"flight": wants("flight"), "cancels": wants("cancel")}))
    llm.on(JourneyNodeSelection, enter_first_step, {"journey_applies": False, "next_step": "NONE"})
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(guidelines=[confirm], journeys=[FLIGHT]), llm)
    await h.start()
    await h.say("I want to book a flight")

    out = await h.say("cancel it")

    assert out.trace.journeys[-1].how == "exit"
    assert "Confirm that nothing was booked" in out.reply.text


async def test_per_customer_variable_values_reach_the_prompts() -> None:
    from engine.memory.stores import InMemoryVariableStore
    from engine.model import ContextVariable

    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({}))
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(guidelines=[Guideline(id="g", condition="c", action="a")])
    agent = type(agent).model_validate(
        {**agent.model_dump(), "variables": [ContextVariable(name="tier", default="basic")]}
    )
    h = Harness(agent, llm, index=False)
    store = InMemoryVariableStore()
    await store.set_variable(agent.id, "c1", "tier", "gold")
    h.engine.variables = store
    await h.start()

    await h.say("hello")

    assert "- tier: gold" in llm.calls_for(ComposedReply)[0].prompt
