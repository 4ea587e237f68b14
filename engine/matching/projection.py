"""Journey → guidelines projection.

Every journey node becomes one guideline (`journey_node_guideline_id`): action = the node's action,
condition = its incoming transition conditions, `metadata.journey_node.follow_ups` = the guidelines
of the nodes one transition away. The turn shows the LLM exactly one projected guideline per active
journey — the step selected for this turn. Projection is deterministic and costs no LLM call.
"""

from __future__ import annotations

from engine.model import (
    AgentSnapshot,
    Guideline,
    Journey,
    JourneyNode,
    JourneyNodeRef,
    NodeKind,
    journey_tag,
)


def is_journey_projection(guideline_id: str) -> bool:
    """Whether a guideline id is a journey's condition or step projected as a guideline."""
    return guideline_id.startswith("journey:")


def journey_node_guideline_id(journey_id: str, node_id: str) -> str:
    return f"journey:{journey_id}:node:{node_id}"


def journey_condition_guideline_id(journey_id: str, index: int) -> str:
    return f"journey:{journey_id}:condition:{index}"


def node_action_text(journey: Journey, node: JourneyNode) -> str | None:
    """What the agent should do at a node, as the composer and matchers read it."""
    if node.kind is NodeKind.FORK:
        return None
    if node.kind is NodeKind.TOOL:
        tools = ", ".join(node.tools)
        return node.action or f"Use the results of {tools}"
    return node.action


def project_journey(journey: Journey) -> tuple[Guideline, ...]:
    projected: list[Guideline] = []
    for node in journey.nodes:
        if node.id == journey.root_id and node.action is None:
            continue  # the root is an entry point, not a step the agent performs
        incoming = [e.condition for e in journey.incoming(node.id) if e.condition]
        condition = (
            " OR ".join(f'"{c}"' for c in incoming)
            if incoming
            else (f'the "{journey.title}" journey reached this step')
        )
        follow_ups = tuple(
            journey_node_guideline_id(journey.id, e.target)
            for e in journey.outgoing(node.id)
            if e.target is not None
        )
        projected.append(
            Guideline(
                id=journey_node_guideline_id(journey.id, node.id),
                condition=condition,
                action=node_action_text(journey, node),
                description=node.description,
                tags=(journey_tag(journey.id),),
                metadata={
                    "journey_node": JourneyNodeRef(
                        journey_id=journey.id,
                        node_id=node.id,
                        kind=node.kind,
                        follow_ups=follow_ups,
                        tools=node.tools,
                    ).model_dump(mode="json"),
                    **(
                        {"customer_dependent_action_data": node.customer_dependent.model_dump()}
                        if node.customer_dependent
                        else {}
                    ),
                },
                composition_mode=node.composition_mode or journey.composition_mode,
                tools=node.tools,
            )
        )
    return tuple(projected)


_CACHE: dict[tuple[str, str], dict[str, Guideline]] = {}
_CACHE_LIMIT = 64


def projected_guidelines(agent: AgentSnapshot) -> dict[str, Guideline]:
    """All projected node guidelines of an agent version, cached per (agent, version) for the life
    of a warm container."""
    key = (agent.id, agent.version or agent.content_hash())
    cached = _CACHE.get(key)
    if cached is None:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
        cached = {g.id: g for j in agent.journeys for g in project_journey(j)}
        _CACHE[key] = cached
    return cached
