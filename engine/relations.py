"""Relationship resolution: deterministic, after matching and before tools and composition.

- entailment: an active source makes its target guideline active too;
- dependency: a source stays active only while its target is active (AND over all targets);
- priority: an active source suppresses its target (a guideline, or a journey's step this turn).

Runs to a fixpoint (bounded), because entailment can add a guideline that suppresses another.
Relationships are indexed by source once per agent version, so a turn only looks at the sources
that are active — the cost follows what matched, not the size of the agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from engine.model import EntityKind, EntityRef, Relationship, RelationshipKind
from engine.trace import RelationRecord

MAX_ITERATIONS = 5

Key = tuple[EntityKind, str]


def _key(ref: EntityRef) -> Key:
    return (ref.kind, ref.id)


@dataclass(frozen=True)
class RelationshipIndex:
    entails: dict[Key, list[Relationship]]  # by source
    depends: dict[Key, list[Relationship]]  # by source
    priorities: list[Relationship]  # highest-priority sources first


_INDEXES: dict[int, tuple[Sequence[Relationship], RelationshipIndex]] = {}


def relationship_index(relationships: Sequence[Relationship]) -> RelationshipIndex:
    """The index of an agent version's relationships (cached while the tuple lives)."""
    cached = _INDEXES.get(id(relationships))
    if cached is not None and cached[0] is relationships:
        return cached[1]
    entails: dict[Key, list[Relationship]] = {}
    depends: dict[Key, list[Relationship]] = {}
    for r in relationships:
        if r.kind is RelationshipKind.ENTAILMENT and r.target.kind is EntityKind.GUIDELINE:
            entails.setdefault(_key(r.source), []).append(r)
        elif r.kind is RelationshipKind.DEPENDENCY:
            depends.setdefault(_key(r.source), []).append(r)
    index = RelationshipIndex(entails, depends, _priority_order(relationships))
    if len(_INDEXES) > 64:
        _INDEXES.clear()
    _INDEXES[id(relationships)] = (relationships, index)
    return index


@dataclass
class Resolution:
    guideline_ids: set[str]
    journey_ids: set[str]  # journeys in scope (their step is shown when they have one)
    suppressed_journeys: set[str] = field(default_factory=set)
    records: list[RelationRecord] = field(default_factory=list)


def resolve(
    relationships: Sequence[Relationship],
    matched_guidelines: Iterable[str],
    active_journeys: Iterable[str],
    known_guidelines: set[str] | frozenset[str],
) -> Resolution:
    """Apply relationships to the matched guideline ids and active journey ids."""
    index = relationship_index(relationships)
    result = Resolution(set(matched_guidelines), set(active_journeys))

    def ids(kind: EntityKind) -> set[str]:
        return result.guideline_ids if kind is EntityKind.GUIDELINE else result.journey_ids

    def active(ref: EntityRef) -> bool:
        return ref.id in ids(ref.kind)

    def active_keys() -> list[Key]:
        return [(EntityKind.GUIDELINE, g) for g in result.guideline_ids] + [
            (EntityKind.JOURNEY, j) for j in result.journey_ids
        ]

    def record(r: Relationship, effect: str) -> None:
        rec = RelationRecord(
            kind=r.kind.value, source=str(r.source), target=str(r.target), effect=effect
        )
        if rec not in result.records:
            result.records.append(rec)

    for _ in range(MAX_ITERATIONS):
        before = (frozenset(result.guideline_ids), frozenset(result.journey_ids))
        for key in active_keys():
            for r in index.entails.get(key, ()):
                target = r.target.id
                if target in known_guidelines and target not in result.guideline_ids:
                    result.guideline_ids.add(target)
                    record(r, "added")
        for key in active_keys():
            deps = index.depends.get(key)
            if deps and not all(active(r.target) for r in deps):
                ids(key[0]).discard(key[1])
                for r in deps:
                    record(r, "dropped (dependency unmet)")
        for r in index.priorities:
            if active(r.source) and active(r.target):
                ids(r.target.kind).discard(r.target.id)
                if r.target.kind is EntityKind.JOURNEY:
                    result.suppressed_journeys.add(r.target.id)
                record(r, "suppressed")
        if before == (frozenset(result.guideline_ids), frozenset(result.journey_ids)):
            break
    return result


def _priority_order(relationships: Sequence[Relationship]) -> list[Relationship]:
    """Priority relationships sorted by their source's depth in the priority graph (roots first),
    so a suppressed entity never suppresses another. Validation rejects priority cycles."""
    priority = [r for r in relationships if r.kind is RelationshipKind.PRIORITY]
    parents: dict[Key, list[Key]] = {}
    for r in priority:
        parents.setdefault(_key(r.target), []).append(_key(r.source))
    depth: dict[Key, int] = {}

    def depth_of(key: Key, seen: frozenset[Key] = frozenset()) -> int:
        if key not in depth:
            ups = [p for p in parents.get(key, []) if p not in seen]
            depth[key] = 1 + max((depth_of(p, seen | {key}) for p in ups), default=-1)
        return depth[key]

    return sorted(priority, key=lambda r: depth_of(_key(r.source)))
