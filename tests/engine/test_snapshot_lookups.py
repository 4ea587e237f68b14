"""`AgentSnapshot`'s lookups by id read its private indexes directly (#34, sixth pass: pydantic's
`__getattr__` for a private attribute cost 1–4 µs a lookup). They must answer what a walk over the
snapshot's own tuples answers, however the snapshot was made: built, validated from its dump,
copied with changes, or constructed without validation."""

from __future__ import annotations

import pytest

from engine.model import AgentSnapshot, Guideline, ToolSpec
from tests.contracts.factories import make_agent


def _variants(agent: AgentSnapshot) -> list[AgentSnapshot]:
    guidelines = tuple(
        Guideline(id=f"g{i}", condition=f"the customer says {i}", action=f"reply {i}")
        for i in range(5)
    )
    tools = (ToolSpec(name="lookup", description="look something up"),)
    built = AgentSnapshot(
        id=agent.id, name=agent.name, journeys=agent.journeys, guidelines=guidelines, tools=tools
    )
    return [
        built,
        AgentSnapshot.model_validate(built.model_dump()),
        built.model_copy(),
        AgentSnapshot.model_validate(
            built.model_dump() | {"guidelines": [g.model_dump() for g in guidelines[:2]]}
        ),
        AgentSnapshot.model_construct(**dict(built)),
    ]


@pytest.mark.parametrize("index", range(5))
def test_lookups_by_id_answer_what_the_snapshot_holds(index: int) -> None:
    agent = _variants(make_agent())[index]
    for g in agent.guidelines:
        assert agent.has_guideline(g.id)
        assert agent.guideline(g.id) is next(x for x in agent.guidelines if x.id == g.id)
    for j in agent.journeys:
        assert agent.has_journey(j.id)
        assert agent.journey(j.id) is next(x for x in agent.journeys if x.id == j.id)
    for t in agent.tools:
        assert agent.has_tool(t.name)
        assert agent.tool(t.name) is next(x for x in agent.tools if x.name == t.name)
    for missing in ("nope", "g99", ""):
        assert not agent.has_guideline(missing)
        assert not agent.has_journey(missing)
        assert not agent.has_tool(missing)
        with pytest.raises(KeyError):
            agent.guideline(missing)
        with pytest.raises(KeyError):
            agent.journey(missing)
        with pytest.raises(KeyError):
            agent.tool(missing)
