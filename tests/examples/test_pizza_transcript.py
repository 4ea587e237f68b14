"""The pizza shop through the real engine, the offline model and the shop's tools: log in, pick a
size from buttons, give toppings, a count and an address — exactly one order with those values.
Said verbatim, the order runs at once; with a count written in words ("two"), the agent states the
exact order and places it only after a yes. Orders of other customers are never shown."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.recall.vectors import agent_index_texts, build_index
from engine.sessions.session import InboundMessage, SessionState
from engine.toolkit import InProcessDispatcher
from engine.turn import EngineDeps, TurnEngine, TurnOutput
from examples.pizza import load, shop
from examples.pizza.tools import registry
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM

Say = Callable[..., Awaitable[TurnOutput]]
LOGIN = ["I want to order a pizza", "555-0100", "4321"]
LARGE = "3"  # the id of the "large" button the size selector offers


@pytest.fixture
async def pizzeria() -> Say:
    shop.reset_shop()
    agent = load()
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(agent)
    embedder = HashingEmbedder()
    index = await build_index(embedder, agent_index_texts(agent))

    async def index_for(_agent: object) -> object:
        return index

    engine = TurnEngine(
        agents,
        sessions,
        EngineDeps(llm=OfflineLLM(), embedder=embedder, tools=InProcessDispatcher(registry)),
        index_for=index_for,  # type: ignore[arg-type]
    )
    await sessions.create(SessionState(id="s", agent_id=agent.id, customer_id="c"))
    counter = iter(range(1, 1000))

    async def say(text: str = "", choice: str | None = None) -> TurnOutput:
        message = InboundMessage(event_id=f"m{next(counter)}", text=text, choice=choice)
        return await engine.handle("s", [message])

    return say


async def _order_up_to_the_count(say: Say) -> list[TurnOutput]:
    replies = [await say(text) for text in LOGIN]
    replies.append(await say(choice=LARGE))
    replies.append(await say("mushrooms and olives"))
    return replies


async def test_values_said_verbatim_place_exactly_one_order_without_a_confirmation(
    pizzeria: Say,
) -> None:
    replies = await _order_up_to_the_count(pizzeria)
    replies.append(await pizzeria("2"))
    done = await pizzeria("12 Baker Street")

    assert "phone number" in replies[0].reply.text and "PIN" in replies[1].reply.text
    sizes = replies[2].reply.data["options"]
    assert [o["label"] for o in sizes] == ["small", "medium", "large"]
    assert "toppings" in replies[3].reply.text
    assert "How many" in replies[4].reply.text and "address" in replies[5].reply.text
    assert done.reply.text == (
        "Your order P-8001 is placed: 2 large pizza(s) with mushrooms and olives, delivered to "
        "12 Baker Street."
    )
    assert all(o.state.pending_confirmation is None for o in [*replies, done])
    [order] = shop.SHOP.placed()
    assert (order.size, order.toppings, order.quantity, order.address) == (
        "large",
        "mushrooms and olives",
        2,
        "12 Baker Street",
    )
    assert order.owner == "5550100"  # the principal the login established
    assert set(done.state.completed_journeys) == {"login", "order"}


async def test_a_count_in_words_is_confirmed_first_and_ordered_only_after_yes(
    pizzeria: Say,
) -> None:
    await _order_up_to_the_count(pizzeria)
    await pizzeria("two")
    asked = await pizzeria("12 Baker Street")

    assert shop.SHOP.placed() == []
    assert asked.trace.tool_calls[-1].status == "awaiting_confirmation"
    assert "quantity" in asked.trace.tool_calls[-1].detail  # the inferred value
    assert (
        "Please confirm — Place the pizza order (size large, toppings mushrooms and olives, "
        "quantity 2, address 12 Baker Street)"
    ) in asked.reply.text
    assert [o["id"] for o in asked.reply.data["options"]] == ["confirm", "cancel"]

    done = await pizzeria("yes")

    [order] = shop.SHOP.placed()
    assert (order.size, order.quantity, order.address) == ("large", 2, "12 Baker Street")
    assert "P-8001 is placed" in done.reply.text


async def test_a_no_to_the_confirmation_orders_nothing(pizzeria: Say) -> None:
    await _order_up_to_the_count(pizzeria)
    await pizzeria("two")
    await pizzeria("12 Baker Street")

    declined = await pizzeria("no")

    assert shop.SHOP.placed() == []
    assert declined.state.pending_confirmation is None


async def test_a_closed_kitchen_places_nothing_and_the_journey_stays_at_the_order(
    pizzeria: Say,
) -> None:
    await _order_up_to_the_count(pizzeria)
    await pizzeria("25")
    failed = await pizzeria("12 Baker Street")

    assert shop.SHOP.placed() == []
    assert failed.state.journey_paths["order"][-1] == "place"
    assert failed.state.failed_steps == {"order": "place"}
    assert "order" not in failed.state.completed_journeys
    assert "is placed" not in failed.reply.text
    assert "cannot bake more than 20 pizzas" in failed.reply.text


async def test_the_status_of_another_customers_order_is_refused(pizzeria: Say) -> None:
    for text in ["I want to log in", "555-0100", "4321"]:
        await pizzeria(text)

    out = await pizzeria("What is the status of order P-7001?")

    [call] = out.trace.tool_calls
    assert (call.tool, call.status) == ("lookup_order_status", "error")
    assert "not one of this customer's orders" in call.detail
    assert "out for delivery" not in out.reply.text
