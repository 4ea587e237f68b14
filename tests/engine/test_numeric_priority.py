"""Numeric priority: when entities of different priorities hold, only the highest stay — after
relational priority, keeping what the winners need and entail (docs/semantics.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model import EntityKind, Relationship
from engine.relations import Key, resolve
from tests.engine.pipeline_kit import outputs_under_hash_seeds
from tests.engine.test_relations import ANY, DEPENDS, ENTAILS, PRIORITY, _acyclic_priorities, rel

G, J = EntityKind.GUIDELINE, EntityKind.JOURNEY


def ranks(**priorities: int) -> dict[Key, int]:
    return {(J if n.startswith("j") else G, n): p for n, p in priorities.items()}


def test_a_higher_priority_guideline_that_holds_suppresses_every_lower_one() -> None:
    result = resolve(
        [], {"g_fraud", "g_upsell", "g_greet"}, [], set(),
        numeric_priority=ranks(g_fraud=10, g_upsell=0, g_greet=0),
    )  # fmt: skip
    assert result.guideline_ids == {"g_fraud"}
    assert {(r.target, r.effect) for r in result.records} == {
        ("guideline:g_greet", "suppressed (priority 0 < 10)"),
        ("guideline:g_upsell", "suppressed (priority 0 < 10)"),
    }


def test_equal_priorities_suppress_nothing() -> None:
    result = resolve([], {"g1", "g2"}, ["j1"], set(), numeric_priority=ranks(g1=3, g2=3, j1=3))
    assert (result.guideline_ids, result.journey_ids) == ({"g1", "g2"}, {"j1"})
    assert result.records == []


def test_a_lower_fallback_applies_only_when_nothing_above_it_holds() -> None:
    alone = resolve([], {"g_fallback"}, [], set(), numeric_priority=ranks(g_fallback=-1))
    assert alone.guideline_ids == {"g_fallback"}
    beside = resolve(
        [], {"g_fallback", "g_real"}, [], set(), numeric_priority=ranks(g_fallback=-1, g_real=0)
    )
    assert beside.guideline_ids == {"g_real"}


def test_relational_priority_is_applied_first_and_a_suppressed_entity_sets_no_ceiling() -> None:
    # The author ranked g_lo above g_hi explicitly: g_hi is out before numbers are compared.
    result = resolve(
        [rel(PRIORITY, "g_lo", "g_hi")], {"g_lo", "g_hi", "g_other"}, [], set(),
        numeric_priority=ranks(g_lo=0, g_hi=5, g_other=0),
    )  # fmt: skip
    assert result.guideline_ids == {"g_lo", "g_other"}


def test_what_the_winner_depends_on_is_kept() -> None:
    result = resolve(
        [rel(DEPENDS, "g_top", "g_need"), rel(DEPENDS, "g_need", "g_deeper")],
        {"g_top", "g_need", "g_deeper", "g_unrelated"}, [], set(),
        numeric_priority=ranks(g_top=5, g_need=0, g_deeper=0, g_unrelated=0),
    )  # fmt: skip
    assert result.guideline_ids == {"g_top", "g_need", "g_deeper"}


def test_an_or_dependency_met_at_the_ceiling_keeps_no_lower_alternative() -> None:
    # g_top needs one of its alternatives; g_alt_hi holds at the ceiling, so g_alt_lo, below
    # it, is not needed and is cut like any other lower entity (issue #37).
    result = resolve(
        [rel(ANY, "g_top", "g_alt_hi"), rel(ANY, "g_top", "g_alt_lo")],
        {"g_top", "g_alt_hi", "g_alt_lo"}, [], set(),
        numeric_priority=ranks(g_top=5, g_alt_hi=5, g_alt_lo=0),
    )  # fmt: skip
    assert result.guideline_ids == {"g_top", "g_alt_hi"}
    assert {(r.target, r.effect) for r in result.records} == {
        ("guideline:g_alt_lo", "suppressed (priority 0 < 5)")
    }


def test_an_or_dependency_below_the_ceiling_keeps_only_its_highest_alternative() -> None:
    # No alternative is at the ceiling: the winner needs one, the highest that holds.
    result = resolve(
        [rel(ANY, "g_top", "g_a"), rel(ANY, "g_top", "g_b"), rel(ANY, "g_top", "g_c")],
        {"g_top", "g_a", "g_b", "g_c", "g_x"}, [], set(),
        numeric_priority=ranks(g_top=5, g_a=2, g_b=0, g_c=2, g_x=0),
    )  # fmt: skip
    assert result.guideline_ids == {"g_top", "g_a", "g_c"}  # tied alternatives both stay


def test_an_or_alternative_another_winner_needs_stays() -> None:
    # g_alt_lo is not needed for g_top's OR-group, but g_other (also at the ceiling) depends
    # on it outright: it stays for that.
    result = resolve(
        [rel(ANY, "g_top", "g_alt_hi"), rel(ANY, "g_top", "g_alt_lo"),
         rel(DEPENDS, "g_other", "g_alt_lo")],
        {"g_top", "g_other", "g_alt_hi", "g_alt_lo"}, [], set(),
        numeric_priority=ranks(g_top=5, g_other=5, g_alt_hi=5, g_alt_lo=0),
    )  # fmt: skip
    assert result.guideline_ids == {"g_top", "g_other", "g_alt_hi", "g_alt_lo"}


def test_what_the_winner_entails_is_kept_even_when_it_also_matched() -> None:
    rels = [rel(ENTAILS, "g_top", "g_follow")]
    entailed = resolve(
        rels, {"g_top", "g_x"}, [], {"g_follow"}, numeric_priority=ranks(g_top=2, g_x=0)
    )
    both = resolve(
        rels, {"g_top", "g_follow", "g_x"}, [], {"g_follow"},
        numeric_priority=ranks(g_top=2, g_follow=0, g_x=0),
    )  # fmt: skip
    assert entailed.guideline_ids == both.guideline_ids == {"g_top", "g_follow"}


def test_an_entailed_guideline_neither_sets_the_ceiling_nor_is_cut_by_it() -> None:
    # g_e has a high number, but it holds only by implication: it cannot suppress its entailer.
    result = resolve(
        [rel(ENTAILS, "g_a", "g_e")], {"g_a", "g_b"}, [], {"g_e"},
        numeric_priority=ranks(g_a=0, g_b=0, g_e=9),
    )  # fmt: skip
    assert result.guideline_ids == {"g_a", "g_b", "g_e"}


def test_a_lower_journey_is_suppressed_and_goes_back_to_where_it_was() -> None:
    numeric = ranks(j_hi=1, j_lo=0, g_x=0)
    result = resolve([], {"g_x"}, ["j_hi", "j_lo"], set(), numeric_priority=numeric)
    assert result.journey_ids == {"j_hi"}
    assert result.suppressed_journeys == {"j_lo"} and result.dropped_journeys == set()
    assert result.guideline_ids == set()


def test_an_entity_without_a_numeric_rank_is_exempt() -> None:
    # A journey the customer just left is in scope (it satisfies dependencies) but ranks by
    # nothing: it neither suppresses nor is suppressed.
    result = resolve(
        [rel(DEPENDS, "g_confirm", "j_left")], {"g_confirm", "g_top"}, ["j_left"], set(),
        numeric_priority=ranks(g_top=4),
    )  # fmt: skip
    assert result.guideline_ids == {"g_confirm", "g_top"}
    assert result.journey_ids == {"j_left"}


# -- property tests --------------------------------------------------------------------------

NAMES = ["g0", "g1", "g2", "g3", "g4", "g5", "j0", "j1"]
relationships = st.lists(
    st.builds(
        rel,
        st.sampled_from([ENTAILS, DEPENDS, ANY, PRIORITY]),
        st.sampled_from(NAMES),
        st.sampled_from(NAMES),
    ).filter(
        lambda r: r.source.id != r.target.id and not (r.kind is ENTAILS and r.target.kind is J)
    ),
    max_size=10,
)
levels = st.dictionaries(st.sampled_from(NAMES), st.integers(-2, 3))


def _keys(result) -> set[Key]:
    return {(G, g) for g in result.guideline_ids} | {(J, j) for j in result.journey_ids}


@settings(max_examples=200, deadline=None)
@given(
    relationships,
    st.sets(st.sampled_from(NAMES[:6])),
    st.sets(st.sampled_from(["j0", "j1"])),
    levels,
)
def test_numeric_priority_is_order_independent_and_keeps_dependencies(
    rels: list[Relationship], matched: set[str], journeys: set[str], numbers: dict[str, int]
) -> None:
    rels = _acyclic_priorities(rels)
    usable = set(NAMES[:5])
    numeric = ranks(**numbers)
    first = resolve(rels, matched, journeys, usable, numeric_priority=numeric)
    second = resolve(
        list(reversed(rels)), set(sorted(matched)), sorted(journeys), usable,
        numeric_priority=dict(reversed(list(numeric.items()))),
    )  # fmt: skip
    assert _keys(first) == _keys(second)
    assert first.guideline_ids <= matched | usable  # nothing unusable is added
    active = _keys(first)
    for r in rels:
        source, target = (r.source.kind, r.source.id), (r.target.kind, r.target.id)
        if r.kind is DEPENDS and source in active:
            assert target in active  # every dependency of what holds, holds
    for source, group in _or_groups(rels).items():
        if source in active:
            assert group & active  # and one alternative of each OR-group
    # Without any relationship, only the highest number among what matched stays.
    plain = resolve([], matched, journeys, usable, numeric_priority=numeric)
    ranked = [numeric[k] for k in _keys(plain) if k in numeric]
    if ranked:
        assert all(numeric[k] == max(ranked) for k in _keys(plain) if k in numeric)


def _or_groups(rels: list[Relationship]) -> dict[Key, set[Key]]:
    groups: dict[Key, set[Key]] = {}
    for r in rels:
        if r.kind is ANY:
            groups.setdefault((r.source.kind, r.source.id), set()).add((r.target.kind, r.target.id))
    return groups


@st.composite
def or_group_cases(
    draw: st.DrawFn,
) -> tuple[list[Relationship], set[str], set[str], dict[str, int]]:
    """Random relationships plus an OR-group whose source and alternatives mostly matched, at
    few priority levels (so alternatives at the ceiling and below it are common)."""
    source = draw(st.sampled_from(NAMES[:6]))
    alternatives = draw(
        st.lists(st.sampled_from([n for n in NAMES if n != source]), min_size=2, max_size=4)
    )
    rels = [*draw(relationships), *(rel(ANY, source, a) for a in alternatives)]
    matched = draw(st.sets(st.sampled_from(NAMES[:6]))) | {source}
    matched |= {a for a in alternatives if a.startswith("g") and draw(st.booleans())}
    journeys = draw(st.sets(st.sampled_from(["j0", "j1"])))
    journeys |= {a for a in alternatives if a.startswith("j")}
    numbers = draw(st.dictionaries(st.sampled_from(NAMES), st.integers(0, 2)))
    return rels, matched, journeys, numbers


@settings(max_examples=400, deadline=None, derandomize=True)
@given(or_group_cases())
def test_an_or_group_met_at_the_ceiling_keeps_no_lower_alternative_for_itself(
    case: tuple[list[Relationship], set[str], set[str], dict[str, int]],
) -> None:
    """An OR-alternative below the ceiling stays only if something else needs it: dropping the
    relationships to the lower alternatives of a group already met at the ceiling changes
    nothing (those relationships kept nothing)."""
    rels, matched, journeys, numbers = case
    rels = _acyclic_priorities(rels)
    usable = set(NAMES[:5])
    numeric = ranks(**numbers)
    result = _keys(resolve(rels, matched, journeys, usable, numeric_priority=numeric))
    base = {(G, g) for g in matched} | {(J, j) for j in journeys}
    ranked = [numeric[k] for k in result & base if k in numeric]
    if not ranked:
        return
    ceiling = max(ranked)
    for source, group in _or_groups(rels).items():
        at_ceiling = {k for k in group & result & base if numeric.get(k) == ceiling}
        if source not in result or not at_ceiling:
            continue
        lower = {k for k in group if k not in at_ceiling}
        fewer = [
            r for r in rels
            if not (r.kind is ANY and (r.source.kind, r.source.id) == source
                    and (r.target.kind, r.target.id) in lower)
        ]  # fmt: skip
        again = resolve(fewer, matched, journeys, usable, numeric_priority=numeric)
        assert _keys(again) == result, f"{source}'s lower alternatives {lower} were kept for it"


@settings(max_examples=200, deadline=None)
@given(relationships, st.sets(st.sampled_from(NAMES[:6])), st.sets(st.sampled_from(["j0", "j1"])))
def test_equal_numbers_change_nothing(
    rels: list[Relationship], matched: set[str], journeys: set[str]
) -> None:
    rels = _acyclic_priorities(rels)
    usable = set(NAMES[:5])
    flat = {(J if n.startswith("j") else G, n): 7 for n in NAMES}
    without = resolve(rels, matched, journeys, usable)
    with_equal = resolve(rels, matched, journeys, usable, numeric_priority=flat)
    assert _keys(without) == _keys(with_equal)


@settings(max_examples=200, deadline=None)
@given(relationships, st.sets(st.sampled_from(NAMES[:6]), min_size=1), levels)
def test_an_unrelated_guideline_above_all_others_holds_alone(
    rels: list[Relationship], matched: set[str], numbers: dict[str, int]
) -> None:
    rels = _acyclic_priorities(rels)
    numeric = {**ranks(**{n: numbers.get(n, 0) for n in NAMES}), (G, "g_top"): 99}
    result = resolve(rels, {*matched, "g_top"}, [], set(NAMES[:5]), numeric_priority=numeric)
    assert _keys(result) == {(G, "g_top")}


@settings(max_examples=100, deadline=None)
@given(relationships, st.sets(st.sampled_from(NAMES[:6]), min_size=1), levels)
def test_an_unrelated_guideline_below_the_ceiling_changes_nothing(
    rels: list[Relationship], matched: set[str], numbers: dict[str, int]
) -> None:
    rels = _acyclic_priorities(rels)
    numeric = {**ranks(**{n: numbers.get(n, 0) for n in NAMES}), (G, "g_low"): -99}
    before = resolve(rels, matched, [], set(NAMES[:5]), numeric_priority=numeric)
    if not before.guideline_ids:
        return  # nothing holds: g_low would be the ceiling itself
    after = resolve(rels, {*matched, "g_low"}, [], set(NAMES[:5]), numeric_priority=numeric)
    assert _keys(after) == _keys(before)


def test_numeric_priority_resolves_alike_under_different_hash_seeds() -> None:
    script = """
import json
from tests.engine.test_relations import rel, ENTAILS, DEPENDS, PRIORITY
from tests.engine.test_numeric_priority import ranks
from engine.relations import resolve
names = [f"g{i}" for i in range(10)]
rels = [rel(DEPENDS, "g9", "g3"), rel(DEPENDS, "g3", "g4"), rel(ENTAILS, "g9", "g7")]
rels += [rel(PRIORITY, "g0", "g8"), rel(ENTAILS, "g2", "g5")]
numeric = ranks(**{n: i % 4 for i, n in enumerate(names) if n != "g9"}, g9=3, j0=1, j1=3)
r = resolve(rels, set(names) - {"g7"}, ["j0", "j1"], set(names), numeric_priority=numeric)
print(json.dumps([sorted(r.guideline_ids), sorted(r.journey_ids), [x.model_dump() for x in r.records]]))
"""
    outputs = outputs_under_hash_seeds(script, ("0", "7", "4242"))
    assert len(outputs) == 1, outputs
    # g8 (priority 0) is out by relational priority; the ceiling is 3 (g3, g7, j1); g9's needs
    # (g3 → g4) and what it entails (g7) stay.
    guidelines, journeys, _ = json.loads(outputs.pop())
    assert (guidelines, journeys) == (["g3", "g4", "g7", "g9"], ["j1"])


# -- authoring ------------------------------------------------------------------------------

PRIORITIZED_AGENT = """
agent: {id: shop, name: Shop}
guidelines:
  - id: fraud
    condition: The customer reports fraud
    action: Freeze the card and escalate
    priority: 10
  - id: small_talk
    condition: The customer chats
    action: Chat back briefly
    priority: -1
journeys:
  - id: refund
    title: Refund
    conditions: [The customer wants a refund]
    priority: 3
    states:
      - {id: ask, chat: Ask for the order number, collects: {order: str}}
    transitions:
      - {from: root, to: ask}
      - {from: ask, to: END}
    guidelines:
      - {id: polite, condition: The customer is upset, action: Apologise}
"""


def test_numeric_priority_in_yaml_builds_and_round_trips(tmp_path: Path) -> None:
    from engine.authoring import dump_agent, load_agent

    path = tmp_path / "agent.yaml"
    path.write_text(PRIORITIZED_AGENT)
    agent = load_agent(path)
    assert agent.guideline("fraud").priority == 10
    assert agent.guideline("small_talk").priority == -1
    assert agent.journey("refund").priority == 3
    assert load_agent(dump_agent(agent)) == agent


def test_numeric_priority_in_the_builder_equals_the_yaml_form(tmp_path: Path) -> None:
    from engine.authoring import END_JOURNEY, Agent, load_agent

    agent = Agent("shop", "Shop")
    agent.create_guideline(
        "The customer reports fraud", "Freeze the card and escalate", priority=10, id="fraud"
    )
    agent.create_guideline("The customer chats", "Chat back briefly", priority=-1, id="small_talk")
    refund = agent.create_journey(
        "Refund", ["The customer wants a refund"], priority=3, id="refund"
    )
    ask = refund.initial_state.transition_to(
        chat_state="Ask for the order number", collects={"order": "str"}, id="ask"
    )
    ask.transition_to(state=END_JOURNEY)
    refund.create_guideline("The customer is upset", "Apologise", id="polite")
    path = tmp_path / "agent.yaml"
    path.write_text(PRIORITIZED_AGENT)
    assert agent.build().model_dump() == load_agent(path).model_dump()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("priority: high", "priority"),
        ("priority: 2.5", "priority"),
        ("priority: true", "priority"),
    ],
)
def test_a_priority_that_is_not_a_whole_number_is_refused(
    tmp_path: Path, line: str, message: str
) -> None:
    from engine.authoring import load_agent
    from engine.errors import InvalidAgentDefinition

    path = tmp_path / "agent.yaml"
    path.write_text(PRIORITIZED_AGENT.replace("priority: 10", line))
    with pytest.raises(InvalidAgentDefinition) as error:
        load_agent(path)
    assert "guidelines[fraud]" in str(error.value) and message in str(error.value)


def test_a_priority_on_a_journey_guideline_is_refused_with_what_to_do(tmp_path: Path) -> None:
    from engine.authoring import load_agent
    from engine.errors import InvalidAgentDefinition

    path = tmp_path / "agent.yaml"
    path.write_text(
        PRIORITIZED_AGENT.replace("action: Apologise}", "action: Apologise, priority: 4}")
    )
    with pytest.raises(InvalidAgentDefinition) as error:
        load_agent(path)
    assert "belongs to journey 'refund' and takes its priority" in str(error.value)
    assert "set priority on the journey" in str(error.value)


# -- through the turn pipeline (ScriptedLLM) --------------------------------------------------


def _flight(priority: int):  # type: ignore[no-untyped-def]
    from tests.engine.test_turn_pipeline import FLIGHT

    return FLIGHT[0].model_copy(update={"priority": priority}), FLIGHT[1]


def _scripted(rules: dict):  # type: ignore[no-untyped-def]
    from engine.compose import ComposedReply
    from engine.matching.guidelines import GuidelineMatchBatch
    from engine.matching.journey_answer import JourneyNodeSelection
    from engine.testing import ScriptedLLM
    from tests.engine.pipeline_kit import compose_echo, match_when
    from tests.engine.test_turn_pipeline import enter_first_step

    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when(rules))
    llm.on(JourneyNodeSelection, enter_first_step)
    llm.on(ComposedReply, compose_echo)
    return llm


async def test_a_guideline_of_higher_priority_overrides_the_journey_step() -> None:
    from engine.model import Guideline
    from tests.engine.pipeline_kit import Harness, make_agent
    from tests.engine.test_turn_pipeline import wants

    urgent = Guideline(
        id="urgent",
        condition="The customer reports an emergency",
        action="Handle the emergency before anything else",
        priority=5,
    )
    llm = _scripted({"flight": wants("flight"), "emergency": wants("emergency")})
    h = Harness(make_agent(guidelines=[urgent], journeys=[_flight(0)]), llm)
    await h.start()

    out = await h.say("I want to book a flight, but there is an emergency")

    assert "Handle the emergency" in out.reply.text
    assert "fly to" not in out.reply.text
    assert ("numeric priority", "journey:flight", "suppressed (priority 0 < 5)") in [
        (r.kind, r.target, r.effect) for r in out.trace.relations
    ]
    # The suppressed step was not taken as asked: the journey did not move.
    assert out.state.journey_paths.get("flight", ()) == ()


async def test_a_journey_of_higher_priority_keeps_its_own_guidelines_and_cuts_lower_ones() -> None:
    from engine.model import Guideline, Relationship, RelationshipKind
    from tests.engine.pipeline_kit import Harness, make_agent
    from tests.engine.test_turn_pipeline import wants

    flight = _flight(2)
    upsell = Guideline(
        id="upsell", condition="The customer mentions travel", action="Offer travel insurance"
    )
    scoped = Guideline(
        id="window",
        condition="The customer mentions a flight",
        action="Mention that window seats are free",
        tags=("journey:flight",),
    )
    keep_scoped = Relationship(
        kind=RelationshipKind.DEPENDENCY,
        source={"kind": "guideline", "id": "window"},
        target={"kind": "journey", "id": "flight"},
    )
    llm = _scripted({"flight": wants("flight"), "travel": True})
    agent = make_agent(guidelines=[upsell, scoped], journeys=[flight], relationships=[keep_scoped])
    h = Harness(agent, llm)
    await h.start()
    await h.say("I want to book a flight")

    out = await h.say("a flight for my travel to Rome")

    assert "window seats" in out.reply.text  # the journey's guideline takes the journey's rank
    assert "insurance" not in out.reply.text
    assert ("guideline:upsell", "suppressed (priority 0 < 2)") in [
        (r.target, r.effect) for r in out.trace.relations
    ]
