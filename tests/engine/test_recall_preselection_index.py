"""Preselection from the per-version index (`engine.recall.preselection.preselect_indexed`, what a
turn runs) decides exactly what the straightforward walk decides (`preselect` over
`prune_low_probability(tag_filter(...))`): the same kept guidelines and the same held-back ids,
in the same order, over generated agents (agent-wide, high-criticality, continuous, tagged,
disabled and journey-scoped guidelines, activation conditions, some of them tagged), sessions
(channel, customer tags, pending and applied guidelines), recall caps and queries — with a
vocabulary small enough that similarities tie, and guideline vectors missing or partial."""

from __future__ import annotations

import asyncio
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.scale_agents import SCALE_SHAPES, Shape, scale_agent
from engine.agent_config import AgentConfig
from engine.context import TurnContext
from engine.model import JOURNEY_CONDITION_KEY, AgentSnapshot, Criticality, Guideline, journey_tag
from engine.ports import VectorIndex
from engine.recall.index import RecallIndex
from engine.recall.preselection import preselect_indexed
from engine.recall.selection import (
    Preselection,
    RecallQuery,
    preselect,
    prune_low_probability,
    tag_filter,
)
from engine.recall.vectors import GUIDELINES, InMemoryVectorIndex, agent_index_texts, build_index
from engine.sessions.session import SessionState
from tests.engine.pipeline_kit import KeywordEmbedder, chain_journey, make_agent
from tests.engine.test_matching_units import context

WORDS = ["parking", "invoice", "refund", "warranty", "shipping", "travel"]
JOURNEYS = ["j0", "j1", "j2", "j3", "j4"]
AUDIENCE = ["channel:web", "channel:telegram", "customer:vip", "agent:agent", "billing"]

guideline_spec = st.fixed_dictionaries(
    {
        "words": st.lists(st.sampled_from(WORDS), min_size=1, max_size=2),
        "tags": st.lists(st.sampled_from(AUDIENCE), max_size=2, unique=True),
        "scoped": st.sampled_from([*[None] * 6, *JOURNEYS]),
        "condition_of": st.sampled_from([*[None] * 10, *JOURNEYS]),
        "kind": st.sampled_from(["plain", "plain", "plain", "high", "continuous"]),
        "enabled": st.sampled_from([True, True, True, False]),
    }
)


def build(
    specs: list[dict], journeys: int, config: AgentConfig, *, untagged: bool = False
) -> AgentSnapshot:
    """An agent of these guidelines; `untagged`: without audience tags, and with activation
    conditions never journey-scoped (the shape most agents have, which a turn handles in one
    pass over the version's lists)."""
    flows = [
        chain_journey(j, f"{WORDS[i]} help", f"the customer needs {WORDS[i]} help", [("a", "Ask")])
        for i, j in enumerate(JOURNEYS[:journeys])
    ]
    guidelines = []
    for i, spec in enumerate(specs):
        tags = [t for t in spec["tags"] if not untagged or t == "billing"]
        if spec["scoped"] is not None and not (untagged and spec["condition_of"]):
            tags.append(journey_tag(spec["scoped"]))
        metadata: dict[str, object] = {}
        if spec["condition_of"] is not None:
            metadata[JOURNEY_CONDITION_KEY] = spec["condition_of"]
        if spec["kind"] == "continuous":
            metadata["continuous"] = True
        guidelines.append(
            Guideline(
                id=f"g{i}",
                condition=f"the customer asks about {' '.join(spec['words'])}",
                action=f"explain the {spec['words'][0]} policy",
                tags=tuple(tags),
                enabled=spec["enabled"],
                criticality=Criticality.HIGH if spec["kind"] == "high" else Criticality.MEDIUM,
                metadata=metadata,
            )
        )
    return make_agent(guidelines=guidelines, journeys=flows, config=config)


async def vectors_of(agent: AgentSnapshot, keep_share: float, seed: int) -> InMemoryVectorIndex:
    """The index publishing builds; with `keep_share` < 1, only part of the guidelines' vectors
    (an index that does not hold every eligible guideline)."""
    texts = agent_index_texts(agent)
    if GUIDELINES in texts and keep_share < 1:
        rng = random.Random(seed)
        texts[GUIDELINES] = {
            k: v for k, v in texts[GUIDELINES].items() if rng.random() < keep_share
        }
        if not texts[GUIDELINES]:
            texts.pop(GUIDELINES)
    return await build_index(KeywordEmbedder(), texts)


async def both(
    agent: AgentSnapshot, ctx: TurnContext, high: list[str], vectors: VectorIndex | None
) -> tuple[Preselection, Preselection]:
    embedder = KeywordEmbedder()
    candidates = prune_low_probability(tag_filter(agent, ctx.session), high).candidates
    expected = await preselect(
        ctx, candidates, high=high, index=vectors, query=RecallQuery(ctx, embedder)
    )
    index = RecallIndex(agent)
    tags = index.session_tags(ctx.session.channel, ctx.session.customer_tags)
    got = await preselect_indexed(
        ctx, index, tags, high=high, vectors=vectors, query=RecallQuery(ctx, embedder)
    )
    return expected, got


def assert_same(expected: Preselection, got: Preselection) -> None:
    assert [g.id for g in got.kept] == [g.id for g in expected.kept]
    assert got.held_back == expected.held_back


@settings(max_examples=250, deadline=None)
@given(
    specs=st.lists(guideline_spec, min_size=2, max_size=30),
    journeys=st.integers(min_value=0, max_value=len(JOURNEYS)),
    guideline_top_k=st.sampled_from([0, 1, 1, 2, 3, 5]),
    condition_top_k=st.sampled_from([0, 1, 1, 2]),
    channel=st.sampled_from(["web", "telegram", "sms"]),
    customer_tags=st.lists(st.sampled_from(["vip", "new"]), max_size=2, unique=True),
    high=st.lists(st.sampled_from(JOURNEYS), max_size=2, unique=True),
    picks=st.lists(st.integers(min_value=0, max_value=29), max_size=6),
    message=st.lists(st.sampled_from(WORDS), max_size=3),
    keep_share=st.sampled_from([1.0, 1.0, 0.5]),
    seed=st.integers(min_value=0, max_value=1_000),
    untagged=st.booleans(),
)
def test_indexed_preselection_decides_what_the_straightforward_walk_decides(
    specs: list[dict],
    journeys: int,
    guideline_top_k: int,
    condition_top_k: int,
    channel: str,
    customer_tags: list[str],
    high: list[str],
    picks: list[int],
    message: list[str],
    keep_share: float,
    seed: int,
    untagged: bool,
) -> None:
    config = AgentConfig(guideline_top_k=guideline_top_k, condition_top_k=condition_top_k)
    agent = build(specs, journeys, config, untagged=untagged)
    ids = [g.id for g in agent.guidelines]
    chosen = [ids[p % len(specs)] for p in picks]  # (authored guidelines, not conditions)
    session = SessionState(
        id="s",
        agent_id=agent.id,
        customer_id="c",
        channel=channel,
        customer_tags=tuple(customer_tags),
        pending_customer_guideline_ids=tuple(chosen[::2]),
        applied_guideline_ids=tuple(chosen[1::2]),
    )
    ctx = context(agent, f"I have a question about {' '.join(message)}")
    ctx = TurnContext(agent=agent, session=session, history=ctx.history)
    high = [j for j in high if agent.has_journey(j)] + (["elsewhere"] if seed % 7 == 0 else [])

    async def check() -> None:
        vectors = await vectors_of(agent, keep_share, seed)
        for index in (vectors, None):
            expected, got = await both(agent, ctx, high, index)
            assert_same(expected, got)

    asyncio.run(check())


def test_indexed_preselection_on_the_benchmark_agents_of_both_shapes() -> None:
    """The benchmark's agents, mostly journey-scoped and all agent-wide: the same decisions,
    with guidelines left out by the ranking and journeys' conditions held back, also when
    agent-wide guidelines await the customer's data (always matched)."""
    for shape in (SCALE_SHAPES[2], Shape(1_000, 100, 1_000)):
        agent = scale_agent(shape).snapshot
        journey_ids = [j.id for j in agent.journeys]

        async def check(agent: AgentSnapshot = agent, journey_ids: list[str] = journey_ids) -> None:
            vectors = await vectors_of(agent, 1.0, 0)
            for text, high, pending in (
                ("how does the parking fee work", [], ()),
                ("I want to renew a travel card", journey_ids[:1], ("g1", "g7", "j3s0")),
                ("thanks", journey_ids[-2:], ("g0", "g2", "g3", "g4", "g5", "g6")),
            ):
                ctx = context(agent, text)
                session = ctx.session.model_copy(update={"pending_customer_guideline_ids": pending})
                ctx = TurnContext(agent=agent, session=session, history=ctx.history)
                expected, got = await both(agent, ctx, high, vectors)
                assert expected.held_back  # the caps are in force at this size
                assert {"g0", "g1"}.intersection(pending) <= {g.id for g in got.kept}
                assert_same(expected, got)

        asyncio.run(check())


def test_a_partial_ranking_prefix_is_the_full_rankings_prefix() -> None:
    """What lets a turn ask for k + n rows instead of all: the top k of the index's search are
    the first k of its whole ranking, ties at the cut included (broken by insertion order)."""
    rng = random.Random(3)
    ids = [f"v{i}" for i in range(60)]
    rows = [[float(rng.choice([0, 1])) for _ in range(4)] for _ in ids]  # many exact ties
    index = InMemoryVectorIndex({"n": (ids, rows)})
    query = [1.0, 1.0, 0.0, 0.0]
    full = index.search("n", query, len(ids))
    for k in range(1, len(ids) + 1):
        assert index.search("n", query, k) == full[:k]
