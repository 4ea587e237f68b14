"""One rule for agent ids (issue #14): ids that would mean something in a key, a path or a URL
are refused with a message quoting the rule, wherever the agent is built."""

from __future__ import annotations

import pytest

from engine.agent_id import AGENT_ID_RULE, InvalidAgentId, check_agent_id
from engine.authoring import Agent, agent_from_document
from engine.errors import InvalidAgentDefinition

HOSTILE_IDS = ["../evil", "a/b", "bank#x", "", ".", "..", "-rf", "bank\n", "bank x", "ü", "x" * 101]


@pytest.mark.parametrize("agent_id", HOSTILE_IDS)
def test_hostile_agent_ids_are_refused_naming_the_rule(agent_id: str) -> None:
    with pytest.raises(InvalidAgentId) as caught:
        check_agent_id(agent_id)
    assert AGENT_ID_RULE in str(caught.value)


@pytest.mark.parametrize("agent_id", ["bank", "Bank_2", "help.desk-eu", "7", "x" * 100])
def test_ordinary_agent_ids_pass(agent_id: str) -> None:
    assert check_agent_id(agent_id) == agent_id


@pytest.mark.parametrize("agent_id", ["../evil", "a/b", "bank#x"])
def test_an_agent_with_a_hostile_id_does_not_build_from_python_or_a_document(
    agent_id: str,
) -> None:
    with pytest.raises(InvalidAgentDefinition, match="letters, digits"):
        Agent(id=agent_id, name="Evil").build()
    document = {"agent": {"id": agent_id, "name": "Evil"}}
    with pytest.raises(InvalidAgentDefinition, match="letters, digits"):
        agent_from_document(document).build()
