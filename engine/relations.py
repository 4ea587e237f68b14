"""Relationship resolution: deterministic, after matching and before tools and composition.

- entailment: an active source makes its target guideline active too;
- dependency: a source stays active only while its target is active (AND over all targets);
- priority: an active source suppresses its target (a guideline, or a journey's step this turn).

The result is computed, not iterated a fixed number of times, so it is complete and the same in
every container whatever the hash order:

1. closure: the matched guidelines plus everything they entail, transitively — only guidelines
   this turn may use at all (`usable`: enabled, tags allow them, their journey in scope);
2. support: the greatest subset in which every member's dependencies are members and every
   entailed-only member is still entailed by a member (removal until nothing changes: the set
   only shrinks, so this ends, and the greatest such set is unique);
3. priority: a target of a priority whose source is in that set is suppressed (priority is judged
   among what holds now: g1 > g2 > g3 all holding leaves only g1), then support runs again on
   what is left (a guideline depending on a suppressed one goes too).

Relationships are indexed once per agent version.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from engine.model import EntityKind, EntityRef, Relationship, RelationshipKind
from engine.trace import RelationRecord

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
    dropped_journeys: set[str] = field(default_factory=set)  # by an unmet dependency
    records: list[RelationRecord] = field(default_factory=list)


def resolve(
    relationships: Sequence[Relationship],
    matched_guidelines: Iterable[str],
    active_journeys: Iterable[str],
    known_guidelines: set[str] | frozenset[str],
    *,
    priority_journeys: Iterable[str] | None = None,
) -> Resolution:
    """Apply relationships to the matched guideline ids and the journeys in scope.

    `known_guidelines` are the guidelines entailment may add (those this turn may use);
    `priority_journeys` are the journeys whose priority counts (default: all in scope) — a
    journey the customer just left still satisfies dependencies this turn, but no longer
    suppresses anything."""
    index = relationship_index(relationships)
    matched = {(EntityKind.GUIDELINE, g) for g in matched_guidelines}
    journeys = {(EntityKind.JOURNEY, j) for j in active_journeys}
    ranking = (
        journeys
        if priority_journeys is None
        else {(EntityKind.JOURNEY, j) for j in priority_journeys} & journeys
    )
    records: list[RelationRecord] = []

    def record(r: Relationship, effect: str) -> None:
        rec = RelationRecord(
            kind=r.kind.value, source=str(r.source), target=str(r.target), effect=effect
        )
        if rec not in records:
            records.append(rec)

    # 1. Entailment closure over usable guidelines.
    closure = set(matched | journeys)
    frontier = sorted(closure)
    entailed_by: dict[Key, list[Relationship]] = {}
    while frontier:
        key = frontier.pop()
        for r in index.entails.get(key, ()):
            target = _key(r.target)
            if r.target.id not in known_guidelines:
                continue
            entailed_by.setdefault(target, []).append(r)
            if target not in closure:
                closure.add(target)
                frontier.append(target)
    base = matched | journeys

    def support(members: set[Key]) -> set[Key]:
        """The greatest subset where dependencies hold and entailed members stay entailed."""
        current = set(members)
        while True:
            unmet = {
                k
                for k in current
                if any(_key(r.target) not in current for r in index.depends.get(k, ()))
                or (k not in base and not any(_key(r.source) in current for r in entailed_by[k]))
            }
            if not unmet:
                return current
            current -= unmet

    held = support(closure)
    # 3. Priority among what holds now (before any suppression), then support again.
    suppressed = {
        _key(r.target)
        for r in index.priorities
        if _key(r.source) in held
        and _key(r.target) in held
        and (r.source.kind is not EntityKind.JOURNEY or _key(r.source) in ranking)
    }
    final = support(held - suppressed)

    for key in sorted(closure):
        for r in entailed_by.get(key, ()):
            if _key(r.source) in final and key in final:
                record(r, "added")
    for key in sorted(closure - final - suppressed):
        unmet = [r for r in index.depends.get(key, ()) if _key(r.target) not in final]
        for r in unmet:
            record(r, "dropped (dependency unmet)")
    for r in index.priorities:
        if _key(r.target) in suppressed and _key(r.source) in held:
            record(r, "suppressed")

    guideline_ids = {i for kind, i in final if kind is EntityKind.GUIDELINE}
    journey_ids = {i for kind, i in final if kind is EntityKind.JOURNEY}
    result = Resolution(guideline_ids, journey_ids, records=records)
    result.suppressed_journeys = {i for kind, i in suppressed if kind is EntityKind.JOURNEY}
    result.dropped_journeys = {
        i for kind, i in journeys - final - suppressed if kind is EntityKind.JOURNEY
    }
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
