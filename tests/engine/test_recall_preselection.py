"""Recall on large agents (stage 4, `engine.recall.selection.preselect`): beyond `guideline_top_k`
agent-wide guidelines and `condition_top_k` journeys' conditions, only the most similar to the
conversation reach the matcher; what must never be skipped is always matched; small agents and
agents published without guideline vectors are unchanged."""

from __future__ import annotations

from engine.agent_config import AgentConfig
from engine.compose import ComposedReply
from engine.context import TurnContext
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.model import AgentSnapshot, Criticality, Guideline
from engine.recall.selection import RecallQuery, preselect, prune_low_probability, tag_filter
from engine.recall.vectors import GUIDELINES, agent_index_texts, build_index
from engine.sessions.session import SessionState
from engine.testing import ScriptedLLM
from tests.engine.pipeline_kit import (
    Harness,
    KeywordEmbedder,
    chain_journey,
    compose_echo,
    make_agent,
    match_when,
)
from tests.engine.test_matching_units import context
from tests.engine.test_turn_pipeline import enter_first_step

TOPICS = [
    "parking", "invoice", "refund", "warranty", "shipping", "passwords", "mortgage", "pension",
    "insurance", "crypto", "loans", "savings", "cheques", "branches", "tax", "fraud", "travel",
    "pets", "gardens", "weather",
]  # fmt: skip


def topic_guidelines(**overrides: dict) -> list[Guideline]:
    return [
        Guideline(
            id=f"about_{topic}",
            condition=f"the customer asks about {topic}",
            action=f"explain our {topic} policy",
            **overrides.get(topic, {}),
        )
        for topic in TOPICS
    ]


def agent_with(guidelines: list[Guideline], journeys: int = 0, **config: int) -> AgentSnapshot:
    flows = [
        chain_journey(f"j_{t}", f"{t.title()} help", f"the customer needs {t} help", [("a", "Ask")])
        for t in TOPICS[:journeys]
    ]
    return make_agent(guidelines=guidelines, journeys=flows, config=AgentConfig(**config))


async def recall(agent: AgentSnapshot, ctx: TurnContext, *, vectors: bool = True):  # type: ignore[no-untyped-def]
    embedder = KeywordEmbedder()
    texts = agent_index_texts(agent)
    if not vectors:
        texts.pop(GUIDELINES, None)
    index = await build_index(embedder, texts)
    candidates = prune_low_probability(tag_filter(agent, ctx.session), high=[]).candidates
    return await preselect(ctx, candidates, high=[], index=index, query=RecallQuery(ctx, embedder))


def with_session(ctx: TurnContext, **state: object) -> TurnContext:
    session = SessionState(id="s", agent_id="agent", customer_id="c", **state)  # type: ignore[arg-type]
    return TurnContext(agent=ctx.agent, session=session, history=ctx.history)


async def test_a_large_agent_matches_only_the_most_similar_agent_wide_guidelines() -> None:
    agent = agent_with(topic_guidelines(), guideline_top_k=3)
    assert GUIDELINES in agent_index_texts(agent)  # embedded at publish: more than k of them

    result = await recall(agent, context(agent, "how do I get a refund for this invoice"))

    kept = {g.id for g in result.kept}
    assert len(kept) == 3
    assert {"about_refund", "about_invoice"} <= kept
    assert len(result.held_back) == len(TOPICS) - 3


async def test_high_criticality_pending_and_continuous_applied_guidelines_are_always_matched() -> (
    None
):
    guidelines = topic_guidelines(
        weather={"criticality": Criticality.HIGH},
        pets={"metadata": {"continuous": True}},
    )
    agent = agent_with(guidelines, guideline_top_k=1)
    ctx = with_session(
        context(agent, "my refund please"),
        pending_customer_guideline_ids=("about_gardens",),
        applied_guideline_ids=("about_pets", "about_tax"),
    )

    kept = {g.id for g in (await recall(agent, ctx)).kept}

    assert {"about_weather", "about_gardens", "about_pets"} <= kept  # never left out
    assert "about_refund" in kept
    assert "about_tax" not in kept  # applied but not continuous: an ordinary candidate
    assert len(kept) == 3 + 1


async def test_small_agents_and_k_zero_and_agents_without_guideline_vectors_match_everything() -> (
    None
):
    small = agent_with(topic_guidelines())  # 20 ≤ the default k of 30
    assert GUIDELINES not in agent_index_texts(small)
    everything = agent_with(topic_guidelines(), guideline_top_k=0)
    unembedded = agent_with(topic_guidelines(), guideline_top_k=3)

    for agent, vectors in ((small, True), (everything, True), (unembedded, False)):
        result = await recall(agent, context(agent, "refund"), vectors=vectors)
        assert len(result.kept) == len(TOPICS) and result.held_back == []


async def test_only_the_conditions_of_the_most_similar_journeys_are_matched() -> None:
    agent = agent_with([], journeys=12, condition_top_k=2)

    result = await recall(agent, context(agent, "I need refund help with my invoice"))

    kept = {g.condition_of_journey for g in result.kept}
    assert kept == {"j_refund", "j_invoice"}


async def test_a_journey_recall_left_out_is_not_matched_but_the_relevant_one_activates() -> None:
    agent = agent_with(topic_guidelines(), journeys=12, guideline_top_k=1, condition_top_k=1)
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"refund": True, "weather": True, "savings": True}))
    llm.on(JourneyNodeSelection, enter_first_step)
    llm.on(ComposedReply, compose_echo)
    h = Harness(agent, llm)
    await h.start()

    out = await h.say("I want a refund")

    assert "about_refund" in out.trace.matched_guideline_ids
    assert "j_refund" in out.state.journey_paths
    held_back = out.trace.held_back_guideline_ids
    assert {"about_weather", "journey:j_savings:condition:0"} <= set(held_back)
    prompts = "\n".join(call.prompt for call in llm.calls)
    assert "weather" not in prompts and "savings" not in prompts  # never shown to the model
    assert "j_savings" not in out.state.journey_paths
