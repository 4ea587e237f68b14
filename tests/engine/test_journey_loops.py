"""Looping journeys keep bounded state (issue #31): a transfer that loops on insufficient funds a
hundred times, a login that keeps failing and a stock lookup asked two hundred times store a
journey path that stays under its bound (`engine.matching.journey_graph.path_bound`), and the
session and the turn's trace stop growing once the event window is full — while the journey
still behaves: after the loops a sufficient amount transfers exactly once, with the right
values (docs/semantics.md, "Bounded journey paths")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from engine.matching.journey_graph import path_bound
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.recall.vectors import agent_index_texts, build_index
from engine.sessions.session import InboundMessage, SessionState
from engine.toolkit import InProcessDispatcher
from engine.turn import EngineDeps, TurnEngine, TurnOutput
from examples.banking import bank, load
from examples.banking.tools import registry
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM

Say = Callable[[str], Awaitable[TurnOutput]]
AGENT = load()


async def concierge(llm: Any = None) -> Say:
    """The banking concierge on in-memory ports, the offline model unless `llm` is given."""
    bank.reset_bank()
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(AGENT)
    embedder = HashingEmbedder()
    index = await build_index(embedder, agent_index_texts(AGENT))

    async def index_for(_agent: Any) -> Any:
        return index

    engine = TurnEngine(
        agents,
        sessions,
        EngineDeps(llm=llm or OfflineLLM(), embedder=embedder, tools=InProcessDispatcher(registry)),
        index_for=index_for,
    )
    await sessions.create(SessionState(id="s", agent_id=AGENT.id, customer_id="c"))
    counter = iter(range(1, 100_000))

    async def say(text: str) -> TurnOutput:
        message = InboundMessage(event_id=f"m{next(counter)}", text=text)
        return await engine.handle("s", [message])

    return say


def assert_bounded(out: TurnOutput) -> None:
    """Every stored path, and every path the turn's trace records, is under its bound."""
    for jid, path in out.state.journey_paths.items():
        assert len(path) <= path_bound(AGENT.journey(jid)), (jid, len(path), path)
    for move in out.trace.journeys:
        # the trace holds the stored path before the turn and where this turn's walk took it
        bound = path_bound(AGENT.journey(move.journey_id))
        assert len(move.previous_path) <= bound, (move.journey_id, move.previous_path)


def sizes(out: TurnOutput) -> tuple[int, int]:
    return len(out.state.model_dump_json()), len(out.trace.model_dump_json())


async def test_a_transfer_looping_on_insufficient_funds_keeps_a_bounded_path() -> None:
    say = await concierge()
    for text in ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324"]:
        await say(text)

    measured: list[tuple[int, int]] = []
    for loop in range(100):
        out = await say(str(1001 + loop))  # the checking account holds 1000.00
        assert out.state.journey_paths["transfer"][-1] == "insufficient", out.reply.text
        assert_bounded(out)
        measured.append(sizes(out))

    # The event window filled long before: the session and the trace no longer grow per loop.
    session_at_50, trace_at_50 = measured[49]
    assert all(session <= session_at_50 + 64 for session, _ in measured[50:])
    assert all(trace <= trace_at_50 + 256 for _, trace in measured[50:])

    done = await say("500")

    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]
    assert done.reply.text == (
        "Done! I transferred 500.00 USD to account 1234324. Your new balance is $500.00."
    )
    assert "transfer" in done.state.completed_journeys
    assert_bounded(done)


async def test_a_login_that_keeps_failing_keeps_a_bounded_path() -> None:
    say = await concierge()
    await say("I want to log in")
    await say("seldo")
    for attempt in range(60):
        out = await say(f"wrong-{attempt}")  # a wrong password, again and again
        assert "authenticate" not in out.state.completed_journeys
        assert out.state.active_journey_ids == ["authenticate"]
        assert_bounded(out)
        if "username" in out.reply.text:  # the step that asks for it again after a failure
            out = await say("seldo")
            assert_bounded(out)
        assert "password" in out.reply.text, out.reply.text

    done = await say("monkey")

    assert "authenticate" in done.state.completed_journeys
    assert "logged in" in done.reply.text
    assert_bounded(done)


async def test_a_stock_lookup_asked_two_hundred_times_keeps_a_bounded_path() -> None:
    say = await concierge()
    for n in range(200):
        out = await say("What is the stock price of AAPL?")
        assert "AAPL" in out.reply.text, (n, out.reply.text)
        assert "stock" not in out.state.active_journey_ids
        assert_bounded(out)
    assert len(out.state.journey_paths["stock"]) <= path_bound(AGENT.journey("stock"))
