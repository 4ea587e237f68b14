"""Each validation rule, pinned by the message an author would read."""

from __future__ import annotations

import pytest

from engine.errors import InvalidAgentDefinition
from engine.model import (
    AgentSnapshot,
    CannedResponse,
    CollectedField,
    ContextVariable,
    EntityKind,
    EntityRef,
    Guideline,
    JourneyEdge,
    JourneyNode,
    NodeKind,
    Relationship,
    RelationshipKind,
    Term,
    journey_tag,
)
from engine.validation.agent import problems, validate_snapshot
from engine.validation.relationships import find_cycles
from tests.engine.agents import bank_concierge, revised, revised_journey, small_agent, tool


@pytest.fixture
def shop() -> AgentSnapshot:
    return small_agent().build()


def _one_problem(snapshot: AgentSnapshot) -> str:
    found = problems(snapshot)
    assert len(found) == 1, found
    return found[0]


def _node(snapshot: AgentSnapshot, journey_id: str, node_id: str) -> JourneyNode:
    return snapshot.journey(journey_id).node(node_id)


def _with_node(snapshot: AgentSnapshot, journey_id: str, node: JourneyNode) -> AgentSnapshot:
    journey = snapshot.journey(journey_id)
    nodes = tuple(node if n.id == node.id else n for n in journey.nodes)
    return revised_journey(snapshot, journey_id, nodes=nodes)


def _with_edges(snapshot: AgentSnapshot, journey_id: str, *edges: JourneyEdge) -> AgentSnapshot:
    return revised_journey(snapshot, journey_id, edges=edges)


def _ref(kind: str, entity_id: str) -> EntityRef:
    return EntityRef(kind=EntityKind(kind), id=entity_id)


def _priority(source: EntityRef, target: EntityRef) -> Relationship:
    return Relationship(kind=RelationshipKind.PRIORITY, source=source, target=target)


def test_valid_agents_have_no_problems(shop: AgentSnapshot) -> None:
    assert problems(shop) == []
    assert problems(bank_concierge().build()) == []
    validate_snapshot(shop)


# --- duplicate ids ----------------------------------------------------------------------------


def test_duplicate_guideline_ids_are_named(shop: AgentSnapshot) -> None:
    twin = shop.guideline("order_status").model_copy(update={"condition": "Another condition"})
    snapshot = revised(shop, guidelines=(*shop.guidelines, twin))
    assert _one_problem(snapshot) == (
        "2 guidelines share the id 'order_status'; give each a unique id"
    )


def test_duplicate_journey_ids_are_named(shop: AgentSnapshot) -> None:
    snapshot = revised(shop, journeys=(*shop.journeys, shop.journey("refund")))
    assert "2 journeys share the id 'refund'" in _one_problem(snapshot)


def test_duplicate_step_ids_within_a_journey_are_named(shop: AgentSnapshot) -> None:
    journey = shop.journey("refund")
    clone = _node(shop, "refund", "decide")
    snapshot = revised_journey(shop, "refund", nodes=(*journey.nodes, clone))
    assert _one_problem(snapshot) == (
        "journey 'refund': 2 steps share the id 'decide'; give each a unique id"
    )


def test_duplicate_transition_ids_are_named(shop: AgentSnapshot) -> None:
    journey = shop.journey("refund")
    twin = journey.edges[0].model_copy(update={"condition": "Again"})
    snapshot = revised_journey(shop, "refund", edges=(*journey.edges, twin))
    assert _one_problem(snapshot) == (
        "journey 'refund': 2 transitions share the id 'root->ask'; give each a unique id"
    )


@pytest.mark.parametrize(
    ("field", "added", "expected"),
    [
        ("tools", (tool("lookup_order", "other_id"),), "2 tools share the id 'lookup_order'"),
        ("terms", (Term(name="SKU", description="Stock unit"),) * 2, "2 terms share the id 'SKU'"),
        ("variables", (ContextVariable(name="tier"),) * 2, "2 variables share the id 'tier'"),
        (
            "canned_responses",
            (CannedResponse(id="hello", template="Hi"),) * 2,
            "2 canned responses share the id 'hello'",
        ),
    ],
)
def test_duplicate_catalog_entries_are_named(
    shop: AgentSnapshot, field: str, added: tuple[object, ...], expected: str
) -> None:
    snapshot = revised(shop, **{field: (*getattr(shop, field), *added)})
    assert expected in _one_problem(snapshot)


# --- tools ------------------------------------------------------------------------------------


def test_guideline_with_unknown_tool_lists_known_tools(shop: AgentSnapshot) -> None:
    guideline = shop.guideline("order_status").model_copy(update={"tools": ("lookup_ordr",)})
    snapshot = revised(shop, guidelines=(guideline, *shop.guidelines[1:]))
    assert _one_problem(snapshot) == (
        "guideline 'order_status': tool 'lookup_ordr' is not registered; did you mean 'lookup_order'? "
        "(known tools: check_refund, lookup_order)"
    )


def test_step_with_unknown_tool_is_named_with_its_journey() -> None:
    bank = bank_concierge().build()
    check = _node(bank, "transfer", "check").model_copy(update={"tools": ("chek_funds",)})
    bank = _with_node(bank, "transfer", check)
    assert _one_problem(bank) == (
        "journey 'transfer' step 'check': tool 'chek_funds' is not registered; did you mean 'check_funds'? (known tools: "
        "authenticate, check_funds, get_account_balance, lookup_account_id, lookup_stock_price, "
        "transfer_money)"
    )


def test_tool_step_without_tools_is_named(shop: AgentSnapshot) -> None:
    check = _node(shop, "refund", "check").model_copy(update={"tools": ()})
    assert _one_problem(_with_node(shop, "refund", check)) == (
        "journey 'refund' step 'check' is a tool step without tools; name the tool(s) it calls"
    )


# --- the journey graph ------------------------------------------------------------------------


def test_edge_to_missing_node_is_named_in_error(shop: AgentSnapshot) -> None:
    edges = (
        *shop.journey("refund").edges,
        JourneyEdge(id="ask->gone", source="ask", target="gone"),
    )
    assert _one_problem(_with_edges(shop, "refund", *edges)) == (
        "journey 'refund' transition 'ask->gone' leads to step 'gone', which does not exist "
        "(known steps: ask, check, decide, root)"
    )


def test_edge_from_missing_node_is_named_in_error(shop: AgentSnapshot) -> None:
    edges = (*shop.journey("refund").edges, JourneyEdge(id="x", source="nowhere", target="ask"))
    assert "transition 'x' starts at step 'nowhere', which does not exist" in _one_problem(
        _with_edges(shop, "refund", *edges)
    )


def test_unreachable_step_is_named(shop: AgentSnapshot) -> None:
    journey = shop.journey("refund")
    orphan = JourneyNode(id="orphan", kind=NodeKind.CHAT, action="Say hi")
    snapshot = revised_journey(shop, "refund", nodes=(*journey.nodes, orphan))
    assert _one_problem(snapshot) == (
        "journey 'refund' step 'orphan' is unreachable from the root; "
        "add a transition to it or remove it"
    )


def test_root_without_outgoing_transition_is_named(shop: AgentSnapshot) -> None:
    edges = tuple(e for e in shop.journey("refund").edges if e.source != "root")
    found = problems(_with_edges(shop, "refund", *edges))
    assert "journey 'refund' has no transition out of its root; add a first step" in found


def test_missing_root_is_named(shop: AgentSnapshot) -> None:
    snapshot = revised_journey(shop, "refund", root_id="start")
    assert "journey 'refund': its root step 'start' does not exist" in problems(snapshot)


def test_fork_without_outgoing_transitions_is_named(shop: AgentSnapshot) -> None:
    edges = tuple(e for e in shop.journey("refund").edges if e.source != "decide")
    assert _one_problem(_with_edges(shop, "refund", *edges)) == (
        "journey 'refund' step 'decide' is a fork without outgoing transitions; add its branches"
    )


def test_fork_branch_without_condition_is_named(shop: AgentSnapshot) -> None:
    edges = tuple(
        e.model_copy(update={"condition": None}) if e.id == "decide->END" else e
        for e in shop.journey("refund").edges
    )
    assert _one_problem(_with_edges(shop, "refund", *edges)) == (
        "journey 'refund' step 'decide' is a fork with 2 branches, but transition "
        "'decide->END' has no condition; every branch needs one"
    )


def test_fork_with_a_single_unconditioned_branch_is_fine(shop: AgentSnapshot) -> None:
    edges = tuple(
        e.model_copy(update={"condition": None}) if e.id == "decide->END" else e
        for e in shop.journey("refund").edges
        if e.id != "decide->ask"
    )
    assert problems(_with_edges(shop, "refund", *edges)) == []


def test_chat_step_without_instruction_is_named(shop: AgentSnapshot) -> None:
    ask = _node(shop, "refund", "ask").model_copy(update={"action": "  "})
    assert "journey 'refund' step 'ask' is a chat step without an instruction" in _one_problem(
        _with_node(shop, "refund", ask)
    )


# --- collected fields -------------------------------------------------------------------------


def _with_second_collector(shop: AgentSnapshot, field: CollectedField) -> AgentSnapshot:
    decide = _node(shop, "refund", "decide")
    again = JourneyNode(id="again", kind=NodeKind.CHAT, action="Ask again", collects=(field,))
    journey = shop.journey("refund")
    return revised_journey(
        shop,
        "refund",
        nodes=(*journey.nodes, again),
        edges=(
            *journey.edges,
            JourneyEdge(id="to-again", source=decide.id, target="again", condition="c"),
        ),
    )


def test_field_collected_again_with_the_same_type_is_allowed(shop: AgentSnapshot) -> None:
    # Asking again (after a failed check) is a normal retry loop.
    assert problems(_with_second_collector(shop, CollectedField(name="order_id"))) == []


def test_field_collected_twice_with_different_types_is_named(shop: AgentSnapshot) -> None:
    snapshot = _with_second_collector(shop, CollectedField(name="order_id", type="int"))
    assert _one_problem(snapshot) == (
        "journey 'refund': field 'order_id' is collected by steps ask and again with different "
        "types, bounds or secrecy; make them the same or rename one"
    )


def test_enum_field_without_choices_is_named(shop: AgentSnapshot) -> None:
    ask = _node(shop, "refund", "ask").model_copy(
        update={"collects": (CollectedField(name="reason", type="enum"),)}
    )
    assert _one_problem(_with_node(shop, "refund", ask)) == (
        "journey 'refund' step 'ask': field 'reason' is an enum without choices; "
        "list them (e.g. 'enum:checking|savings')"
    )


def test_collecting_on_a_tool_step_is_named(shop: AgentSnapshot) -> None:
    check = _node(shop, "refund", "check").model_copy(
        update={"collects": (CollectedField(name="note"),)}
    )
    assert _one_problem(_with_node(shop, "refund", check)) == (
        "journey 'refund' step 'check' is a tool step that collects values; only chat steps can"
    )


# --- conditions -------------------------------------------------------------------------------


def test_journey_without_conditions_is_named(shop: AgentSnapshot) -> None:
    snapshot = revised_journey(shop, "refund", conditions=(), condition_guideline_ids=())
    assert _one_problem(snapshot) == (
        "journey 'refund' has no conditions, so it can never activate; add at least one"
    )


def test_missing_condition_guideline_is_named(shop: AgentSnapshot) -> None:
    snapshot = revised(
        shop, guidelines=tuple(g for g in shop.guidelines if not g.id.startswith("journey:"))
    )
    assert _one_problem(snapshot) == (
        "journey 'refund': its condition guideline 'journey:refund:condition:0' does not exist"
    )


def test_empty_journey_condition_is_named(shop: AgentSnapshot) -> None:
    snapshot = revised_journey(shop, "refund", conditions=(" ",))
    assert "journey 'refund': condition #1 is empty" in _one_problem(snapshot)


def test_empty_guideline_condition_is_named(shop: AgentSnapshot) -> None:
    blank = Guideline(id="blank", condition="", action="Do something")
    assert _one_problem(revised(shop, guidelines=(*shop.guidelines, blank))) == (
        "guideline 'blank' has an empty condition; say when it applies"
    )


def test_guideline_scoped_to_unknown_journey_is_named(shop: AgentSnapshot) -> None:
    stray = Guideline(id="stray", condition="c", action="a", tags=(journey_tag("returns"),))
    assert "guideline 'stray' is scoped to journey 'returns', which does not exist" in (
        _one_problem(revised(shop, guidelines=(*shop.guidelines, stray)))
    )


# --- relationships ----------------------------------------------------------------------------


def test_relationship_to_missing_guideline_is_named(shop: AgentSnapshot) -> None:
    broken = _priority(_ref("guideline", "order_status"), _ref("guideline", "ghost"))
    assert _one_problem(revised(shop, relationships=(broken,))) == (
        "priority relationship guideline:order_status → guideline:ghost: "
        "guideline 'ghost' does not exist"
    )


def test_relationship_to_missing_journey_is_named(shop: AgentSnapshot) -> None:
    broken = Relationship(
        kind=RelationshipKind.DEPENDENCY,
        source=_ref("guideline", "order_status"),
        target=_ref("journey", "returns"),
    )
    assert "journey 'returns' does not exist" in _one_problem(
        revised(shop, relationships=(broken,))
    )


def test_priority_cycle_reports_its_path(shop: AgentSnapshot) -> None:
    extra = Guideline(id="vip", condition="The customer is a VIP", action="Be extra kind")
    a, b = _ref("guideline", "order_status"), _ref("guideline", "vip")
    snapshot = revised(
        shop, guidelines=(*shop.guidelines, extra), relationships=(_priority(a, b), _priority(b, a))
    )
    assert _one_problem(snapshot) == (
        "priority cycle: guideline 'order_status' → guideline 'vip' → guideline 'order_status'; "
        "remove one of these priorities"
    )


def test_priority_cycle_across_guidelines_and_journeys(shop: AgentSnapshot) -> None:
    guideline, journey = _ref("guideline", "order_status"), _ref("journey", "refund")
    snapshot = revised(
        shop, relationships=(_priority(guideline, journey), _priority(journey, guideline))
    )
    assert "guideline 'order_status' → journey 'refund' → guideline 'order_status'" in _one_problem(
        snapshot
    )


def test_disambiguation_from_a_journey_is_named(shop: AgentSnapshot) -> None:
    r = Relationship(
        kind=RelationshipKind.DISAMBIGUATION,
        source=_ref("journey", "refund"),
        target=_ref("guideline", "order_status"),
    )
    assert "only an observation (a guideline) can disambiguate" in _one_problem(
        revised(shop, relationships=(r,))
    )


# --- prerequisites ----------------------------------------------------------------------------


def test_journey_requiring_unknown_journey_is_named(shop: AgentSnapshot) -> None:
    snapshot = revised_journey(shop, "refund", requires=("login",))
    assert _one_problem(snapshot) == (
        "journey 'refund' requires journey 'login', which does not exist (known journeys: refund)"
    )


def test_journey_prerequisite_cycle_reports_its_path() -> None:
    bank = bank_concierge().build()
    bank = revised_journey(bank, "authenticate", requires=("balance",))
    assert problems(bank) == [
        "journey prerequisites form a cycle: 'authenticate' → 'balance' → 'authenticate'; "
        "no journey in it could ever start"
    ]


# --- reporting --------------------------------------------------------------------------------


def test_validate_snapshot_raises_with_every_problem_at_once(shop: AgentSnapshot) -> None:
    snapshot = revised_journey(shop, "refund", requires=("login",), conditions=(" ",))
    with pytest.raises(InvalidAgentDefinition) as raised:
        validate_snapshot(snapshot)
    assert len(raised.value.problems) == 2
    assert "2 problem(s)" in str(raised.value)


def test_find_cycles_reports_each_cycle_once() -> None:
    graph = {"a": ["b"], "b": ["c", "a"], "c": ["a"], "d": ["d"]}
    assert sorted(find_cycles(graph)) == [["a", "b", "a"], ["a", "b", "c", "a"], ["d", "d"]]


def test_a_composed_parameter_on_a_consequential_tool_is_refused() -> None:
    from engine.model import AgentSnapshot
    from engine.tools.spec import ToolParameter, ToolSpec
    from engine.validation.agent import problems

    spec = ToolSpec(
        name="wire",
        consequential=True,
        parameters=(ToolParameter(name="memo", composed=True), ToolParameter(name="amount")),
    )
    found = problems(AgentSnapshot(id="a", name="a", tools=(spec,)))
    assert found == [
        "tool 'wire': parameter 'memo' is composed (the model phrases it), but the tool is "
        "consequential; a consequential tool runs only on values the customer gave — remove "
        "composed or make the tool non-consequential"
    ]
