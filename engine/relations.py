"""Relationship resolution: deterministic, after matching and before tools and composition.

- entailment: an active source makes its target guideline active too;
- dependency: a source stays active only while its target is active (AND over all targets);
- priority: an active source suppresses its target (a guideline, or a journey's step this turn).

Runs to a fixpoint (bounded), because entailment can add a guideline that suppresses another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from engine.model import EntityKind, EntityRef, Relationship, RelationshipKind
from engine.trace import RelationRecord

MAX_ITERATIONS = 5


@dataclass
class Resolution:
    guideline_ids: set[str]
    journey_ids: set[str]  # journeys whose step is shown this turn
    suppressed_journeys: set[str] = field(default_factory=set)
    records: list[RelationRecord] = field(default_factory=list)


def resolve(
    relationships: Sequence[Relationship],
    matched_guidelines: Iterable[str],
    active_journeys: Iterable[str],
    known_guidelines: set[str],
) -> Resolution:
    """Apply relationships to the matched guideline ids and active journey ids."""
    result = Resolution(set(matched_guidelines), set(active_journeys))

    def active(ref: EntityRef) -> bool:
        if ref.kind is EntityKind.GUIDELINE:
            return ref.id in result.guideline_ids
        return ref.id in result.journey_ids

    def record(r: Relationship, effect: str) -> None:
        rec = RelationRecord(
            kind=r.kind.value, source=str(r.source), target=str(r.target), effect=effect
        )
        if rec not in result.records:
            result.records.append(rec)

    for _ in range(MAX_ITERATIONS):
        before = (frozenset(result.guideline_ids), frozenset(result.journey_ids))
        for r in relationships:
            entails_new_guideline = (
                r.kind is RelationshipKind.ENTAILMENT
                and active(r.source)
                and r.target.kind is EntityKind.GUIDELINE
                and r.target.id in known_guidelines
                and r.target.id not in result.guideline_ids
            )
            if entails_new_guideline:
                result.guideline_ids.add(r.target.id)
                record(r, "added")
        for source, targets in _dependencies(relationships).items():
            if active(source) and not all(active(t) for t in targets):
                _deactivate(result, source)
                for r in relationships:
                    if r.kind is RelationshipKind.DEPENDENCY and r.source == source:
                        record(r, "dropped (dependency unmet)")
        # Highest-priority sources first, so a suppressed entity never suppresses another.
        for r in _priority_order(relationships):
            if active(r.source) and active(r.target):
                _deactivate(result, r.target)
                if r.target.kind is EntityKind.JOURNEY:
                    result.suppressed_journeys.add(r.target.id)
                record(r, "suppressed")
        if before == (frozenset(result.guideline_ids), frozenset(result.journey_ids)):
            break
    return result


def _priority_order(relationships: Sequence[Relationship]) -> list[Relationship]:
    """Priority relationships sorted by their source's depth in the priority graph (roots first).
    Validation rejects priority cycles, so depths are finite."""
    priority = [r for r in relationships if r.kind is RelationshipKind.PRIORITY]
    parents: dict[EntityRef, list[EntityRef]] = {}
    for r in priority:
        parents.setdefault(r.target, []).append(r.source)
    depth: dict[EntityRef, int] = {}

    def depth_of(ref: EntityRef, seen: frozenset[EntityRef] = frozenset()) -> int:
        if ref not in depth:
            ups = [p for p in parents.get(ref, []) if p not in seen]
            depth[ref] = 1 + max((depth_of(p, seen | {ref}) for p in ups), default=-1)
        return depth[ref]

    return sorted(priority, key=lambda r: depth_of(r.source))


def _dependencies(relationships: Sequence[Relationship]) -> dict[EntityRef, list[EntityRef]]:
    deps: dict[EntityRef, list[EntityRef]] = {}
    for r in relationships:
        if r.kind is RelationshipKind.DEPENDENCY:
            deps.setdefault(r.source, []).append(r.target)
    return deps


def _deactivate(result: Resolution, ref: EntityRef) -> None:
    if ref.kind is EntityKind.GUIDELINE:
        result.guideline_ids.discard(ref.id)
    else:
        result.journey_ids.discard(ref.id)
