"""The Python builder: what each call compiles to."""

from __future__ import annotations

import re

import pytest

from engine.agent_config import CompositionMode
from engine.authoring import (
    END_JOURNEY,
    Agent,
    field_shorthand,
    parse_field_shorthand,
)
from engine.errors import InvalidAgentDefinition
from engine.matching.projection import journey_condition_guideline_id
from engine.model import (
    AgentSnapshot,
    CollectedField,
    CustomerDependentAction,
    EntityKind,
    EntityRef,
    GuidelineKind,
    NodeKind,
    Relationship,
    RelationshipKind,
    journey_tag,
)
from engine.toolkit import ToolResult, spec_of, tool
from tests.engine.agents import CHECK_FUNDS, bank_concierge, small_agent


def _relationship(kind: RelationshipKind, source: EntityRef, target: EntityRef) -> Relationship:
    return Relationship(kind=kind, source=source, target=target)


def _guideline_ref(guideline_id: str) -> EntityRef:
    return EntityRef(kind=EntityKind.GUIDELINE, id=guideline_id)


def _journey_ref(journey_id: str) -> EntityRef:
    return EntityRef(kind=EntityKind.JOURNEY, id=journey_id)


# --- ids and versions -------------------------------------------------------------------------


def test_same_definition_gives_same_ids_and_version() -> None:
    first, second = bank_concierge().build(), bank_concierge().build()
    assert first == second
    assert first.version == second.version == first.content_hash()


def test_editing_an_action_gives_a_new_guideline_id_and_version() -> None:
    before, after = Agent(id="a", name="A"), Agent(id="a", name="A")
    before.create_guideline("The customer is upset", "Apologize")
    edited = after.create_guideline("The customer is upset", "Apologize sincerely")
    assert edited.id != before.compile().guidelines[0].id
    assert before.compile().version != after.compile().version


def test_derived_ids_are_readable_slugs_with_a_short_hash() -> None:
    agent = Agent(id="a", name="A")
    guideline = agent.create_guideline("The customer wants to talk to a human!", "Hand over")
    journey = agent.create_journey("Money Transfer", ["c"])
    assert re.fullmatch(r"the-customer-wants-to-talk-to-[0-9a-f]{6}", guideline.id)
    assert re.fullmatch(r"money-transfer-[0-9a-f]{6}", journey.id)


def test_non_ascii_text_gets_a_kind_prefix_for_its_id() -> None:
    agent = Agent(id="a", name="A")
    guideline = agent.create_guideline("客户询问产品库存", "先检查库存状态")
    assert re.fullmatch(r"guideline-[0-9a-f]{6}", guideline.id)


def test_same_guideline_in_two_journeys_gets_two_ids() -> None:
    agent = Agent(id="a", name="A")
    one = agent.create_journey("One", ["c1"]).create_guideline("The customer hesitates", "Reassure")
    two = agent.create_journey("Two", ["c2"]).create_guideline("The customer hesitates", "Reassure")
    assert one.id != two.id


# --- guidelines -------------------------------------------------------------------------------


def test_guideline_options_compile_to_explicit_fields() -> None:
    agent = Agent(id="a", name="A")
    agent.create_guideline(
        "The customer mentions a problem",
        "Offer technical support",
        continuous=True,
        criticality="high",
        composition_mode="canned_strict",
        tags=["support"],
        description="Support first",
        metadata={"owner": "support team"},
        id="support",
    )
    g = agent.compile().guideline("support")
    assert g.kind is GuidelineKind.CONTINUOUS
    assert g.criticality.value == "high"
    assert g.composition_mode is CompositionMode.CANNED_STRICT
    assert g.metadata == {"owner": "support team", "continuous": True}
    assert (g.tags, g.description) == (("support",), "Support first")


def test_customer_dependent_guideline_carries_both_sides() -> None:
    agent = Agent(id="a", name="A")
    explicit = CustomerDependentAction(
        customer_action="The customer gave the account number",
        agent_action="The agent asked for the account number",
    )
    agent.create_guideline(
        "The customer must be verified",
        "Ask for the account number",
        customer_dependent=explicit,
        id="verify",
    )
    g = agent.compile().guideline("verify")
    assert g.kind is GuidelineKind.CUSTOMER_DEPENDENT
    assert g.customer_dependent == explicit


def test_observation_has_no_action() -> None:
    agent = Agent(id="a", name="A")
    obs = agent.create_observation("The customer is a VIP")
    assert agent.compile().guideline(obs.id).kind is GuidelineKind.OBSERVATIONAL


def test_tools_passed_as_objects_register_themselves() -> None:
    agent = Agent(id="a", name="A")
    agent.create_guideline("c", "a", tools=[CHECK_FUNDS, "check_funds"])
    snapshot = agent.compile()
    assert snapshot.tools == (CHECK_FUNDS,)
    assert snapshot.guidelines[0].tools == ("check_funds", "check_funds")


def test_tool_functions_are_taken_by_their_tool_spec_anywhere_a_tool_goes() -> None:
    @tool(description="Look a branch up")
    def branch_hours(city: str) -> ToolResult:
        return ToolResult(data={"city": city})

    agent = Agent(id="a", name="A")
    agent.create_guideline("c", "a", tools=branch_hours, id="g")
    journey = agent.create_journey("J", "c2", id="j")
    journey.initial_state.transition_to(tool_state=branch_hours, id="look")
    agent.register_tool(branch_hours)
    snapshot = agent.build()
    assert snapshot.tools == (spec_of(branch_hours),)
    assert snapshot.guidelines[0].tools == ("branch_hours",)
    assert snapshot.journey("j").node("look").tools == ("branch_hours",)

    def undecorated(city: str) -> ToolResult:
        return ToolResult()

    with pytest.raises(TypeError, match="a @tool function, a ToolSpec or a tool name"):
        agent.create_guideline("c3", "a", tools=[undecorated])
    with pytest.raises(TypeError, match="register_tool expects a @tool function or a ToolSpec"):
        agent.register_tool(undecorated)


def test_tool_named_but_never_registered_fails_the_build() -> None:
    agent = Agent(id="a", name="A")
    agent.create_guideline("c", "a", tools=["check_funds"], id="g")
    with pytest.raises(InvalidAgentDefinition, match="tool 'check_funds' is not registered"):
        agent.build()


def test_invalid_value_is_a_definition_error_naming_the_guideline() -> None:
    agent = Agent(id="a", name="A")
    with pytest.raises(InvalidAgentDefinition) as raised:
        agent.create_guideline("c", "a", criticality="urgent", id="g")
    assert raised.value.problems[0].startswith("guideline 'g': criticality: input should be")


def test_agent_composition_mode_lands_in_its_config() -> None:
    agent = Agent(id="a", name="A", composition_mode="canned_fluid", config={"journey_top_k": 3})
    assert agent.config.composition_mode is CompositionMode.CANNED_FLUID
    assert agent.config.journey_top_k == 3


# --- journeys ---------------------------------------------------------------------------------


def test_journey_conditions_compile_to_global_observations() -> None:
    snapshot = bank_concierge().build()
    journey = snapshot.journey("authenticate")
    assert journey.condition_guideline_ids == (
        journey_condition_guideline_id("authenticate", 0),
        journey_condition_guideline_id("authenticate", 1),
    )
    for guideline_id, text in zip(journey.condition_guideline_ids, journey.conditions, strict=True):
        g = snapshot.guideline(guideline_id)
        assert (g.condition, g.action, g.tags) == (text, None, ())
        assert g.metadata == {"journey_condition": "authenticate"}


def test_journey_root_is_an_actionless_chat_node() -> None:
    journey = small_agent().build().journey("refund")
    root = journey.node(journey.root_id)
    assert (journey.root_id, root.kind, root.action) == ("root", NodeKind.CHAT, None)


def test_state_ids_default_to_creation_order() -> None:
    agent = Agent(id="a", name="A")
    journey = agent.create_journey("J", ["c"])
    first = journey.initial_state.transition_to(chat_state="Ask")
    named = first.transition_to(chat_state="Ask more", id="more")
    third = named.transition_to(chat_state="Thank")
    assert (first.id, named.id, third.id) == ("s1", "more", "s3")


def test_end_journey_transition_has_no_target() -> None:
    agent = Agent(id="a", name="A")
    journey = agent.create_journey("J", ["c"])
    journey.initial_state.transition_to(chat_state="Ask").transition_to(state=END_JOURNEY)
    edges = journey.compile().edges
    assert [(e.id, e.source, e.target) for e in edges] == [
        ("root->s1", "root", "s1"),
        ("s1->END", "s1", None),
    ]


def test_transition_back_to_an_existing_state_makes_a_loop() -> None:
    journey = small_agent().build().journey("refund")
    loop = [e for e in journey.edges if e.source == "decide" and e.target == "ask"]
    assert [e.condition for e in loop] == ["No refund is possible"]


def test_tool_state_compiles_tools_and_instruction() -> None:
    snapshot = bank_concierge().build()
    check = snapshot.journey("transfer").node("check")
    fetch = snapshot.journey("balance").node("fetch")
    assert (check.kind, check.tools, check.action) == (
        NodeKind.TOOL,
        ("check_funds",),
        "Check that the balance covers the amount",
    )
    assert fetch.tools == ("lookup_account_id", "get_account_balance")


def test_fork_branches_to_new_states_existing_states_and_the_end() -> None:
    journey = small_agent().build().journey("refund")
    assert journey.node("decide").kind is NodeKind.FORK
    assert journey.node("decide").description == "Whether a refund is possible"
    branches = {(e.target, e.condition) for e in journey.outgoing("decide")}
    assert branches == {(None, "A refund is possible"), ("ask", "No refund is possible")}


def test_fork_with_none_target_ends_the_journey() -> None:
    agent = Agent(id="a", name="A")
    journey = agent.create_journey("J", ["c"])
    fork = journey.initial_state.transition_to(fork_state=True)
    assert fork.fork("Done", target=None) is None
    assert journey.compile().edges[-1].target is None


def test_fork_on_a_chat_state_is_refused() -> None:
    agent = Agent(id="a", name="A")
    chat = agent.create_journey("J", ["c"]).initial_state.transition_to(chat_state="Ask")
    with pytest.raises(InvalidAgentDefinition, match="is not a fork state"):
        chat.fork("x", target=END_JOURNEY)


def test_fork_needs_a_target_or_a_new_state() -> None:
    agent = Agent(id="a", name="A")
    fork = agent.create_journey("J", ["c"]).initial_state.transition_to(fork_state=True)
    with pytest.raises(InvalidAgentDefinition, match="fork\\(\\) needs a target"):
        fork.fork("x")


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"chat_state": "Ask", "tool_state": "t"},
        {"chat_state": "Ask", "action": "Also this"},
        {"tool_state": "t", "collects": {"x": "str"}},
        {"fork_state": "Decide", "description": "Twice"},
        {"chat_state": "Ask", "id": "END"},
    ],
)
def test_misdescribed_state_is_refused(state: dict[str, object]) -> None:
    agent = Agent(id="a", name="A")
    with pytest.raises(InvalidAgentDefinition):
        agent.create_journey("J", ["c"]).initial_state.transition_to(**state)  # type: ignore[call-overload]


def test_transition_to_another_journeys_state_is_refused() -> None:
    agent = Agent(id="a", name="A")
    elsewhere = agent.create_journey("K", ["k"]).initial_state.transition_to(chat_state="Ask")
    with pytest.raises(InvalidAgentDefinition, match="belongs to journey"):
        agent.create_journey("J", ["c"]).initial_state.transition_to(state=elsewhere)


def test_requires_accepts_journeys_and_ids() -> None:
    snapshot = bank_concierge().build()
    assert snapshot.journey("balance").requires == ("authenticate",)
    assert snapshot.journey("transfer").requires == ("authenticate", "balance")


# --- collected values and customer dependence -------------------------------------------------


@pytest.mark.parametrize(
    ("shorthand", "expected"),
    [
        ("str", CollectedField(name="f")),
        ("decimal>0", CollectedField(name="f", type="decimal", gt=0)),
        ("int>=1<=10", CollectedField(name="f", type="int", ge=1, le=10)),
        ("date?", CollectedField(name="f", type="date", required=False)),
        (
            "enum:checking|savings",
            CollectedField(name="f", type="enum", choices=("checking", "savings")),
        ),
    ],
)
def test_collects_shorthand_compiles_to_typed_fields(
    shorthand: str, expected: CollectedField
) -> None:
    assert parse_field_shorthand("f", shorthand) == expected
    assert field_shorthand(expected) == shorthand


@pytest.mark.parametrize("shorthand", ["decimel", "str>0", "enum:", "int>1>2"])
def test_unreadable_shorthand_explains_the_grammar(shorthand: str) -> None:
    with pytest.raises(InvalidAgentDefinition, match="field 'f': cannot read"):
        parse_field_shorthand("f", shorthand)


def test_chat_state_that_collects_waits_for_the_customer() -> None:
    ask = bank_concierge().build().journey("transfer").node("ask_transfer")
    assert [f.name for f in ask.collects] == ["destination_account_id", "amount"]
    assert ask.customer_dependent == CustomerDependentAction(
        customer_action="The customer provided the destination account id and the amount",
        agent_action="Ask for the destination account and the amount",
    )


def test_explicit_customer_dependence_wins_and_false_turns_it_off() -> None:
    agent = Agent(id="a", name="A")
    journey = agent.create_journey("J", ["c"])
    quiet = journey.initial_state.transition_to(
        chat_state="Ask", collects={"x": "str"}, customer_dependent=False
    )
    forced = quiet.transition_to(chat_state="Confirm", customer_dependent=True)
    assert quiet.node.customer_dependent is None
    assert forced.node.customer_dependent is not None
    assert forced.node.customer_dependent.agent_action == "Confirm"


# --- journey-scoped guidelines and relationships ----------------------------------------------


def test_journey_scoped_guideline_is_tagged_and_depends_on_its_journey() -> None:
    snapshot = bank_concierge().build()
    [scoped] = [
        g for g in snapshot.guidelines if g.condition.startswith("The customer wants to cancel")
    ]
    assert scoped.tags == (journey_tag("transfer"),)
    assert scoped.scoped_journey_id == "transfer"
    assert (
        _relationship(
            RelationshipKind.DEPENDENCY, _guideline_ref(scoped.id), _journey_ref("transfer")
        )
        in snapshot.relationships
    )


def test_relationship_helpers_create_the_right_relationships() -> None:
    agent = Agent(id="a", name="A")
    urgent = agent.create_guideline("Urgent", "Handle now", id="urgent")
    normal = agent.create_guideline("Normal", "Handle later", id="normal")
    journey = agent.create_journey("J", ["c"], id="j")
    unclear = agent.create_observation("The customer mentions 'the account'", id="unclear")
    urgent.prioritize_over(normal)
    normal.depend_on(journey)
    urgent.entail(normal)
    journey.prioritize_over(normal)
    unclear.disambiguate([urgent, normal])
    g, j = _guideline_ref, _journey_ref
    assert set(agent.compile().relationships) == {
        _relationship(RelationshipKind.PRIORITY, g("urgent"), g("normal")),
        _relationship(RelationshipKind.DEPENDENCY, g("normal"), j("j")),
        _relationship(RelationshipKind.ENTAILMENT, g("urgent"), g("normal")),
        _relationship(RelationshipKind.PRIORITY, j("j"), g("normal")),
        _relationship(RelationshipKind.DISAMBIGUATION, g("unclear"), g("urgent")),
        _relationship(RelationshipKind.DISAMBIGUATION, g("unclear"), g("normal")),
    }


def _with_priorities(pairs: list[tuple[str, str]]) -> AgentSnapshot:
    agent = Agent(id="a", name="A")
    handles = {c: agent.create_guideline(c, "act", id=c) for c in ("x", "y", "z")}
    for source, target in pairs:
        handles[source].prioritize_over(handles[target])
    return agent.compile()


def test_relationships_are_deduplicated_and_independent_of_call_order() -> None:
    forward = _with_priorities([("x", "y"), ("y", "z"), ("x", "y")])
    backward = _with_priorities([("y", "z"), ("x", "y")])
    assert forward == backward
    assert len(forward.relationships) == 2


def test_guidelines_are_ordered_agent_first_then_by_journey() -> None:
    agent = Agent(id="a", name="A")
    journey = agent.create_journey("J", ["c"], id="j")
    journey.create_guideline("In the journey", "Act", id="scoped")
    agent.create_guideline("Anywhere", "Act", id="global")
    assert [g.id for g in agent.compile().guidelines] == [
        "global",
        "journey:j:condition:0",
        "scoped",
    ]


def test_build_reports_every_problem_together() -> None:
    agent = Agent(id="a", name="A")
    agent.create_guideline("c", "a", tools=["missing"], id="g")
    journey = agent.create_journey("J", [], id="j")
    journey.add_state(chat_state="Nobody comes here", id="lonely")
    with pytest.raises(InvalidAgentDefinition) as raised:
        agent.build()
    assert raised.value.problems == [
        "guideline 'g': tool 'missing' is not registered (no tools are defined)",
        "journey 'j' has no conditions, so it can never activate; add at least one",
        "journey 'j' has no transition out of its root; add a first step",
        "journey 'j' step 'lonely' is unreachable from the root; add a transition to it or remove it",
    ]


def test_concierge_prerequisites_and_tools_build_cleanly() -> None:
    snapshot = bank_concierge().build()
    assert [j.id for j in snapshot.journeys] == ["stock", "authenticate", "balance", "transfer"]
    assert {t.name for t in snapshot.tools} == {
        "lookup_stock_price",
        "authenticate",
        "lookup_account_id",
        "get_account_balance",
        "check_funds",
        "transfer_money",
    }
    assert snapshot.tool("transfer_money").consequential
