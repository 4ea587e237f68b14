"""The document form: same agent as Python, round trips, and errors that name their element."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.authoring import END_JOURNEY, agent_from_document, dump_agent, load_agent
from engine.errors import InvalidAgentDefinition
from engine.model import AgentSnapshot, EntityKind, EntityRef
from tests.engine.agents import BANK_CONCIERGE_YAML, bank_concierge, small_agent, tool


def _document(**sections: Any) -> dict[str, Any]:
    """A small valid document; `sections` replace or add top-level sections."""
    doc: dict[str, Any] = {
        "agent": {"id": "shop", "name": "Shop"},
        "tools": [{"name": "check_refund", "parameters": [{"name": "order_id"}]}],
        "journeys": [
            {
                "id": "refund",
                "title": "Refund",
                "conditions": ["The customer wants a refund"],
                "states": [
                    {
                        "id": "ask",
                        "chat": "Ask for the order number",
                        "collects": {"order_id": "str"},
                    },
                    {"id": "check", "tool": "check_refund"},
                ],
                "transitions": [
                    {"from": "root", "to": "ask"},
                    {"from": "ask", "to": "check", "when": "The customer gave it"},
                    {"from": "check", "to": "END"},
                ],
            }
        ],
    }
    doc.update(sections)
    return doc


def _refund(doc: dict[str, Any]) -> dict[str, Any]:
    journey: dict[str, Any] = doc["journeys"][0]
    return journey


def _problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidAgentDefinition) as raised:
        load_agent(doc)
    return raised.value.problems


@pytest.fixture
def bank_yaml() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(BANK_CONCIERGE_YAML.read_text())
    return data


# --- one agent, two forms ---------------------------------------------------------------------


def test_concierge_in_yaml_equals_concierge_in_python() -> None:
    from_yaml, from_python = load_agent(BANK_CONCIERGE_YAML), bank_concierge().build()
    assert from_yaml == from_python
    assert from_yaml.version == from_python.version


def test_concierge_prerequisites_survive_the_document_form() -> None:
    snapshot = load_agent(BANK_CONCIERGE_YAML)
    assert snapshot.journey("transfer").requires == ("authenticate", "balance")
    assert snapshot.journey("balance").requires == ("authenticate",)


@pytest.mark.parametrize("build", [bank_concierge, small_agent], ids=["bank", "shop"])
def test_dump_then_load_gives_an_equal_snapshot(build: Any) -> None:
    snapshot: AgentSnapshot = build().build()
    assert load_agent(dump_agent(snapshot)) == snapshot


def test_dumped_document_is_plain_yaml_and_json(tmp_path: Path) -> None:
    snapshot = bank_concierge().build()
    document = dump_agent(snapshot)
    as_yaml, as_json = tmp_path / "bank.yml", tmp_path / "bank.json"
    as_yaml.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    as_json.write_text(json.dumps(document))
    assert load_agent(as_yaml) == load_agent(as_json) == snapshot


def test_dump_writes_the_readable_shorthands() -> None:
    transfer = next(
        j for j in dump_agent(bank_concierge().build())["journeys"] if j["id"] == "transfer"
    )
    states = {s["id"]: s for s in transfer["states"]}
    assert states["ask_transfer"]["collects"] == {
        "destination_account_id": "str",
        "amount": "decimal>0",
    }
    assert "customer_dependent" not in states["ask_transfer"]  # derived from collects
    assert states["funds"] == {"id": "funds", "fork": "Whether the balance covers the amount"}
    assert {"from": "confirm", "to": "END", "when": "The customer cancelled"} in transfer[
        "transitions"
    ]
    assert transfer["guidelines"][0].keys() == {"id", "condition", "action"}


def test_unusual_definitions_round_trip_too() -> None:
    """A guideline and a journey sharing an id, a described field, forced customer dependence,
    a pinned transition id, a relationship from a journey condition."""
    agent = small_agent()
    kind = agent.create_guideline(
        "Always",
        "Be kind",
        customer_dependent=True,
        enabled=False,
        metadata={"owner": "cx"},
        id="survey",
    )
    journey = agent.create_journey("Survey", ["The conversation ends"], id="survey")
    kind.entail(journey)
    ask = journey.initial_state.transition_to(
        chat_state="Ask for a score",
        collects={"score": {"type": "int", "ge": 1, "le": 5, "description": "1 to 5"}},
        customer_dependent=False,
        transition_id="start",
    )
    ask.transition_to(state=END_JOURNEY, condition="Scored")
    condition = EntityRef(kind=EntityKind.GUIDELINE, id="journey:survey:condition:0")
    agent.create_relationship(
        "priority", condition, EntityRef(kind=EntityKind.GUIDELINE, id="order_status")
    )
    snapshot = agent.build()

    document = dump_agent(snapshot)

    assert document["guidelines"][1]["entails"] == [{"journey": "survey"}]
    assert document["relationships"] == [
        {"kind": "priority", "source": "journey:survey:condition:0", "target": "order_status"}
    ]
    assert load_agent(document) == snapshot


def test_states_without_ids_are_numbered_like_python() -> None:
    doc = _document()
    for state in _refund(doc)["states"]:
        del state["id"]
    _refund(doc)["transitions"] = [
        {"from": "root", "to": "s1"},
        {"from": "s1", "to": "s2", "when": "The customer gave it"},
        {"from": "s2", "to": None},
    ]
    assert [n.id for n in load_agent(doc).journey("refund").nodes] == ["root", "s1", "s2"]


def test_document_agent_can_be_extended_in_python() -> None:
    agent = agent_from_document(_document())
    agent.create_guideline(
        "The customer asks for the order status", "Tell it", tools=[tool("lookup_order")]
    )
    snapshot = agent.build()
    assert snapshot.has_tool("lookup_order") and snapshot.has_tool("check_refund")


# --- document errors --------------------------------------------------------------------------


def test_unknown_key_is_named_with_its_path_and_a_suggestion() -> None:
    doc = _document()
    _refund(doc)["states"][0]["chta"] = "typo"
    [problem] = _problems(doc)
    assert problem.startswith(
        "journeys[refund].states[ask]: unknown key 'chta'; did you mean 'chat'? (allowed: id, chat,"
    )


def test_wrong_type_is_named_with_its_path() -> None:
    doc = _document()
    _refund(doc)["states"][1]["tool"] = 5
    _refund(doc)["conditions"] = "The customer wants a refund"
    assert _problems(doc) == [
        "journeys[refund].conditions: expected a list",
        "journeys[refund].states[check].tool: expected a text or a list",
    ]


def test_missing_required_key_is_named() -> None:
    doc = _document()
    del _refund(doc)["transitions"][1]["from"]
    assert _problems(doc) == ["journeys[refund].transitions[1]: missing required key 'from'"]


def test_bad_enum_value_lists_the_allowed_ones() -> None:
    doc = _document(
        guidelines=[{"id": "g", "condition": "c", "action": "a", "criticality": "urgent"}]
    )
    assert _problems(doc) == [
        "guidelines[g].criticality: input should be 'low', 'medium' or 'high'"
    ]


def test_unknown_tool_in_a_state_is_named_with_its_path(bank_yaml: dict[str, Any]) -> None:
    transfer = next(j for j in bank_yaml["journeys"] if j["id"] == "transfer")
    next(s for s in transfer["states"] if s["id"] == "check")["tool"] = "chek_funds"
    [problem] = _problems(bank_yaml)
    assert problem.startswith(
        "journeys[transfer].states[check]: unknown tool 'chek_funds'; did you mean 'check_funds'?"
    )


def test_transition_to_unknown_state_is_named() -> None:
    doc = _document()
    _refund(doc)["transitions"][1]["to"] = "chekc"
    assert _problems(doc) == [
        "journeys[refund].transitions[1]: unknown state 'chekc'; did you mean 'check'? "
        "(known states: ask, check, root)"
    ]


def test_state_with_two_kinds_is_named() -> None:
    doc = _document()
    _refund(doc)["states"][1]["chat"] = "Say something"
    assert _problems(doc) == [
        "journeys[refund].states[check]: a state has exactly one of chat, tool or fork (got chat, tool)"
    ]


def test_unknown_reference_is_named() -> None:
    doc = _document(
        guidelines=[{"id": "g", "condition": "c", "action": "a", "priority_over": ["refnud"]}]
    )
    [problem] = _problems(doc)
    assert problem.startswith(
        "guidelines[g].priority_over[0]: unknown guideline or journey 'refnud'; did you mean 'refund'?"
    )


def test_ambiguous_reference_must_say_its_kind() -> None:
    doc = _document(
        guidelines=[
            {"id": "refund", "condition": "c", "action": "a"},
            {"id": "g", "condition": "d", "action": "b", "priority_over": ["refund"]},
        ]
    )
    assert "is both a guideline and a journey" in _problems(doc)[0]
    doc["guidelines"][1]["priority_over"] = [{"journey": "refund"}]
    assert load_agent(doc).relationships[0].target.kind.value == "journey"


def test_unknown_prerequisite_is_named() -> None:
    doc = _document()
    _refund(doc)["requires"] = ["login"]
    [problem] = _problems(doc)
    assert problem.startswith("journeys[refund].requires: unknown journey 'login'")


def test_every_document_problem_is_reported_at_once() -> None:
    doc = _document()
    _refund(doc)["states"][1]["tool"] = "nope"
    _refund(doc)["transitions"][2]["from"] = "nowhere"
    _refund(doc)["states"][0]["collects"] = {"order_id": "strng"}
    problems = _problems(doc)
    assert len(problems) == 3
    assert problems[0].startswith(
        "journeys[refund].states[ask]: field 'order_id': cannot read 'strng'"
    )


def test_agent_level_problems_come_from_validation() -> None:
    doc = _document()
    _refund(doc)["states"].append({"id": "lonely", "chat": "Nobody comes here"})
    assert _problems(doc) == [
        "journey 'refund' step 'lonely' is unreachable from the root; add a transition to it or remove it"
    ]


def test_invalid_yaml_and_unsupported_files_are_definition_errors(tmp_path: Path) -> None:
    broken, text = tmp_path / "agent.yaml", tmp_path / "agent.txt"
    broken.write_text("agent: {id: [unclosed\n")
    text.write_text("")
    with pytest.raises(InvalidAgentDefinition, match="not valid YAML"):
        load_agent(broken)
    with pytest.raises(InvalidAgentDefinition, match="unsupported file type"):
        load_agent(text)


def test_the_source_document_is_not_modified() -> None:
    doc = _document()
    before = copy.deepcopy(doc)
    load_agent(doc)
    assert doc == before


def test_a_failure_transition_round_trips_and_is_checked() -> None:
    from examples.banking import load as load_bank

    bank = load_bank()
    assert bank.journey("balance").node("find_account").on_failure == "ask_account"
    assert load_agent(dump_agent(bank)) == bank

    document = dump_agent(bank)
    balance = next(j for j in document["journeys"] if j["id"] == "balance")
    states = {s["id"]: s for s in balance["states"]}
    states["find_account"]["on_failure"] = "ask_acount"
    states["ask_account"]["on_failure"] = "END"
    with pytest.raises(InvalidAgentDefinition) as error:
        load_agent(document)
    problems = str(error.value)
    assert "states[find_account].on_failure: unknown state 'ask_acount'" in problems
    assert "did you mean 'ask_account'" in problems
    assert "states[ask_account].on_failure: state 'ask_account' is not a tool state" in problems
