"""Secrets by the side paths: a secret value the turn refused, reported under another name, or
quoted by an error is masked like one it accepted — in the stored session, the trace and the
prompts (found by an audit of every path a declared secret could leak by)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engine.authoring.fields import collected_fields
from engine.compose import ComposedReply
from engine.handoff import hand_back, person_message, start_handoff
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journeys import JourneyNodeSelection
from engine.model import Guideline
from engine.privacy.secrets import MASK
from engine.sessions.session import InboundMessage
from engine.testing import ScriptedLLM
from engine.toolkit import ToolResult, tool
from engine.tools.calls import ToolCallPlan
from tests.engine.pipeline_kit import (
    advance,
    chain_journey,
    compose_echo,
    match_when,
    per_journey,
    step_number,
    tool_harness,
)
from tests.engine.test_secrets import (
    LOGINS,
    PASSWORD,
    auth_journey,
    auth_llm,
    everything_stored,
    login,
)

WRONG_PIN = "54321"  # a real PIN (of another card, say) that fails the field's bounds
PINS: list[int] = []


@tool(description="set the card's new PIN", secret=("pin",))
def change_pin(pin: int) -> ToolResult:
    PINS.append(pin)
    return ToolResult(data={"pin_set": True})


def pin_journey() -> Any:
    pin = collected_fields({"pin": {"type": "int", "secret": True, "ge": 1000, "le": 9999}})
    return chain_journey(
        "new_pin",
        "New PIN",
        "The customer wants a new card PIN",
        [
            (
                "holder",
                "Ask for the cardholder's name",
                {"collects": collected_fields({"name": "str"})},
            ),
            ("ask", "Ask for the new four-digit PIN", {"collects": pin}),
            ("set", "tool:change_pin"),
        ],
    )


def pin_llm(*selections: Any) -> ScriptedLLM:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"new card PIN": True}))
    llm.on(JourneyNodeSelection, per_journey({"New PIN": list(selections)}))
    llm.on(ComposedReply, compose_echo)
    return llm


async def test_a_secret_refused_by_its_fields_bounds_is_masked_where_the_trace_says_why() -> None:
    """The customer answers the PIN question with a PIN the field refuses: nothing is collected,
    but the value is the customer's secret all the same — the trace's note on the refusal and
    every stored item hold it masked."""
    PINS.clear()
    journey, condition = pin_journey()
    n = lambda node: step_number(journey, node)  # noqa: E731
    llm = pin_llm(
        advance(n("holder"), n("ask"), collected={"name": "Ada Lovelace"}),
        advance(n("ask"), collected={"pin": WRONG_PIN}),
    )
    h = tool_harness(llm, change_pin, journeys=[(journey, condition)], index=False)
    await h.start()
    first = await h.say("I want a new card PIN, I am Ada Lovelace")

    refused = await h.say(WRONG_PIN)

    assert PINS == [] and refused.state.journey_paths["new_pin"][-1] == "ask"
    assert any("rejected pin" in note for note in refused.trace.notes)
    assert WRONG_PIN not in await everything_stored(h, [first.trace.turn_id, refused.trace.turn_id])


async def test_a_secret_given_ahead_and_refused_is_masked_where_it_was_typed() -> None:
    """The PIN comes with the request, before its step, and fails the field's bounds: it is not
    kept, and neither the customer's message nor the trace keeps it in clear."""
    PINS.clear()
    journey, condition = pin_journey()
    n = lambda node: step_number(journey, node)  # noqa: E731
    llm = pin_llm(advance(n("holder"), collected={"pin": WRONG_PIN}))
    h = tool_harness(llm, change_pin, journeys=[(journey, condition)], index=False)
    await h.start()

    out = await h.say(f"I want a new card PIN: {WRONG_PIN}")

    assert PINS == [] and not any(c.name == "pin" for c in out.state.collected)
    assert out.new_events[0].text == f"I want a new card PIN: {MASK}"
    assert WRONG_PIN not in await everything_stored(h, [out.trace.turn_id])


async def test_a_secret_the_model_also_reports_under_a_plain_field_is_masked_there_too() -> None:
    """Adversarial: node selection reports the password for the password field and, again, as
    a correction of the username. The username is a plain field, but its value is this turn's
    secret: the reply prompt, the stored values and every later prompt hold it masked."""
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    both = {"password": PASSWORD, "username": PASSWORD}
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        advance(n("pass"), n("login"), collected=both),
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    first = await h.say("I need to log in as seldo")

    second = await h.say(PASSWORD)
    compose_prompt = llm.calls_for(ComposedReply)[-1].prompt
    calls_before = len(llm.calls)
    third = await h.say("thanks, what now?")

    assert PASSWORD not in compose_prompt
    assert all(PASSWORD not in c.prompt for c in llm.calls[calls_before:])
    turns = [o.trace.turn_id for o in (first, second, third)]
    assert PASSWORD not in await everything_stored(h, turns)


async def test_a_secret_argument_the_tool_refuses_is_masked_in_the_question_and_store() -> None:
    """The model plans the PIN the customer typed, but it is not a number: the call is refused
    as invalid, and the question the reply is given (which quotes the validation error), the
    customer's message and the trace hold the typed PIN masked."""
    PINS.clear()
    typed = "12ab"
    rule = Guideline(id="pin", condition="wants a new PIN", action="Set it", tools=("change_pin",))
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"new PIN": True}))
    llm.on(
        ToolCallPlan,
        {"calls": [{"tool": "change_pin", "arguments": [{"name": "pin", "value": typed}]}]},
    )
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, change_pin, guidelines=[rule], index=False)
    await h.start()

    out = await h.say(f"I want a new PIN, make it {typed}")

    assert PINS == []
    assert [c.status for c in out.trace.tool_calls] == ["invalid_arguments"]
    assert typed not in llm.calls_for(ComposedReply)[-1].prompt
    assert typed not in await everything_stored(h, [out.trace.turn_id])


async def test_a_secret_reported_only_under_a_plain_field_is_not_kept_in_clear() -> None:
    """Adversarial: at the password step, node selection reports what the customer typed as a
    new username and nothing as the password. The answer is masked whole (the secret was not
    found in it); the value taken from it must not keep it in clear either."""
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    llm = auth_llm(
        advance(n("user"), n("pass"), collected={"username": "seldo"}),
        advance(n("pass"), collected={"username": PASSWORD}),
        advance(n("pass")),
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    first = await h.say("I need to log in as seldo")

    second = await h.say(PASSWORD)
    compose_prompt = llm.calls_for(ComposedReply)[-1].prompt
    calls_before = len(llm.calls)
    third = await h.say("thanks, what now?")

    assert second.new_events[0].text == MASK
    assert PASSWORD not in compose_prompt
    assert all(PASSWORD not in c.prompt for c in llm.calls[calls_before:])
    turns = [o.trace.turn_id for o in (first, second, third)]
    assert PASSWORD not in await everything_stored(h, turns)


async def test_a_secret_in_a_turn_of_several_messages_is_masked_in_each() -> None:
    """The username and the password arrive as two messages of one turn (a burst): the tool
    gets the password, and neither message, the reply prompt nor the store keeps it."""
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    collected = {"username": "seldo", "password": PASSWORD}
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"log in": True}))
    llm.on(
        JourneyNodeSelection,
        per_journey(
            {"Authenticate": [advance(n("user"), n("pass"), n("login"), collected=collected)]}
        ),
    )
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()

    out = await h.engine.handle(
        "s1",
        [
            InboundMessage(event_id="b1", text="I need to log in as seldo"),
            InboundMessage(event_id="b2", text=f"password {PASSWORD}"),
            InboundMessage(event_id="b3", text=f"({PASSWORD}, to be clear)"),
        ],
    )

    assert LOGINS == [("seldo", PASSWORD)]
    assert [e.text for e in out.new_events[1:3]] == [f"password {MASK}", f"({MASK}, to be clear)"]
    assert PASSWORD not in llm.calls_for(ComposedReply)[-1].prompt
    assert PASSWORD not in await everything_stored(h, [out.trace.turn_id])


async def test_a_secret_typed_to_a_person_in_human_mode_is_masked_and_stays_out_of_prompts() -> (
    None
):
    """While a person has the session the agent still reads each message (for the trace): the
    password the customer types to the person is recognised, masked where they typed it and in
    that turn's trace, and the agent's prompts after the hand-back never see it. No tool runs."""
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    both = {"username": "seldo", "password": PASSWORD}
    llm = auth_llm(
        advance(n("user")),
        advance(n("user"), n("pass"), n("login"), collected=both),
        advance(n("user")),  # a model cannot name a password it never saw
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    first = await h.say("I need to log in")
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    change = start_handoff(first.state, "op1", now, by="lead", reason="login trouble")
    assert await h.sessions.commit(change.commit())

    told = await h.say(f"seldo, and the password is {PASSWORD}")
    person = person_message(
        await h.sessions.load("s1"), "op2", now, person="dana", text="Thanks, one moment"
    )
    assert await h.sessions.commit(person.commit())
    back = hand_back(await h.sessions.load("s1"), "op3", now, by="dana")
    assert await h.sessions.commit(back.commit())
    calls_before = len(llm.calls)
    later = await h.say("log in please, is it done?")

    assert told.reply is None and LOGINS == []
    assert told.new_events[0].text == f"seldo, and the password is {MASK}"
    assert all(PASSWORD not in c.prompt for c in llm.calls[calls_before:])
    turns = [o.trace.turn_id for o in (first, told, later)]
    assert PASSWORD not in await everything_stored(h, turns)
