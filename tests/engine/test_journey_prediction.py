"""Journey prediction by vector recall only above `journey_min_similarity`: a "thanks" or a
greeting predicts no journey, so no speculative node selection is paid for it, while a transfer
request still predicts the transfer journey in round 1. The banking concierge, the offline
hashing embedder and the offline model, through the real engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.model import AgentSnapshot
from engine.recall.selection import high_probability_journeys
from engine.recall.vectors import InMemoryVectorIndex, agent_index_texts, build_index
from engine.sessions.session import InboundMessage, SessionState
from engine.toolkit import InProcessDispatcher
from engine.turn import EngineDeps, TurnEngine, TurnOutput
from examples.banking import bank, load
from examples.banking.tools import registry
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM
from tests.engine.test_matching_units import context

Say = Callable[[str], Awaitable[TurnOutput]]
HOPELESS = ["Thanks, that's all", "Hello!", "thanks"]


def with_threshold(agent: AgentSnapshot, value: float) -> AgentSnapshot:
    data = agent.model_dump()
    data["config"]["journey_min_similarity"] = value
    return AgentSnapshot.model_validate(data)


async def index_of(agent: AgentSnapshot, embedder: HashingEmbedder) -> InMemoryVectorIndex:
    return await build_index(embedder, agent_index_texts(agent))


@pytest.mark.parametrize("text", HOPELESS)
async def test_a_hopeless_message_predicts_no_journey(text: str) -> None:
    agent, embedder = load(), HashingEmbedder()
    index = await index_of(agent, embedder)
    threshold = agent.config.journey_min_similarity
    prediction = await high_probability_journeys(
        context(agent, text), k=1, embedder=embedder, index=index, min_similarity=threshold
    )
    assert prediction.journeys == []
    # The journey it would have predicted is reported, not silently lost.
    assert len(prediction.below_threshold) == 1


async def test_a_transfer_request_still_predicts_the_transfer_journey() -> None:
    agent, embedder = load(), HashingEmbedder()
    index = await index_of(agent, embedder)
    prediction = await high_probability_journeys(
        context(agent, "Hello!", "Hi! How can I help?", "I want to transfer money"),
        k=1,
        embedder=embedder,
        index=index,
        min_similarity=agent.config.journey_min_similarity,
    )
    assert prediction.journeys == ["transfer"] and prediction.below_threshold == []


async def test_threshold_minus_one_predicts_the_top_journey_as_before() -> None:
    agent, embedder = load(), HashingEmbedder()
    index = await index_of(agent, embedder)
    prediction = await high_probability_journeys(
        context(agent, "thanks"), k=1, embedder=embedder, index=index, min_similarity=-1.0
    )
    assert len(prediction.journeys) == 1 and prediction.below_threshold == []


async def concierge(agent: AgentSnapshot) -> Say:
    bank.reset_bank()
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(agent)
    embedder = HashingEmbedder()
    index = await index_of(agent, embedder)

    async def index_for(_agent: AgentSnapshot) -> InMemoryVectorIndex:
        return index

    engine = TurnEngine(
        agents,
        sessions,
        EngineDeps(llm=OfflineLLM(), embedder=embedder, tools=InProcessDispatcher(registry)),
        index_for=index_for,
    )
    await sessions.create(SessionState(id="s", agent_id=agent.id, customer_id="c"))
    counter = iter(range(1, 1000))

    async def say(text: str) -> TurnOutput:
        return await engine.handle("s", [InboundMessage(event_id=f"m{next(counter)}", text=text)])

    return say


def node_selections(output: TurnOutput) -> list[str]:
    return [c.label for c in output.trace.llm_calls if c.purpose == "select_journey_node"]


async def test_thanks_makes_no_speculative_node_selection_and_stays_within_two_rounds() -> None:
    say = await concierge(load())
    out = await say("Thanks, that's all")
    assert node_selections(out) == []
    assert out.trace.high_probability_journeys == []
    assert out.trace.unpredicted_journeys  # recall ranked one, below the threshold
    assert out.trace.llm_rounds <= 2
    assert out.reply is not None and out.reply.text


async def test_without_the_threshold_thanks_paid_for_a_discarded_node_selection() -> None:
    # The behaviour the threshold removes: the top-1 journey predicted, its node selected, unused.
    say = await concierge(with_threshold(load(), -1.0))
    out = await say("Thanks, that's all")
    assert len(node_selections(out)) == 1
    assert node_selections(out)[0] not in out.trace.activated_journeys


async def test_a_transfer_request_enters_its_journeys_within_two_rounds() -> None:
    say = await concierge(load())
    out = await say("I want to transfer money")
    assert out.trace.high_probability_journeys == ["transfer"]
    # The transfer starts with its prerequisite (authentication): no extra round for either.
    assert "authenticate" in out.state.active_journey_ids
    assert out.trace.llm_rounds <= 2
    assert out.reply is not None and "username" in (out.reply.text or "")
