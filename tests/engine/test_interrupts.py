"""Interrupting tools: a selector's pick resumes the journey in a later turn and fills a value of
its declared name; an interrupter returns an action (a link, a form) and only its delivered result
completes the step."""

from __future__ import annotations

import pytest

from engine.authoring import load_agent
from engine.compose import ComposedReply
from engine.errors import InvalidAgentDefinition
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.model import Guideline
from engine.ports import ToolContext
from engine.sessions.session import InboundMessage, SessionState
from engine.testing import ScriptedLLM
from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, spec_of, tool
from engine.tools.calls import ToolCallPlan, resolve_pick
from engine.tools.spec import ToolKind, ToolSpec
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


@tool(description="list the customer's orders", kind=ToolKind.SELECTOR, fills="order")
def list_orders() -> ToolResult:
    CALLS.append("list_orders")
    return ToolResult(
        data=[{"id": "o1", "label": "Order #1 (shoes)"}, {"id": "o2", "label": "Order #2 (hat)"}]
    )


@tool(description="open the address form", kind=ToolKind.INTERRUPTER)
def address_form() -> ToolResult:
    CALLS.append("address_form")
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
    assert picked.state.collected_values()["order"] == "o2"  # the pick fills `fills`
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

    asked = await h.say("I moved to a new place", metadata={"reply_to": {"chat_id": 7}})
    assert asked.reply.data["view"] == {"type": "link", "url": "https://example.test/form"}
    assert asked.state.pending_interrupt.kind == "interrupter"
    assert asked.state.pending_interrupt.reply_to == {"chat_id": 7}  # where the result's reply goes

    call_id = asked.state.pending_interrupt.call_id
    done = await h.say("", metadata={"resume": {"street": "Main St 1"}, "call_id": call_id})

    assert done.state.pending_interrupt is None
    assert done.state.journey_paths["move"] == ("form", "thanks")
    assert "Thank the customer" in done.reply.text
    assert done.state.collected_values()["street"] == "Main St 1"


async def test_an_interrupter_answers_where_the_session_answers_its_customer() -> None:
    # The result's reply goes where the session answers: the turn's address if it carries one,
    # else the one remembered (a message through the API carries none), never an oversized one.
    journey = MOVE[0]
    form = step_number(journey, "form")
    h, _ = harness(MOVE, {"Change address": [advance(form)]})
    await h.agents.publish(h.agent)
    remembered = {"chat_id": 7}  # where an earlier turn answered
    await h.sessions.create(
        SessionState(id="s1", agent_id=h.agent.id, customer_id="c1", last_reply_to=remembered)
    )

    asked = await h.say("I moved to a new place", metadata={"reply_to": {"x": "y" * 5000}})

    assert asked.state.pending_interrupt is not None
    assert asked.state.pending_interrupt.reply_to == {"chat_id": 7}


def test_pick_resolution_is_strict_about_ambiguity() -> None:
    options = [
        {"id": "a", "label": "Blue shirt", "value": 1},
        {"id": "b", "label": "Blue hat", "value": 2},
    ]
    assert resolve_pick(options, None, "blue") is None
    assert resolve_pick(options, None, "hat") == 2
    assert resolve_pick(options, "a", "") == 1
    assert resolve_pick(options, None, "3") is None


# -- a pick is a value of a declared name -----------------------------------------------------

ORDERED: list[str] = []


@tool(description="offer the pizza sizes", kind=ToolKind.SELECTOR)
def choose_size() -> ToolResult:
    return ToolResult(data=["small", "medium", "large"])


@tool(description="order the pizza", consequential=True)
def order_pizza(size: str) -> ToolResult:
    ORDERED.append(size)
    return ToolResult(data={"ordered": size})


PIZZA = chain_journey(
    "pizza",
    "Pizza",
    "The customer wants a pizza",
    [
        ("choose", "tool:choose_size"),
        ("order", "tool:order_pizza"),
        ("done", "Tell the customer the pizza is ordered"),
    ],
)


def pizza_harness(journey, script, *, guidelines=(), plans=()) -> tuple[Harness, ScriptedLLM]:
    ORDERED.clear()
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"pizza": True, "confirms": lambda m: "yes" in m}))
    llm.on(JourneyNodeSelection, per_journey(script))
    llm.on(ComposedReply, compose_echo)
    if plans:
        llm.on(ToolCallPlan, *plans)
    agent = make_agent(
        guidelines=guidelines,
        journeys=[journey],
        tools=[spec_of(choose_size), spec_of(order_pizza)],
    )
    tools = InProcessDispatcher(ToolRegistry([choose_size, order_pizza]))
    return Harness(agent, llm, tools=tools, index=False), llm


@pytest.mark.parametrize(
    ("name", "fills", "expected"),
    [
        ("choose_size", None, "size"),
        ("pick_account", None, "account"),
        ("select_day", None, "day"),
        ("list_orders", None, "list_orders"),
        ("choose_size", "pizza_size", "pizza_size"),
    ],
)
def test_a_pick_fills_the_declared_name_or_the_tools_name_without_its_verb(
    name: str, fills: str | None, expected: str
) -> None:
    spec = ToolSpec(name=name, kind=ToolKind.SELECTOR, fills=fills)
    assert spec.pick_name == expected


async def test_a_selector_pick_reaches_the_next_tools_parameter_by_name() -> None:
    journey = PIZZA[0]
    choose, order = step_number(journey, "choose"), step_number(journey, "order")
    h, llm = pizza_harness(PIZZA, {"Pizza": [advance(choose), advance(order)]})
    await h.start()
    asked = await h.say("I'd like a pizza")
    assert [o["label"] for o in asked.reply.data["options"]] == ["small", "medium", "large"]

    done = await h.say("3")  # the third option: "large" is nowhere in the customer's words

    assert ORDERED == ["large"]
    assert done.state.collected_values()["size"] == "large"
    record = next(c for c in done.trace.tool_calls if c.tool == "order_pizza")
    assert record.status == "ok"
    assert "size ← customer pick from choose_size" in record.sources
    assert llm.calls_for(ToolCallPlan) == []  # filled by name, not re-read by a model
    assert done.state.journey_paths["pizza"][-1] == "done"


async def test_a_hostile_model_never_turns_a_yes_into_a_pizza_size() -> None:
    """The customer picked "large", then said "yes" to the order; the model proposes size "yes"
    (it is in the customer's words, so grounding alone would let it through)."""
    journey = chain_journey(
        "pizza",
        "Pizza",
        "The customer wants a pizza",
        [("choose", "tool:choose_size"), ("confirm", "Ask the customer to confirm the order")],
    )
    order = Guideline(
        id="order",
        condition="The customer confirms the pizza order",
        action="Place the order",
        tools=("order_pizza",),
    )
    choose, confirm = step_number(journey[0], "choose"), step_number(journey[0], "confirm")
    h, _ = pizza_harness(
        journey,
        {"Pizza": [advance(choose), advance(confirm)]},
        guidelines=[order],
        plans=[
            {"calls": [{"tool": "order_pizza", "arguments": [{"name": "size", "value": "yes"}]}]}
        ],
    )
    await h.start()
    await h.say("I'd like a pizza")
    await h.say("large")

    out = await h.say("yes")

    assert ORDERED == ["large"]
    record = next(c for c in out.trace.tool_calls if c.tool == "order_pizza")
    assert record.arguments == {"size": "large"}
    assert "size ← customer pick from choose_size" in record.sources
    assert any("'yes' replaced by 'large'" in note for note in out.trace.notes)


def test_a_yaml_selector_declares_what_it_fills_and_only_interrupting_tools_may() -> None:
    def document(kind: str) -> dict:
        return {
            "agent": {"id": "shop", "name": "Shop"},
            "tools": [{"name": "choose_size", "kind": kind, "fills": "pizza_size"}],
        }

    agent = load_agent(document("selector"))
    assert agent.tool("choose_size").pick_name == "pizza_size"
    with pytest.raises(InvalidAgentDefinition) as refused:
        load_agent(document("general"))
    assert "only a selector or an interrupter fills a value" in str(refused.value)


# -- an interrupter completes only when its result arrives -------------------------------------


SAVED: list[str] = []


@tool(description="save the new address", consequential=True)
def save_address(street: str) -> ToolResult:
    SAVED.append(street)
    return ToolResult(data={"saved": True})


MOVE_AND_SAVE = chain_journey(
    "move",
    "Change address",
    "The customer moved",
    [
        ("form", "tool:address_form"),
        ("save", "tool:save_address"),
        ("thanks", "Thank the customer for the new address"),
    ],
)


def form_harness(script) -> tuple[Harness, ScriptedLLM]:
    CALLS.clear()
    SAVED.clear()
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"moved": True}))
    llm.on(JourneyNodeSelection, per_journey(script))
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(
        journeys=[MOVE_AND_SAVE], tools=[spec_of(address_form), spec_of(save_address)]
    )
    tools = InProcessDispatcher(ToolRegistry([address_form, save_address]))
    return Harness(agent, llm, tools=tools, index=False), llm


async def test_free_text_while_a_form_is_open_is_answered_without_completing_the_step() -> None:
    journey = MOVE_AND_SAVE[0]
    form, thanks = step_number(journey, "form"), step_number(journey, "thanks")
    # A hostile model claims the customer is past the form as soon as they say so.
    h, llm = form_harness({"Change address": [advance(form), advance(thanks)]})
    await h.start()
    asked = await h.say("I moved to a new place")
    pending = asked.state.pending_interrupt

    out = await h.say("done, I filled it in")

    assert out.state.pending_interrupt == pending  # the same form still waits
    assert out.state.journey_paths["move"] == ("form",)
    assert CALLS == ["address_form"]  # not run again: a new form would orphan the open one
    assert SAVED == []
    assert out.reply.text  # answered
    assert "has not completed this yet" in llm.calls_for(ComposedReply)[-1].prompt
    assert "street" not in out.state.collected_values()


async def test_a_result_for_another_call_does_not_complete_the_step() -> None:
    journey = MOVE_AND_SAVE[0]
    h, _ = form_harness({"Change address": [advance(step_number(journey, "form"))]})
    await h.start()
    await h.say("I moved to a new place")

    out = await h.say("", metadata={"resume": {"street": "Elm 2"}, "call_id": "turn_x:0"})

    assert out.state.pending_interrupt is not None
    assert SAVED == [] and "street" not in out.state.collected_values()
    assert any("ignored a result for 'turn_x:0'" in note for note in out.trace.notes)


async def test_a_form_result_completes_the_step_and_its_values_ground_the_next_tool() -> None:
    journey = MOVE_AND_SAVE[0]
    form, save = step_number(journey, "form"), step_number(journey, "save")
    h, llm = form_harness({"Change address": [advance(form), advance(save)]})
    await h.start()
    asked = await h.say("I moved to a new place")
    call_id = asked.state.pending_interrupt.call_id

    done = await h.say("", metadata={"resume": {"street": "Main St 1"}, "call_id": call_id})

    assert done.state.pending_interrupt is None
    assert SAVED == ["Main St 1"]  # by name, though the customer never typed it
    record = next(c for c in done.trace.tool_calls if c.tool == "save_address")
    assert "street ← form result of address_form" in record.sources
    assert done.state.journey_paths["move"][-1] == "thanks"
    assert CALLS == ["address_form"]
    assert llm.calls_for(ToolCallPlan) == []


@pytest.mark.parametrize(
    ("said", "picked"),
    [
        ("large please", "large"),
        ("I'll take the medium one", "medium"),
        ("the second", "medium"),
        ("the last one", "large"),
        ("first one, thanks", "small"),
        ("LARGE", "large"),
        ("extra large", None),  # not an option: asked again, never rounded to "large"
        ("yes", None),
        ("the fourth", None),
    ],
)
def test_a_pick_may_be_said_with_courtesy_words_or_by_position(
    said: str, picked: str | None
) -> None:
    options = [
        {"id": str(i), "label": label, "value": label}
        for i, label in enumerate(("small", "medium", "large"), start=1)
    ]
    assert resolve_pick(options, None, said) == picked


async def test_a_form_result_is_its_senders_even_when_another_sender_writes_after_it() -> None:
    """In a group session, the result of a form shown to one person arrives in the same turn
    as another person's message: its values are the person's who was asked, never evidence
    for the other's calls (the turn answers the last writer)."""
    journey = MOVE_AND_SAVE[0]
    form, save = step_number(journey, "form"), step_number(journey, "save")
    h, _ = form_harness({"Change address": [advance(form), advance(save)]})
    await h.start()
    asked = await h.say("I moved to a new place", metadata={"customer_id": "alice"})
    call_id = asked.state.pending_interrupt.call_id
    result = {"customer_id": "alice", "resume": {"street": "Main St 1"}, "call_id": call_id}

    out = await h.engine.handle(
        "s1",
        [
            InboundMessage(event_id="form", text="", metadata=result),
            InboundMessage(event_id="b1", text="hello all", metadata={"customer_id": "bob"}),
        ],
    )

    [street] = [c for c in out.state.collected if c.name == "street"]
    assert street.sender == "alice"
    assert SAVED == []  # never saved as bob's call on alice's form
    record = next(c for c in out.trace.tool_calls if c.tool == "save_address")
    assert record.status == "ungrounded"

    mine = await h.say("thanks", metadata={"customer_id": "alice"})

    assert SAVED == ["Main St 1"]  # alice's own result grounds alice's call
    assert mine.state.journey_paths["move"][-1] == "thanks"


STATEMENTS: list[str | None] = []


@tool(description="open the sign-in form", kind=ToolKind.INTERRUPTER)
def sign_in_form() -> ToolResult:
    return ToolResult(view={"type": "link", "url": "https://example.test/sso"})


@tool(description="send the account statement")
def send_statement(context: ToolContext) -> ToolResult:
    STATEMENTS.append(context.sender_id)
    return ToolResult(data={"sent": True})


SIGN_IN = chain_journey(
    "login", "Login", "The customer wants to log in", [("sso", "tool:sign_in_form")]
)
STATEMENT = chain_journey(
    "statement",
    "Statement",
    "The customer wants a statement",
    [("send", "tool:send_statement"), ("done", "Say the statement is on its way")],
    requires=["login"],
)


async def test_a_login_completed_by_a_form_counts_for_its_sender_not_the_last_writer() -> None:
    """A group's sign-in form, shown to alice, completes in a turn where bob writes after the
    result: the login is alice's, so bob gets no statement (a prerequisite counts only for
    the sender who completed it)."""
    STATEMENTS.clear()
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"statement": lambda m: "statement" in m}))
    sso, send = step_number(SIGN_IN[0], "sso"), step_number(STATEMENT[0], "send")
    llm.on(
        JourneyNodeSelection, per_journey({"Login": [advance(sso)], "Statement": [advance(send)]})
    )
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(
        journeys=[SIGN_IN, STATEMENT], tools=[spec_of(sign_in_form), spec_of(send_statement)]
    )
    tools = InProcessDispatcher(ToolRegistry([sign_in_form, send_statement]))
    h = Harness(agent, llm, tools=tools, index=False)
    await h.start()
    asked = await h.say("I want my statement", metadata={"customer_id": "alice"})
    assert asked.state.pending_interrupt.sender == "alice"
    call_id = asked.state.pending_interrupt.call_id
    result = {"customer_id": "alice", "resume": {"user": "alice"}, "call_id": call_id}

    out = await h.engine.handle(
        "s1",
        [
            InboundMessage(event_id="form", text="", metadata=result),
            InboundMessage(event_id="b1", text="hi all", metadata={"customer_id": "bob"}),
        ],
    )

    assert out.state.completed_by["login"] == ("alice",)
    assert None not in STATEMENTS and "bob" not in STATEMENTS

    await h.say("my statement please", metadata={"customer_id": "alice"})

    assert STATEMENTS == ["alice"]  # alice's login is hers
