"""The reference implementation's worked example, as one of our agents, for the benchmarks.

`reference_agent(...)` + `reference_session(...)`: the worked example of
shared/notes/reference-engine.md §2 — 30 guidelines (25 actionable, 3 observational including
the journey trigger, 2 previously applied), one journey active mid-flow at a chat state, one
tool call — and its variants (no tool, tool via a journey step, two journeys active). Built with
`engine.authoring.Agent`; the other guidelines get made-up topic words (`bench.topic_words`), and
the tools answer through `bench.synthetic_tools.SyntheticTools`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from bench.topic_words import Words
from engine.authoring import END_JOURNEY, Agent
from engine.model import AgentSnapshot
from engine.sessions.session import CollectedValue, Event, EventKind, EventSource, SessionState
from engine.tools.spec import ToolParameter, ToolSpec

REFERENCE_VARIANTS = {
    "tool_via_guideline": "exact shape: the tool's argument comes from the message (LLM plans it)",
    "tool_via_journey_step": "same, but the tool is the journey's next step (arguments collected)",
    "no_tool": "same turn without any tool",
    "two_journeys": "two journeys active mid-flow + the tool via a guideline",
}


@dataclass(frozen=True)
class ReferenceScenario:
    variant: str
    snapshot: AgentSnapshot
    session: SessionState
    message: str


_LOOKUP_ORDER = ToolSpec(
    name="lookup_order",
    description="Look up an order's status and items by its order number",
    parameters=(ToolParameter(name="order_number", description="e.g. ORD-1234"),),
    # It only reads: with speculation on, a predicted lookup runs ahead (never submit_return).
    speculative=True,
)
_SUBMIT_RETURN = ToolSpec(
    name="submit_return",
    description="Register a return for an order",
    parameters=(
        ToolParameter(name="order_number", description="the order to return"),
        ToolParameter(name="reason", description="why the customer returns it"),
    ),
)


def _return_journey(agent: Agent) -> None:
    journey = agent.create_journey(
        title="Product return",
        conditions=["The customer wants to return a product"],
        description="Registers a return: which order, why, then the return label",
        id="returns",
    )
    ask_order = journey.initial_state.transition_to(
        chat_state="Ask for the order number of the product to return",
        collects={"order_number": "str"},
        id="ask_order",
    )
    ask_reason = ask_order.transition_to(
        chat_state="Ask why the customer is returning the product",
        collects={"reason": "str"},
        condition="The customer gave the order number",
        id="ask_reason",
    )
    submit = ask_reason.transition_to(
        tool_state=_SUBMIT_RETURN, condition="The customer gave a reason", id="submit"
    )
    label = submit.transition_to(
        chat_state="Tell the customer the return is registered and a label was emailed",
        id="label",
    )
    label.transition_to(state=END_JOURNEY)


def _address_journey(agent: Agent) -> None:
    journey = agent.create_journey(
        title="Address change",
        conditions=["The customer wants to change their delivery address"],
        description="Updates the delivery address on file",
        id="address",
    )
    ask_street = journey.initial_state.transition_to(
        chat_state="Ask for the new street address",
        collects={"street": "str"},
        id="ask_street",
    )
    ask_city = ask_street.transition_to(
        chat_state="Ask for the city and postal code of the new address",
        collects={"city": "str"},
        condition="The customer gave the street",
        id="ask_city",
    )
    confirm = ask_city.transition_to(
        chat_state="Confirm the new address and when it takes effect",
        condition="The customer gave the city",
        id="confirm",
    )
    confirm.transition_to(state=END_JOURNEY)


def reference_agent(variant: str) -> AgentSnapshot:
    """30 guidelines: 25 actionable, 3 observational (one is the journey's trigger), 2 that the
    session has applied before; the journey(s) of the variant."""
    if variant not in REFERENCE_VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; one of {', '.join(REFERENCE_VARIANTS)}")
    words = Words()
    agent = Agent(id=f"reference-{variant}", name="Retail support", description="An online shop")
    for i in range(25):
        a, b = words.take()
        tools = [_LOOKUP_ORDER] if i == 0 and variant != "no_tool" else ()
        if i == 0:  # the guideline whose tool the customer's message calls for
            a, b = "shipment", "status"
        agent.create_guideline(
            f"The customer asks about the {a} {b} of an order or account",
            f"Explain the {a} {b} clearly, mention any fee or delay that applies, and offer help",
            tools=tools,
            id=f"act{i}",
        )
    for i in range(2):
        a, b = words.take()
        agent.create_observation(f"The customer is frustrated about the {a} {b}", id=f"obs{i}")
    for i in range(2):
        a, b = words.take()
        agent.create_guideline(
            f"The customer greets the agent or asks about the {a} {b}",
            f"Welcome the customer and mention the {a} {b} offer",
            id=f"applied{i}",
        )
    _return_journey(agent)
    if variant == "two_journeys":
        _address_journey(agent)  # its trigger makes a 31st (observational) guideline
    if variant == "tool_via_journey_step":
        agent.register_tool(_LOOKUP_ORDER)  # same tools as the other variants, unused here
    return agent.build()


def _history(turns: Sequence[tuple[str, str]]) -> tuple[Event, ...]:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    events: list[Event] = []
    for i, (who, text) in enumerate(turns):
        events.append(
            Event(
                id=f"ev{i}",
                offset=i,
                kind=EventKind.MESSAGE,
                source=EventSource.CUSTOMER if who == "customer" else EventSource.AGENT,
                created_at=at,
                turn_id=f"t{i // 2}",
                text=text,
            )
        )
    return tuple(events)


def reference_session(variant: str, session_id: str) -> ReferenceScenario:
    """The session just before the measured turn, and the customer's message for it."""
    snapshot = reference_agent(variant)
    history = [
        ("customer", "Hello there"),
        ("agent", "Welcome! How can I help you today?"),
        ("customer", "I want to return a product I bought last week"),
        ("agent", "Sure. What is the order number of the product you want to return?"),
    ]
    paths: dict[str, tuple[str | None, ...]] = {"returns": ("ask_order",)}
    collected: list[CollectedValue] = []
    message = "The order number is ORD-5521. And what is the shipment status of ORD-5521?"
    if variant == "no_tool":
        message = "The order number is ORD-5521."
    if variant == "tool_via_journey_step":
        history += [
            ("customer", "It is ORD-5521"),
            ("agent", "Thanks. Why are you returning the product?"),
        ]
        paths = {"returns": ("ask_order", "ask_reason")}
        collected = [
            CollectedValue(
                journey_id="returns",
                node_id="ask_order",
                name="order_number",
                value="ORD-5521",
                turn_id="t2",
            )
        ]
        message = "It arrived damaged."
    if variant == "two_journeys":
        history += [
            ("customer", "Also I moved, I want to change my delivery address"),
            ("agent", "Of course. What is the new street address?"),
        ]
        paths = {"returns": ("ask_order",), "address": ("ask_street",)}
        message = "The order number is ORD-5521, the new street is Elm Road 12-B. What is the shipment status of ORD-5521?"
    session = SessionState(
        id=session_id,
        agent_id=snapshot.id,
        customer_id="customer-1",
        version=len(history) // 2,
        events=_history(history),
        journey_paths=paths,
        applied_guideline_ids=("applied0", "applied1"),
        collected=tuple(collected),
    )
    return ReferenceScenario(variant, snapshot, session, message)
