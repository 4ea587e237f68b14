"""`load_agent` (and so `waypoint validate`) lists every problem of a document at once, each at
its element with a suggestion where one exists; tools are declared once, by their @tool."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from engine.authoring import load_agent
from engine.errors import InvalidAgentDefinition
from engine.toolkit import ToolResult, spec_of, tool
from engine.tools.spec import ToolSpec


@tool(description="Place the order", consequential=True)
def place_order(size: str, amount: Decimal) -> ToolResult:
    return ToolResult(data={"placed": True})


@tool(description="Show the sizes", kind="selector")
def choose_size() -> ToolResult:
    return ToolResult(data=["small", "large"])


REGISTRY: list[ToolSpec] = [spec_of(place_order), spec_of(choose_size)]


def _shop(**sections: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "agent": {"id": "shop", "name": "Shop"},
        "guidelines": [{"id": "greet", "condition": "The customer greets", "action": "Greet"}],
        "journeys": [
            {
                "id": "order",
                "title": "Order",
                "conditions": ["The customer orders"],
                "states": [
                    {"id": "ask", "chat": "Ask the size", "collects": {"size": "str"}},
                    {"id": "place", "tool": "place_order"},
                ],
                "transitions": [
                    {"from": "root", "to": "ask"},
                    {"from": "ask", "to": "place", "when": "The customer gave a size"},
                    {"from": "place", "to": "END"},
                ],
            }
        ],
        "canned_responses": [{"id": "done", "template": "Ordered!", "tags": ["node:order:place"]}],
    }
    document.update(sections)
    return document


def _problems(document: dict[str, Any], tools: list[ToolSpec] | None = None) -> list[str]:
    with pytest.raises(InvalidAgentDefinition) as raised:
        load_agent(document, tools=tools)
    return raised.value.problems


def test_problems_of_shape_references_and_the_whole_agent_are_listed_together() -> None:
    document = _shop(tools=[{"name": "place_order", "consequential": True}])
    document["guidelines"] += [
        {"id": "typo", "conditon": "a misspelt key", "action": "x"},  # shape
        {"id": "bye", "condition": "", "action": "Say bye"},  # the whole agent
        {
            "id": "pay",
            "condition": "The customer pays",
            "action": "Take it",
            "tools": ["place_ordr"],
        },
    ]
    document["journeys"][0]["transitions"][1]["to"] = "plac"  # a reference
    document["canned_responses"][0]["tags"] = ["node:order:plase"]
    problems = _problems(document)
    assert problems == [
        "guidelines[typo]: missing required key 'condition'",
        "guidelines[typo]: unknown key 'conditon'; did you mean 'condition'? (allowed: "
        "priority_over, depends_on, depends_on_any, entails, id, condition, action, description, tools, tags, "
        "criticality, composition_mode, continuous, customer_dependent, enabled, priority, metadata, "
        "disambiguates)",
        "guidelines[pay]: unknown tool 'place_ordr'; did you mean 'place_order'? "
        "(known tools: place_order)",
        "journeys[order].transitions[1]: unknown state 'plac'; did you mean 'place'? "
        "(known states: ask, place, root)",
        "guideline 'bye' has an empty condition; say when it applies",
        "canned response 'done': tag 'node:order:plase' names step 'plase' of journey 'order', "
        "which does not exist; did you mean 'place'? (known steps: ask, place)",
    ]


def test_a_canned_response_tagged_to_missing_elements_is_refused_with_suggestions() -> None:
    tags = ["node:order:plase", "node:ordr:place", "guideline:gret", "journey:ordr", "node:order"]
    document = _shop(canned_responses=[{"id": "r", "template": "Hi", "tags": tags}])
    problems = _problems(document, tools=REGISTRY)
    assert problems == [
        "canned response 'r': tag 'node:order:plase' names step 'plase' of journey 'order', "
        "which does not exist; did you mean 'place'? (known steps: ask, place)",
        "canned response 'r': tag 'node:ordr:place' names journey 'ordr', which does not "
        "exist; did you mean 'order'? (known journeys: order)",
        "canned response 'r': tag 'guideline:gret' names guideline 'gret', which does not "
        "exist; did you mean 'greet'? (known guidelines: greet)",
        "canned response 'r': tag 'journey:ordr' names journey 'ordr', which does not exist; "
        "did you mean 'order'? (known journeys: order)",
        "canned response 'r': tag 'node:order' must name a journey and a step: "
        "'node:<journey id>:<step id>'",
    ]


def test_a_broken_element_is_reported_once_not_again_at_every_reference_to_it() -> None:
    document = _shop(tools=[{"name": "place_order", "kind": "no-such-kind"}])
    document["guidelines"].append({"id": "vip", "condition": 3, "action": "Be nice"})
    document["guidelines"][0]["priority_over"] = ["vip"]
    problems = _problems(document)
    assert [p.split(": ")[0] for p in problems] == [
        "tools[place_order]",
        "guidelines[vip].condition",
    ]


def test_tools_named_only_take_their_declaration_from_the_registry() -> None:
    agent = load_agent(_shop(tools=["place_order", "choose_size"]), tools=REGISTRY)
    assert agent.tool("place_order") == spec_of(place_order)
    assert agent.tool("choose_size").kind.value == "selector"


def test_without_a_tools_section_the_agent_gets_every_registered_tool() -> None:
    agent = load_agent(_shop(), tools=REGISTRY)
    assert {t.name for t in agent.tools} == {"place_order", "choose_size"}


def test_a_full_declaration_that_differs_from_its_tool_names_each_difference() -> None:
    declared = {
        "name": "place_order",
        "description": "Place the order",
        "parameters": [{"name": "size"}, {"name": "count", "type": "integer"}],
    }
    [problem] = _problems(_shop(tools=[declared]), tools=REGISTRY)
    assert problem == (
        "tools[place_order]: the declaration differs from its @tool function: consequential is "
        "False here but True in @tool; parameter 'count' is not a parameter of the @tool "
        "function; parameter 'amount' of the @tool function is not declared — write just "
        "`place_order` to take the @tool declaration"
    )


def test_a_full_declaration_equal_to_its_tool_still_loads_the_same_agent() -> None:
    full = spec_of(place_order).model_dump(mode="json")
    by_name = load_agent(_shop(tools=["place_order"]), tools=REGISTRY)
    assert load_agent(_shop(tools=[full]), tools=REGISTRY) == by_name
    assert load_agent(_shop(tools=[full])) == by_name  # no registry: the declaration stands


def test_a_tool_the_registry_does_not_have_is_named_with_a_suggestion() -> None:
    problems = _problems(_shop(tools=["place_ordr"]), tools=REGISTRY)
    assert problems == [
        "tools[place_ordr]: no @tool named 'place_ordr' in the tools registry; did you mean "
        "'place_order'? (registered: choose_size, place_order)",
        "journeys[order].states[place]: unknown tool 'place_order' (known tools: none)",
    ]


def test_a_tool_named_only_needs_the_registry() -> None:
    [problem] = _problems(_shop(tools=["place_order"]))
    assert problem.startswith("tools[place_order]: named only, so its parameters come from")
    assert "waypoint validate --tools MODULE" in problem
