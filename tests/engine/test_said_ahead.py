"""Said ahead: a selector's option named before its options are shown (or among other words while
they are) is the pick; the words of a request a prerequisite delayed stay evidence for the journey
it asked for. Only the customer's words count — never a value the model claims (docs/semantics.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.model import CollectedField
from engine.sessions.history import fold_history
from engine.sessions.session import Event, EventKind, EventSource, InboundMessage
from engine.testing import ScriptedLLM
from engine.toolkit import ToolResult, tool
from engine.tools.calls import named_option
from engine.tools.spec import ToolKind
from tests.engine.pipeline_kit import (
    Harness,
    advance,
    chain_journey,
    compose_echo,
    match_when,
    per_journey,
    step_number,
    tool_harness,
)
from tests.engine.test_journey_selection import T0

SIZES = [
    {"id": str(i), "label": label, "value": label}
    for i, label in enumerate(("small", "medium", "large"), start=1)
]


@pytest.mark.parametrize(
    ("said", "picked"),
    [
        ("a large with ham", "large"),
        ("I want to order a large pizza", "large"),
        ("LARGE please", "large"),
        ("not large, medium", "medium"),
        ("large or medium", None),  # two options named: the options are shown
        ("larger than usual", None),  # a label inside a larger word names nothing
        ("extra large", None),  # qualified: not an option, never rounded to "large"
        ("I'd like a pizza", None),
    ],
)
def test_an_option_is_named_only_alone_and_as_whole_words(said: str, picked: str | None) -> None:
    option = named_option(SIZES, [said])
    assert (option["value"] if option else None) == picked


def test_a_number_among_other_words_never_names_an_option() -> None:
    # "2" answers a quantity or is part of a PIN; an option id is not words either.
    numbered = [{"id": str(n), "label": str(n), "value": n} for n in (1, 2, 3)]
    assert named_option(numbered, ["2 pizzas please"]) is None


def test_options_named_in_different_messages_are_ambiguous() -> None:
    assert named_option(SIZES, ["a large pizza", "make it small"]) is None


# -- through the pipeline ---------------------------------------------------------------------

CALLS: list[str] = []


@tool(description="offer the pizza sizes", kind=ToolKind.SELECTOR)
def choose_size() -> ToolResult:
    CALLS.append("choose_size")
    return ToolResult(data=["small", "medium", "large"])


LOGIN = chain_journey(
    "login",
    "Login",
    "The customer wants to log in",
    [("ask_username", "Ask for the username", {"collects": (CollectedField(name="username"),)})],
)


def order(*requires: str) -> Any:
    return chain_journey(
        "order",
        "Pizza order",
        "The customer wants to order a pizza",
        [
            ("choose", "tool:choose_size"),
            ("ask_toppings", "Ask which toppings",
             {"collects": (CollectedField(name="toppings"),)}),
            ("ask_quantity", "Ask how many pizzas",
             {"collects": (CollectedField(name="quantity", type="int", gt=0),)}),
            ("thanks", "Thank the customer"),
        ],
        requires=list(requires),
    )  # fmt: skip


def harness(order_answers: list[Any], *, requires: tuple[str, ...] = ()) -> Harness:
    CALLS.clear()
    llm = ScriptedLLM()
    llm.on(
        GuidelineMatchBatch,
        match_when({"order a pizza": lambda m: "pizza" in m, "log in": False}),
    )
    user = step_number(LOGIN[0], "ask_username")
    llm.on(
        JourneyNodeSelection,
        per_journey(
            {
                "Pizza order": order_answers,
                "Login": [{**advance(user, collected={"username": "seldo"}), "next_step": "NONE"}],
            }
        ),
    )
    llm.on(ComposedReply, compose_echo)
    journeys = [LOGIN, order(*requires)] if requires else [order()]
    return tool_harness(llm, choose_size, journeys=journeys, index=False)


def steps(name: str) -> str:
    return step_number(order()[0], name)


async def test_a_size_said_with_the_request_is_the_pick_and_no_options_are_shown() -> None:
    h = harness([advance(steps("choose"))])
    await h.start()

    out = await h.say("I want to order a large pizza")

    assert out.state.pending_interrupt is None
    assert "options" not in out.reply.data
    assert out.state.collected_values("order") == {"size": "large"}
    assert out.state.journey_paths["order"] == ("choose", "ask_toppings")
    assert CALLS == ["choose_size"]


async def test_two_sizes_said_with_the_request_show_the_options() -> None:
    h = harness([advance(steps("choose"))])
    await h.start()

    out = await h.say("I want to order a pizza, large or medium")

    assert out.state.pending_interrupt is not None
    assert [o["label"] for o in out.reply.data["options"]] == ["small", "medium", "large"]
    assert "size" not in out.state.collected_values("order")


async def test_a_size_among_other_words_answers_the_shown_options() -> None:
    h = harness([advance(steps("choose"))])
    await h.start()
    await h.say("I want to order a pizza")

    kept_open = await h.say("extra large")  # not an option: asked again
    assert kept_open.state.pending_interrupt is not None
    runs = len(CALLS)

    out = await h.say("a large with ham")

    assert out.state.pending_interrupt is None
    assert out.state.collected_values("order")["size"] == "large"
    assert out.state.journey_paths["order"][-1] == "ask_toppings"
    assert len(CALLS) == runs  # the selector is not run again on the pick


async def test_a_hostile_model_never_makes_a_pick_the_customer_did_not_say() -> None:
    # Adversarial: node selection claims a size (and passes the selector step) every turn.
    claim = advance(steps("choose"), steps("ask_toppings"), collected={"size": "large"})
    h = harness([claim], requires=("login",))
    await h.start()

    await h.say("I want to order a pizza")
    out = await h.say("seldo")  # the login completes; the order resumes at the selector

    assert out.state.pending_interrupt is not None
    assert out.state.journey_paths["order"] == ("choose",)
    assert "size" not in out.state.collected_values("order")


async def test_a_size_said_before_a_prerequisite_is_the_pick_when_the_journey_resumes() -> None:
    h = harness([advance(steps("choose"))], requires=("login",))
    await h.start()

    asked = await h.say("I want to order a large pizza")
    assert asked.state.journey_paths.get("login") == ("ask_username",)
    request = next(e for e in asked.new_events if e.source is EventSource.CUSTOMER)
    assert asked.state.said_with_request == {"order": (request.offset,)}

    out = await h.say("seldo")

    assert "login" in out.state.completed_journeys
    assert out.state.pending_interrupt is None
    assert out.state.collected_values("order") == {"size": "large"}
    assert out.state.journey_paths["order"] == ("choose", "ask_toppings")


async def test_a_value_said_before_a_prerequisite_is_taken_ahead_after_it() -> None:
    """The model reads the quantity from the request two turns later, at the toppings step (the
    size was picked from the request when the order resumed): kept, the request's words hold it."""
    later = advance(steps("ask_toppings"), collected={"toppings": "mushrooms", "quantity": "2"})
    h = harness([later], requires=("login",))
    await h.start()
    await h.say("I want to order 2 large pizzas")
    await h.say("seldo")

    out = await h.say("mushrooms")

    assert out.state.collected_values("order") == {
        "size": "large",
        "toppings": "mushrooms",
        "quantity": 2,
    }
    assert out.state.journey_paths["order"][-1] == "thanks"


async def test_a_value_the_model_claims_for_the_request_is_not_taken_ahead() -> None:
    # Adversarial: the request said no quantity; the model claims 3.
    later = advance(steps("ask_toppings"), collected={"toppings": "mushrooms", "quantity": "3"})
    h = harness([later], requires=("login",))
    await h.start()
    await h.say("I want to order a large pizza")
    await h.say("seldo")

    out = await h.say("mushrooms")

    assert "quantity" not in out.state.collected_values("order")
    assert out.state.journey_paths["order"][-1] == "ask_quantity"


async def test_the_request_is_let_go_when_its_journey_ends() -> None:
    h = harness([advance(steps("choose"))], requires=("login",))
    await h.start()
    await h.say("I want to order a pizza")
    resumed = await h.say("seldo")
    assert set(resumed.state.said_with_request) == {"order"}  # running: still evidence

    done_with = {"toppings": "mushrooms", "quantity": "2"}
    claim_done = {**advance(steps("thanks"), collected=done_with), "next_step": "NONE"}
    h.llm.on(JourneyNodeSelection, per_journey({"Pizza order": [claim_done]}))
    await h.say("1")
    await h.say("mushrooms")
    await h.say("two")  # the walk stops at each step until its value is given
    done = await h.say("thanks")

    assert "order" in done.state.completed_journeys
    assert done.state.said_with_request == {}


def _message(offset: int, text: str) -> Event:
    return Event(
        id=f"e{offset}",
        offset=offset,
        kind=EventKind.MESSAGE,
        source=EventSource.CUSTOMER,
        created_at=T0,
        text=text,
    )


def test_a_waiting_journeys_request_is_kept_when_it_leaves_the_window() -> None:
    events = [_message(i, f"message {i}") for i in range(60)]

    _, kept = fold_history((), (), events, [], requests={3})
    _, nothing = fold_history((), (), events, [])

    assert [e.offset for e in kept] == [3]
    assert kept[0].text == "message 3"
    assert nothing == ()


async def test_another_senders_words_never_make_the_pick() -> None:
    """In one session of several senders, the journey that reaches the selector answers the
    turn's sender: a size another person said in the same burst is theirs, not this pick."""

    async def burst(*said: tuple[str, str]) -> Any:
        """A fresh pizza session that receives these (sender, text) messages in one turn."""
        h = harness([advance(steps("choose"))])
        await h.start()
        messages = [
            InboundMessage(event_id=f"m{n}", text=text, metadata={"customer_id": sender})
            for n, (sender, text) in enumerate(said)
        ]
        return await h.engine.handle("s1", messages)

    out = await burst(("bea", "large"), ("ann", "I want to order a pizza"))
    assert out.state.pending_interrupt is not None  # the options are shown to ann
    assert out.state.pending_interrupt.sender == "ann"
    assert "size" not in out.state.collected_values("order")

    own = await burst(("ann", "a large one"), ("ann", "I want to order a pizza"))
    assert own.state.collected_values("order") == {"size": "large"}  # ann's own words pick
