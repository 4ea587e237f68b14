"""Deterministic parts around the LLM: recall, batch routing and packing, verdict interpretation,
relationship resolution — plus golden files for the matching and composition prompts."""

from __future__ import annotations

from datetime import UTC, datetime

from engine.compose import CompositionInput, Instruction, build_compose_prompt
from engine.context import TurnContext
from engine.matching import guidelines as gm
from engine.model import (
    AgentSnapshot,
    EntityKind,
    EntityRef,
    Guideline,
    Relationship,
    RelationshipKind,
    Term,
    journey_tag,
)
from engine.recall.selection import high_probability_journeys, prune_low_probability, tag_filter
from engine.relations import resolve
from engine.sessions.session import Event, EventKind, EventSource, SessionState
from tests.engine.pipeline_kit import KeywordEmbedder, chain_journey, journey_index, make_agent
from tests.golden import assert_snapshot

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def g(gid: str, condition: str = "c", action: str | None = "a", **kw) -> Guideline:
    return Guideline(id=gid, condition=condition, action=action, **kw)


def rel(
    kind: RelationshipKind, source: str, target: str, target_kind: str = "guideline"
) -> Relationship:
    return Relationship(
        kind=kind,
        source=EntityRef(kind=EntityKind.GUIDELINE, id=source),
        target=EntityRef(kind=EntityKind(target_kind), id=target),
    )


def session(**kw) -> SessionState:
    return SessionState(id="s", agent_id="agent", customer_id="c", **kw)


def context(agent: AgentSnapshot, *texts: str, **kw) -> TurnContext:
    events = [
        Event(
            id=f"e{i}",
            offset=i,
            kind=EventKind.MESSAGE,
            source=EventSource.CUSTOMER if i % 2 == 0 else EventSource.AGENT,
            created_at=T0,
            text=t,
        )
        for i, t in enumerate(texts)
    ]
    return TurnContext(agent=agent, session=session(), history=events, **kw)


# -- relationships ----------------------------------------------------------------------------


def test_priority_suppresses_the_lower_guideline() -> None:
    r = resolve([rel(RelationshipKind.PRIORITY, "a", "b")], {"a", "b"}, [], {"a", "b"})
    assert r.guideline_ids == {"a"}
    assert [(x.kind, x.effect) for x in r.records] == [("priority", "suppressed")]


def test_priority_is_judged_among_what_holds_so_a_chain_leaves_only_its_top() -> None:
    # a > b > c, all matched: c is ranked below b, which holds now, so c goes too (DESIGN.md,
    # "Semantics decisions": the reference engine's rule; it used to leave c).
    rels = [rel(RelationshipKind.PRIORITY, "b", "c"), rel(RelationshipKind.PRIORITY, "a", "b")]
    r = resolve(rels, {"a", "b", "c"}, [], {"a", "b", "c"})
    assert r.guideline_ids == {"a"}


def test_dependency_drops_a_guideline_whose_target_is_inactive() -> None:
    rels = [rel(RelationshipKind.DEPENDENCY, "a", "b")]
    assert resolve(rels, {"a"}, [], {"a", "b"}).guideline_ids == set()
    assert resolve(rels, {"a", "b"}, [], {"a", "b"}).guideline_ids == {"a", "b"}


def test_dependency_on_a_journey_requires_it_active() -> None:
    rels = [rel(RelationshipKind.DEPENDENCY, "a", "trip", "journey")]
    assert resolve(rels, {"a"}, [], {"a"}).guideline_ids == set()
    assert resolve(rels, {"a"}, ["trip"], {"a"}).guideline_ids == {"a"}


def test_entailment_adds_and_the_added_guideline_can_suppress() -> None:
    rels = [rel(RelationshipKind.ENTAILMENT, "a", "b"), rel(RelationshipKind.PRIORITY, "b", "c")]
    r = resolve(rels, {"a", "c"}, [], {"a", "b", "c"})
    assert r.guideline_ids == {"a", "b"}


def test_guideline_priority_over_a_journey_suppresses_its_step() -> None:
    r = resolve([rel(RelationshipKind.PRIORITY, "a", "trip", "journey")], {"a"}, ["trip"], {"a"})
    assert r.journey_ids == set() and r.suppressed_journeys == {"trip"}


# -- recall -----------------------------------------------------------------------------------


def test_tag_filter_keeps_global_agent_journey_and_customer_tags_only() -> None:
    agent = make_agent(
        guidelines=[
            g("global"),
            g("mine", tags=("agent:agent",)),
            g("other_agent", tags=("agent:someone-else",)),
            g("vip_only", tags=("customer:vip",)),
            g("gold_only", tags=("customer:gold",)),
            g("telegram_only", tags=("channel:telegram",)),
            g("off", enabled=False),
        ]
    )
    kept = {x.id for x in tag_filter(agent, session(customer_tags=("vip",)))}
    assert kept == {"global", "mine", "vip_only"}


def test_a_plain_tag_organises_guidelines_and_never_hides_them() -> None:
    """`billing` groups guidelines for a relationship ({tag: billing}); no conversation carries
    it, so filtering by it would silently switch the guideline off everywhere."""
    agent = make_agent(
        guidelines=[
            g("refunds", tags=("billing",)),
            g("vip_refunds", tags=("billing", "customer:vip")),
        ]
    )
    assert {x.id for x in tag_filter(agent, session())} == {"refunds"}
    assert {x.id for x in tag_filter(agent, session(customer_tags=("vip",)))} == {
        "refunds",
        "vip_refunds",
    }


def test_low_probability_journey_guidelines_are_held_back_but_conditions_are_not() -> None:
    _trip, trip_cond = chain_journey("trip", "Trip", "plans a trip", [("a", "Ask")])
    scoped = g("trip_rule", tags=(journey_tag("trip"),))
    recall = prune_low_probability([g("global"), scoped, trip_cond], high=[])
    assert {x.id for x in recall.candidates} == {"global", trip_cond.id}
    assert recall.dropped == {"trip": [scoped]}


async def test_active_journeys_are_high_probability_and_vectors_pad_to_k() -> None:
    flight = chain_journey("flight", "Book a flight", "wants a flight", [("a", "Ask")])
    hotel = chain_journey("hotel", "Book a hotel room", "wants a hotel", [("a", "Ask")])
    agent = make_agent(journeys=[flight, hotel])
    embedder = KeywordEmbedder()
    index = await journey_index(agent, embedder)
    ctx = context(agent, "I need a hotel room for two nights")

    predicted = await high_probability_journeys(ctx, k=1, embedder=embedder, index=index)
    assert predicted.journeys == ["hotel"]
    active = TurnContext(
        agent=agent,
        session=session(journey_paths={"flight": ("a",)}),
        history=ctx.history,
    )
    # An active journey fills k=1 by itself; with k=2 the vector search pads.
    one = await high_probability_journeys(active, k=1, embedder=embedder, index=index)
    assert one.journeys == ["flight"]
    two = await high_probability_journeys(active, k=2, embedder=embedder, index=index)
    assert two.journeys == ["flight", "hotel"]


# -- batches ----------------------------------------------------------------------------------


def test_guidelines_are_routed_by_kind() -> None:
    state = session(applied_guideline_ids=("done",), pending_customer_guideline_ids=("waiting",))
    kinds = {
        x.id: gm.classify(x, state)
        for x in [
            g("obs", action=None),
            g("act"),
            g("cont", metadata={"continuous": True}),
            g("done"),
            g("waiting"),
        ]
    }
    assert kinds == {
        "obs": gm.BatchKind.OBSERVATIONAL,
        "act": gm.BatchKind.ACTIONABLE,
        "cont": gm.BatchKind.ACTIONABLE,
        "done": gm.BatchKind.PREVIOUSLY_APPLIED,
        "waiting": gm.BatchKind.CUSTOMER_DEPENDENT,
    }


def test_batch_size_follows_the_prompt_budget_not_a_fixed_count() -> None:
    many = [g(f"g{i}", condition=f"condition number {i} " * 3) for i in range(40)]
    one_call = gm.plan_batches(many, session(), [], budget_chars=100_000)
    several = gm.plan_batches(many, session(), [], budget_chars=1_000)
    assert [len(b.guidelines) for b in one_call] == [40]
    assert len(several) > 1 and sum(len(b.guidelines) for b in several) == 40
    assert all(b.kind is gm.BatchKind.ACTIONABLE for b in several)


def test_disambiguation_head_with_two_targets_gets_its_own_batch() -> None:
    head = g("card", "asks about a card", action=None)
    targets = [g("lost", "card is lost"), g("upgrade", "wants a better card")]
    rels = [rel(RelationshipKind.DISAMBIGUATION, "card", t.id) for t in targets]
    batches = gm.plan_batches([head, *targets], session(), rels, budget_chars=10_000)
    kinds = sorted(b.kind.value for b in batches)
    assert kinds == ["actionable", "disambiguation"]


def test_unknown_or_repeated_handles_in_an_answer_are_ignored() -> None:
    batch = gm.Batch(gm.BatchKind.ACTIONABLE, (g("a"), g("b")))
    answer = gm.GuidelineMatchBatch(
        verdicts=[
            gm.GuidelineVerdict(id="g9", applies=True, score=10),
            gm.GuidelineVerdict(id="g1", applies=True, score=9),
            gm.GuidelineVerdict(id="g1", applies=False, score=0),
            gm.GuidelineVerdict(id="g2", applies=True, score=3),  # below the threshold
        ]
    )
    out = gm.interpret(batch, answer)
    assert [m.guideline.id for m in out.matches] == ["a"]
    assert {v[0]: v[2] for v in out.verdicts} == {"a": True, "b": False}


def test_ambiguous_request_becomes_one_clarifying_instruction() -> None:
    head = g("card", "asks about a card", action=None)
    batch = gm.Batch(
        gm.BatchKind.DISAMBIGUATION,
        (g("lost", "card is lost", "Block the card"), g("upgrade", "better card", "Offer gold")),
        head=head,
    )
    out = gm.interpret(
        batch,
        gm.DisambiguationVerdict(
            head_applies=True, is_ambiguous=True, candidate_ids=["g1", "g2"], clarification="Which?"
        ),
    )
    assert [m.guideline.id for m in out.matches] == ["card"]
    assert out.clarifications[0].metadata["disambiguates"] == ["lost", "upgrade"]


# -- golden prompts ---------------------------------------------------------------------------


def test_actionable_batch_prompt_is_stable() -> None:
    agent = make_agent()
    ctx = context(
        agent,
        "Hi, my card is gone",
        "Sorry to hear that. Which card?",
        "The blue one",
        terms=[Term(name="Blue card", description="our debit card")],
        variables={"tier": "gold"},
    )
    batch = gm.Batch(
        gm.BatchKind.ACTIONABLE,
        (g("lost", "The customer lost a card", "Block the card and offer a replacement"),),
    )
    assert_snapshot("match_prompt_actionable", gm.build_match_prompt(ctx, batch))


def test_compose_prompt_is_stable() -> None:
    agent = make_agent()
    ctx = context(agent, "I want to send 300 to my sister")
    data = CompositionInput(
        instructions=[
            Instruction("i1", "Ask for the destination account", "journey:t:node:a", "t")
        ],
        observations=["The customer wants to transfer money"],
        questions=["To transfer money, ask the customer for: to_account_id"],
        collected={"amount": "300"},
    )
    assert_snapshot("compose_prompt_fluid", build_compose_prompt(ctx, data))
