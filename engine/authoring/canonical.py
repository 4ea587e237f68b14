"""The canonical shape of a compiled agent.

An author may declare things in any interleaving: a journey between two guidelines, a tool
registered when a guideline first mentions it, a relationship before or after its target. These
rules give a snapshot's collections one order, so the same agent always has the same version, the
Python and the document form agree, and a dumped document loads back to an equal snapshot:

- guidelines: agent-level ones in declaration order, then for each journey (in journey order) its
  condition guidelines and then the guidelines scoped to it;
- relationships are a set: sorted, duplicates dropped;
- tools are registered implicitly: sorted by name.

Everything else keeps declaration order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from engine.model import (
    JOURNEY_TAG_PREFIX,
    EntityKind,
    EntityRef,
    Guideline,
    Journey,
    Relationship,
    RelationshipKind,
)
from engine.tools.spec import ToolSpec


@dataclass(frozen=True)
class Placement:
    """Where a guideline belongs: the agent (`journey_id=None`), or a journey as one of its
    conditions or as a guideline scoped to it."""

    journey_id: str | None = None
    is_condition: bool = False


AGENT_LEVEL = Placement()


def journey_dependency(guideline_id: str, journey_id: str) -> Relationship:
    """The relationship that keeps a journey-scoped guideline active only with its journey."""
    return Relationship(
        kind=RelationshipKind.DEPENDENCY,
        source=EntityRef(kind=EntityKind.GUIDELINE, id=guideline_id),
        target=EntityRef(kind=EntityKind.JOURNEY, id=journey_id),
    )


def place_guideline(
    guideline: Guideline,
    journeys: Mapping[str, Journey],
    relationships: Collection[Relationship],
) -> Placement:
    """A condition guideline is named by its journey; a scoped guideline carries its journey's tag
    first and depends on that journey — exactly what `JourneyBuilder.create_guideline` makes."""
    owner = guideline.condition_of_journey
    if owner is not None and guideline.id in _condition_ids(journeys.get(owner)):
        return Placement(owner, is_condition=True)
    if guideline.tags and guideline.tags[0].startswith(JOURNEY_TAG_PREFIX):
        journey_id = guideline.tags[0][len(JOURNEY_TAG_PREFIX) :]
        if journey_id in journeys and journey_dependency(guideline.id, journey_id) in relationships:
            return Placement(journey_id)
    return AGENT_LEVEL


def _condition_ids(journey: Journey | None) -> tuple[str, ...]:
    return journey.condition_guideline_ids if journey else ()


def canonical_guidelines(
    guidelines: Sequence[Guideline],
    journeys: Sequence[Journey],
    relationships: Collection[Relationship],
) -> tuple[Guideline, ...]:
    """Agent-level guidelines first, then each journey's conditions and scoped guidelines."""
    by_id = {j.id: j for j in journeys}
    relationship_set = set(relationships)
    buckets: dict[str | None, list[tuple[int, Guideline]]] = {}
    for g in guidelines:
        placement = place_guideline(g, by_id, relationship_set)
        rank = 0 if placement.is_condition else 1
        buckets.setdefault(placement.journey_id, []).append((rank, g))
    ordered = [g for _, g in buckets.pop(None, [])]
    for journey in journeys:
        ordered.extend(g for _, g in sorted(buckets.pop(journey.id, []), key=lambda e: e[0]))
    return tuple(ordered)


def _relationship_key(r: Relationship) -> tuple[str, ...]:
    return (r.kind.value, r.source.kind.value, r.source.id, r.target.kind.value, r.target.id)


def canonical_relationships(relationships: Sequence[Relationship]) -> tuple[Relationship, ...]:
    """Sorted by kind, source and target; a relationship declared twice is kept once."""
    return tuple(sorted(dict.fromkeys(relationships), key=_relationship_key))


def canonical_tools(tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    """Sorted by name."""
    # A stable sort keeps two conflicting specs of one name next to each other for the report.
    return tuple(sorted(tools, key=lambda t: t.name))
