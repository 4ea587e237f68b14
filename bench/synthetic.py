"""Synthetic agents and conversations for the benchmarks, built with `engine.authoring.Agent`.

Every guideline and journey gets its own made-up topic words ("the velori trasko"), so the
fake LLM's lexical reading matches exactly what a conversation mentions and nothing else, and
vector recall (hashing embedder) finds the journey the customer talks about.

Two families:
- `scale_agent(shape)`: N guidelines across J journeys, most of them journey-scoped (as in real
  agents), plus a share of agent-wide ("global") guidelines; journeys of five to six steps with a
  tool step, half of them with a fork after the tool. `scale_conversation` talks to one journey
  for four turns: enter it (and ask about a global topic), answer its two questions (the second
  answer runs its tool), then ask about a topic whose guideline calls a tool.
- `reference_agent(...)` + `reference_session(...)`: the worked example of
  shared/notes/reference-engine.md §2 — 30 guidelines (25 actionable, 3 observational including
  the journey trigger, 2 previously applied), one journey active mid-flow at a chat state, one
  tool call — and its variants (no tool, tool via a journey step, two journeys active).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.authoring import END_JOURNEY, Agent
from engine.authoring.journey_builder import JourneyBuilder
from engine.model import AgentSnapshot
from engine.ports import ToolCall, ToolContext, ToolOutcome
from engine.session import CollectedValue, Event, EventKind, EventSource, SessionState
from engine.tool_spec import ToolParameter, ToolSpec

# --------------------------------------------------------------------------------------------------
# Topic words

_ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "tr",
    "kr",
    "pl",
    "br",
    "st",
]
_VOWELS = ["a", "e", "i", "o", "u"]
_CODAS = ["", "n", "r", "s", "l"]
_SYLLABLES = [o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS]  # 375


def topic_word(i: int) -> str:
    """The i-th made-up word: three syllables, deterministic, distinct for i < 375**3."""
    n = len(_SYLLABLES)
    j = (i * 2_654_435_761 + 12_345) % n**3  # a bijection (coprime multiplier) that spreads
    return _SYLLABLES[j // (n * n)] + _SYLLABLES[(j // n) % n] + _SYLLABLES[j % n]


class Words:
    """Hands out fresh topic words in a fixed order."""

    def __init__(self) -> None:
        self._next = 0

    def take(self, count: int = 2) -> list[str]:
        out = [topic_word(self._next + k) for k in range(count)]
        self._next += count
        return out


VERBS = ["renew", "cancel", "upgrade", "transfer", "report", "replace", "close", "open"]


# --------------------------------------------------------------------------------------------------
# Scale agents


@dataclass(frozen=True)
class Shape:
    """Authored guidelines (journey conditions and projected steps are extra), journeys, and how
    many of the guidelines are agent-wide; the rest are spread over the journeys."""

    guidelines: int
    journeys: int
    global_guidelines: int

    @property
    def scoped_guidelines(self) -> int:
        return self.guidelines - self.global_guidelines

    @property
    def label(self) -> str:
        return f"{self.guidelines:,} guidelines / {self.journeys} journeys"


SCALE_SHAPES = (
    Shape(10, 5, 5),
    Shape(100, 20, 20),
    Shape(1_000, 100, 100),
    Shape(5_000, 200, 250),
)


@dataclass(frozen=True)
class GlobalTopic:
    index: int
    words: tuple[str, str]
    kind: str  # "actionable" | "observational" | "tool"


@dataclass(frozen=True)
class JourneyTopic:
    id: str
    words: tuple[str, str]
    verb: str
    forked: bool
    scoped_words: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ScaleAgent:
    shape: Shape
    snapshot: AgentSnapshot
    globals: tuple[GlobalTopic, ...]
    journeys: tuple[JourneyTopic, ...]


def _tools() -> tuple[list[ToolSpec], list[ToolSpec]]:
    submit = [
        ToolSpec(
            name=f"submit_request_{k}",
            description="Submit the customer's request to the back office",
            parameters=(
                ToolParameter(name="reference", description="the request's reference number"),
                ToolParameter(name="amount", type="number", description="the amount"),
            ),
        )
        for k in range(10)
    ]
    lookup = [
        ToolSpec(
            name=f"lookup_record_{k}",
            description="Look up a record by its reference",
            parameters=(ToolParameter(name="record", description="the record's reference"),),
        )
        for k in range(5)
    ]
    return submit, lookup


def _global_kind(i: int) -> str:
    if i % 10 == 9:
        return "observational"
    if i % 7 == 3:
        return "tool"
    return "actionable"


def _add_journey(
    agent: Agent, words: Words, j: int, submit: Sequence[ToolSpec]
) -> tuple[JourneyBuilder, JourneyTopic]:
    a, b = words.take()
    verb = VERBS[j % len(VERBS)]
    forked = j % 2 == 1
    journey = agent.create_journey(
        title=f"{a.capitalize()} {b} {verb}",
        conditions=[f"The customer wants to {verb} a {a} {b}"],
        description=f"Handles requests to {verb} a {a} {b}, from its reference to confirmation",
        id=f"j{j}",
    )
    ask_ref = journey.initial_state.transition_to(
        chat_state=f"Ask for the reference number of the {a} {b}",
        collects={"reference": "str"},
        id="ask_reference",
    )
    ask_amount = ask_ref.transition_to(
        chat_state=f"Ask how much the customer wants to {verb} for the {a} {b}",
        collects={"amount": "decimal>0"},
        condition="The customer gave the reference number",
        id="ask_amount",
    )
    submit_state = ask_amount.transition_to(
        tool_state=submit[j % len(submit)],
        condition="The customer gave an amount",
        id="submit",
    )
    confirm_text = (
        f"Confirm the {a} {b} {verb} with its reference and amount, and ask whether the "
        "customer needs anything else"
    )
    if forked:
        fork = submit_state.transition_to(fork_state="Was the request accepted?", id="accepted")
        confirm = fork.fork(
            "The request was accepted (accepted is true)", chat_state=confirm_text, id="confirm"
        )
        retry = fork.fork(
            "The request was rejected (accepted is false)",
            chat_state=f"Say the {a} request was rejected and ask for a smaller amount",
            collects={"amount": "decimal>0"},
            id="retry",
        )
        assert confirm is not None and retry is not None
        retry.transition_to(state=submit_state, condition="The customer gave a new amount")
    else:
        confirm = submit_state.transition_to(chat_state=confirm_text, id="confirm")
    confirm.transition_to(state=END_JOURNEY)
    return journey, JourneyTopic(f"j{j}", (a, b), verb, forked, ())


def scale_agent(shape: Shape) -> ScaleAgent:
    """A validated snapshot of the given shape, plus the topic words a conversation can use."""
    words = Words()
    agent = Agent(
        id=f"synthetic-{shape.guidelines}",
        name="Synthetic service agent",
        description="A service agent for many kinds of requests",
    )
    submit, lookup = _tools()
    globals_: list[GlobalTopic] = []
    for i in range(shape.global_guidelines):
        a, b = words.take()
        kind = _global_kind(i)
        if kind == "observational":
            agent.create_observation(
                f"The customer says the {a} {b} is unclear or confusing", id=f"g{i}"
            )
        else:
            agent.create_guideline(
                f"The customer asks about the {a} {b} or how it affects them",
                f"Explain how the {a} {b} works, mention any fee that applies, and offer to help",
                tools=[lookup[i % len(lookup)]] if kind == "tool" else (),
                id=f"g{i}",
            )
        globals_.append(GlobalTopic(i, (a, b), kind))
    journeys: list[JourneyTopic] = []
    per_journey = [shape.scoped_guidelines // shape.journeys] * shape.journeys
    for j in range(shape.scoped_guidelines % shape.journeys):
        per_journey[j] += 1
    for j in range(shape.journeys):
        builder, topic = _add_journey(agent, words, j, submit)
        scoped: list[tuple[str, str]] = []
        for k in range(per_journey[j]):
            a, b = words.take()
            builder.create_guideline(
                f"The customer mentions the {a} {b} of the {topic.words[0]}",
                f"Note the {a} {b}, and explain that it does not delay the {topic.verb}",
                id=f"j{j}s{k}",
            )
            scoped.append((a, b))
        journeys.append(
            JourneyTopic(topic.id, topic.words, topic.verb, topic.forked, tuple(scoped))
        )
    return ScaleAgent(shape, agent.build(), tuple(globals_), tuple(journeys))


def scale_conversation(agent: ScaleAgent, n: int) -> list[str]:
    """Four customer messages for conversation number `n`: enter a journey while asking about an
    agent-wide topic; give the reference (mentioning a journey-scoped topic); give the amount
    (the journey's tool step runs); then ask about a topic whose guideline calls a tool."""
    journey = agent.journeys[(n * 7) % len(agent.journeys)]
    actionable = [g for g in agent.globals if g.kind == "actionable"]
    tooled = [g for g in agent.globals if g.kind == "tool"] or actionable
    topic = actionable[(n * 3) % len(actionable)]
    tool_topic = tooled[n % len(tooled)]
    a, b = journey.words
    scoped = journey.scoped_words[n % len(journey.scoped_words)] if journey.scoped_words else None
    about_scoped = f"About the {scoped[0]} {scoped[1]}: " if scoped else ""
    return [
        f"Hi, I would like to {journey.verb} a {a} {b}. "
        f"Also, how does the {topic.words[0]} {topic.words[1]} work?",
        f"{about_scoped}the reference is RQ-{4000 + n}.",
        f"Make it {150 + 10 * n} please.",
        f"Great. Could you look at the {tool_topic.words[0]} {tool_topic.words[1]} for "
        f"record RC-{7000 + n}?",
    ]


# --------------------------------------------------------------------------------------------------
# The reference implementation's worked example, as one of our agents


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


# --------------------------------------------------------------------------------------------------
# Tools behind the synthetic agents


class SyntheticTools:
    """`ToolDispatcher` for the synthetic agents' tools: instant, deterministic results."""

    async def dispatch(self, calls: Sequence[ToolCall], context: ToolContext) -> list[ToolOutcome]:
        return [ToolOutcome(call_id=c.id, tool=c.tool, data=_tool_data(c)) for c in calls]


def _tool_data(call: ToolCall) -> dict[str, Any]:
    args = call.arguments
    if call.tool.startswith("submit"):
        return {"accepted": True, "ticket": f"TK-{len(call.idempotency_key) * 37 % 10_000}"}
    if call.tool == "lookup_order":
        return {"order_number": args.get("order_number"), "status": "shipped", "items": 2}
    return {"record": next(iter(args.values()), None), "status": "active", "balance": "120.00"}
