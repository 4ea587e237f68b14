"""The per-version recall index (engine.recall.index) answers exactly what the straightforward
walk answers: `indexed_recall` equals `prune_low_probability(tag_filter(...))` — same guidelines,
same order, same held-back journeys — and the usable ids entailment sees, the conversation's
tags and the journeys a turn's matches activate are the same, over
generated agents (every kind of audience tag, disabled guidelines, tags of journeys the agent
does not have, journey conditions) and sessions, and over the benchmark's synthetic agents."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model import AgentSnapshot, Guideline, journey_tag
from engine.recall.index import RecallIndex, recall_index
from engine.recall.selection import (
    conversation_tags,
    indexed_recall,
    prune_low_probability,
    tag_filter,
)
from engine.sessions.session import SessionState
from tests.engine.pipeline_kit import chain_journey, make_agent

JOURNEYS = ["j0", "j1", "j2", "j3"]
CHANNELS = ["telegram", "whatsapp", "web"]
CUSTOMER_TAGS = ["vip", "customer:gold", "new"]
TAGS = [
    "agent:test-agent",
    "agent:someone-else",
    "channel:telegram",
    "channel:web",
    "customer:vip",
    "customer:gold",
    "billing",  # a plain label: never filters
    *(journey_tag(j) for j in JOURNEYS),
    journey_tag("not-a-journey-of-this-agent"),
]

guideline_specs = st.lists(
    st.tuples(
        st.lists(st.sampled_from(TAGS), max_size=3, unique=True),
        st.booleans(),  # enabled
    ),
    max_size=40,
)


def build(specs: list[tuple[list[str], bool]], journeys: int) -> AgentSnapshot:
    flows = [
        chain_journey(j, f"Journey {j}", f"the customer wants {j}", [("a", "Ask")])
        for j in JOURNEYS[:journeys]
    ]
    guidelines = [
        Guideline(
            id=f"g{i}", condition=f"condition {i}", action=f"do {i}", tags=tuple(tags), enabled=on
        )
        for i, (tags, on) in enumerate(specs)
    ]
    agent = make_agent(guidelines=guidelines, journeys=flows)
    data = agent.model_dump()
    data["id"] = "test-agent"
    return AgentSnapshot.model_validate(data).with_content_version()


def straightforward_usable_ids(
    agent: AgentSnapshot, session: SessionState, in_scope: set[str]
) -> set[str]:
    return {
        g.id
        for g in tag_filter(agent, session)
        if g.scoped_journey_id is None or g.scoped_journey_id in in_scope
    }


def journeys_walked(agent: AgentSnapshot, matched: set[str]) -> list[str]:
    """Every journey one of whose conditions matched, by walking them all (what the turn did)."""
    return [j.id for j in agent.journeys if matched.intersection(j.condition_guideline_ids)]


def assert_equivalent(agent: AgentSnapshot, session: SessionState, high: list[str]) -> None:
    expected = prune_low_probability(tag_filter(agent, session), high)
    tags = frozenset(conversation_tags(agent, session))
    for index in (recall_index(agent), RecallIndex(agent)):  # cached and freshly built
        assert index.session_tags(session.channel, session.customer_tags) == tags
        conditions = [gid for j in agent.journeys for gid in j.condition_guideline_ids]
        for matched in (set(), set(conditions), set(conditions[::2]), {"g0", *conditions[-1:]}):
            assert index.journeys_activated_by(matched) == journeys_walked(agent, matched)
        got = indexed_recall(index, tags, high)
        assert [g.id for g in got.candidates] == [g.id for g in expected.candidates]
        assert {j: [g.id for g in gs] for j, gs in got.dropped.items()} == {
            j: [g.id for g in gs] for j, gs in expected.dropped.items()
        }
        for journey_id in [*JOURNEYS, "not-a-journey-of-this-agent", "nowhere"]:
            assert (journey_id in got.dropped) == (journey_id in expected.dropped)
            assert [g.id for g in got.dropped.get(journey_id, [])] == [
                g.id for g in expected.dropped.get(journey_id, [])
            ]
        in_scope = set(high)
        expected_ids = straightforward_usable_ids(agent, session, in_scope)
        assert index.usable_ids(tags, [None, *in_scope]) == expected_ids
        # the membership test the relationships stage asks, id by id
        usable = index.usable_in(tags, [None, *in_scope])
        for guideline_id in [*(g.id for g in agent.guidelines), "g-unknown", ""]:
            assert (guideline_id in usable) == (guideline_id in expected_ids), guideline_id


@settings(max_examples=150, deadline=None)
@given(
    specs=guideline_specs,
    journeys=st.integers(min_value=0, max_value=len(JOURNEYS)),
    channel=st.sampled_from(CHANNELS),
    customer_tags=st.lists(st.sampled_from(CUSTOMER_TAGS), max_size=2, unique=True),
    high=st.lists(st.sampled_from([*JOURNEYS, "not-a-journey-of-this-agent"]), max_size=3),
)
def test_indexed_recall_equals_the_straightforward_filter(
    specs: list[tuple[list[str], bool]],
    journeys: int,
    channel: str,
    customer_tags: list[str],
    high: list[str],
) -> None:
    agent = build(specs, journeys)
    session = SessionState(
        id="s",
        agent_id=agent.id,
        customer_id="c",
        channel=channel,
        customer_tags=tuple(customer_tags),
    )
    assert_equivalent(agent, session, list(dict.fromkeys(high)))


def test_indexed_recall_equals_the_filter_on_the_benchmark_agents() -> None:
    from bench.scale_agents import SCALE_SHAPES, scale_agent

    for shape in SCALE_SHAPES[:3]:
        agent = scale_agent(shape).snapshot
        journey_ids = [j.id for j in agent.journeys]
        session = SessionState(
            id="s", agent_id=agent.id, customer_id="c", customer_tags=("vip", "customer:gold")
        )
        for high in ([], journey_ids[:1], journey_ids[-2:]):
            assert_equivalent(agent, session, high)


def test_the_index_is_built_once_per_agent_version() -> None:
    agent = build([(["channel:web"], True), ([], True)], 2)
    assert recall_index(agent) is recall_index(agent)
    changed = build([(["channel:web"], True), ([], False)], 2)
    assert changed.version != agent.version
    assert recall_index(changed) is not recall_index(agent)
