"""Relationship resolution: deterministic, after matching and before tools and composition.

- entailment: an active source makes its target guideline active too;
- dependency: a source stays active only while its target is active (AND over all targets);
- priority: an active source suppresses its target (a guideline, or a journey's step this turn).

The result is computed, not iterated a fixed number of times, so it is complete and the same in
every container whatever the hash order:

1. closure: the matched guidelines plus everything they entail, transitively — only guidelines
   this turn may use at all (`usable`: enabled, tags allow them, their journey in scope);
2. support: the greatest subset in which every member's dependencies are members and every
   entailed-only member is entailed, through members, from a matched guideline or an active
   journey (removal until nothing changes: the set only shrinks, so this ends, and the greatest
   such set is unique; two guidelines entailing each other do not keep each other alive once
   what entailed them is gone);
3. priority: a target of a priority whose source is in that set is suppressed (priority is judged
   among what holds now: g1 > g2 > g3 all holding leaves only g1), then support runs again on
   what is left (a guideline depending on a suppressed one goes too);
4. numeric priority, among what relational priority left: the highest priority of a matched
   entity that ranks is the ceiling, and what ranks below it is cut — except what the entities
   at the ceiling need to hold (their dependencies — of an OR-group, one alternative —, the
   guidelines entailing those) and what they entail. Entailed-only guidelines and entities without a numeric priority (a journey the
   customer just left, its guidelines) neither set the ceiling nor are cut by it.

Relationships are indexed once per agent version.
"""

from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.model import EntityKind, EntityRef, Relationship, RelationshipKind
from engine.trace import RelationRecord

Key = tuple[EntityKind, str]
TagMembers = Mapping[str, frozenset[Key]]  # tag → the guidelines and journeys that carry it


def _key(ref: EntityRef) -> Key:
    return (ref.kind, ref.id)


def tag_members(
    guidelines: Iterable[tuple[str, Sequence[str]]], journeys: Iterable[tuple[str, Sequence[str]]]
) -> dict[str, frozenset[Key]]:
    """Who carries each tag: (id, tags) of the agent's guidelines and journeys."""
    members: dict[str, set[Key]] = {}
    for gid, tags in guidelines:
        for tag in tags:
            members.setdefault(tag, set()).add((EntityKind.GUIDELINE, gid))
    for jid, tags in journeys:
        for tag in tags:
            members.setdefault(tag, set()).add((EntityKind.JOURNEY, jid))
    return {tag: frozenset(keys) for tag, keys in members.items()}


@dataclass(frozen=True)
class Requirement:
    """What one source needs to hold: all of `targets`, or any of them."""

    relationships: tuple[Relationship, ...]
    targets: frozenset[Key]
    any_of: bool

    def met(self, holding: set[Key]) -> bool:
        if self.any_of:
            return bool(self.targets & holding)
        return bool(self.targets) and self.targets <= holding


@dataclass(frozen=True)
class RelationshipIndex:
    entails: dict[Key, list[tuple[Relationship, frozenset[Key]]]]  # by source: targets
    depends: dict[Key, list[Requirement]]  # by source
    priorities: list[tuple[Relationship, frozenset[Key], frozenset[Key]]]  # with sources, targets


_INDEXES: dict[tuple[int, int], tuple[Sequence[Relationship], RelationshipIndex]] = {}
_NO_TAGS: TagMembers = {}


def relationship_index(
    relationships: Sequence[Relationship], members: TagMembers = _NO_TAGS
) -> RelationshipIndex:
    """The index of an agent version's relationships, tags expanded to their members (cached
    while the tuple lives)."""
    cache_key = (id(relationships), id(members))
    cached = _INDEXES.get(cache_key)
    if cached is not None and cached[0] is relationships:
        return cached[1]

    def expand(ref: EntityRef) -> frozenset[Key]:
        if ref.kind is EntityKind.TAG:
            return members.get(ref.id, frozenset())
        return frozenset({_key(ref)})

    entails: dict[Key, list[tuple[Relationship, frozenset[Key]]]] = {}
    all_of: dict[Key, list[Requirement]] = {}
    any_of: dict[Key, tuple[list[Relationship], set[Key]]] = {}
    for r in relationships:
        sources, targets = expand(r.source), expand(r.target)
        if r.kind is RelationshipKind.ENTAILMENT:
            guideline_targets = frozenset(t for t in targets if t[0] is EntityKind.GUIDELINE)
            for source in sources:
                entails.setdefault(source, []).append((r, guideline_targets))
        elif r.kind is RelationshipKind.DEPENDENCY:
            for source in sources:
                all_of.setdefault(source, []).append(Requirement((r,), targets, any_of=False))
        elif r.kind is RelationshipKind.DEPENDENCY_ANY:
            for source in sources:
                group = any_of.setdefault(source, ([], set()))
                group[0].append(r)
                group[1].update(targets)
    depends = {k: list(v) for k, v in all_of.items()}
    for source, (rels, options) in any_of.items():
        depends.setdefault(source, []).append(
            Requirement(tuple(rels), frozenset(options), any_of=True)
        )
    # Order does not matter: every priority is judged against what holds before any suppression.
    priorities = [
        (r, expand(r.source), expand(r.target))
        for r in relationships
        if r.kind is RelationshipKind.PRIORITY
    ]
    index = RelationshipIndex(entails, depends, priorities)
    if len(_INDEXES) > 64:
        _INDEXES.clear()
    _INDEXES[cache_key] = (relationships, index)
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
    known_guidelines: Container[str],
    *,
    priority_journeys: Iterable[str] | None = None,
    members: TagMembers = _NO_TAGS,
    numeric_priority: Mapping[Key, int] | None = None,
) -> Resolution:
    """Apply relationships to the matched guideline ids and the journeys in scope.

    `known_guidelines` are the guidelines entailment may add (those this turn may use);
    `priority_journeys` are the journeys whose priority counts (default: all in scope) — a
    journey the customer just left still satisfies dependencies this turn, but no longer
    suppresses anything; `members` says which guidelines and journeys carry each tag;
    `numeric_priority` gives the entities that rank by number their priority (absent: exempt)."""
    index = relationship_index(relationships, members)
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
    entailed_by: dict[Key, list[tuple[Relationship, Key]]] = {}
    while frontier:
        key = frontier.pop()
        for r, targets in index.entails.get(key, ()):
            for target in sorted(targets):
                if target[1] not in known_guidelines:
                    continue
                entailed_by.setdefault(target, []).append((r, key))
                if target not in closure:
                    closure.add(target)
                    frontier.append(target)
    base = matched | journeys

    def grounded(members_: set[Key]) -> set[Key]:
        """The members reachable from the matched guidelines and active journeys among them by
        entailments whose sources are members: two guidelines entailing each other do not
        keep each other once nothing that holds entails either."""
        reached = members_ & base
        frontier = sorted(reached)
        while frontier:
            key = frontier.pop()
            for _, targets in index.entails.get(key, ()):
                for target in sorted(targets & members_):
                    if target not in reached:
                        reached.add(target)
                        frontier.append(target)
        return reached

    def support(members_: set[Key]) -> set[Key]:
        """The greatest subset where dependencies hold and every entailed-only member is
        entailed, through members, from what matched."""
        current = set(members_)
        while True:
            unmet = {
                k for k in current if any(not req.met(current) for req in index.depends.get(k, ()))
            }
            kept = grounded(current - unmet)
            if kept == current:
                return current
            current = kept

    held = support(closure)
    # 3. Priority among what holds now (before any suppression), then support again.
    suppressed: set[Key] = set()
    for r, sources, targets in index.priorities:
        acting = {s for s in sources & held if s[0] is not EntityKind.JOURNEY or s in ranking}
        hit = (targets & held) - acting
        if acting and hit:
            suppressed |= hit
            record(r, "suppressed")
    after = support(held - suppressed)
    # 4. Numeric priority among what relational priority left.
    numeric = numeric_priority or {}
    final, ceiling = _numeric_ceiling(after, base, index, entailed_by, numeric)
    cut = after - final
    for key in sorted(cut):
        if key in numeric and key in base:
            records.append(
                RelationRecord(
                    kind="numeric priority",
                    source=f"priority {ceiling}",
                    target=f"{key[0].value}:{key[1]}",
                    effect=f"suppressed (priority {numeric[key]} < {ceiling})",
                )
            )
    suppressed |= {k for k in cut if k[0] is EntityKind.JOURNEY}

    for key in sorted(closure):
        for r, source in entailed_by.get(key, ()):
            if source in final and key in final:
                record(r, "added")
    for key in sorted(closure - final - suppressed - cut):
        for req in index.depends.get(key, ()):
            if not req.met(final):
                for r in req.relationships:
                    if req.any_of or _key(r.target) not in final or r.target.kind is EntityKind.TAG:
                        record(r, "dropped (dependency unmet)")

    guideline_ids = {i for kind, i in final if kind is EntityKind.GUIDELINE}
    journey_ids = {i for kind, i in final if kind is EntityKind.JOURNEY}
    result = Resolution(guideline_ids, journey_ids, records=records)
    result.suppressed_journeys = {i for kind, i in suppressed if kind is EntityKind.JOURNEY}
    result.dropped_journeys = {
        i for kind, i in journeys - final - suppressed if kind is EntityKind.JOURNEY
    }
    return result


def _numeric_ceiling(
    held: set[Key],
    base: set[Key],
    index: RelationshipIndex,
    entailed_by: Mapping[Key, list[tuple[Relationship, Key]]],
    numeric: Mapping[Key, int],
) -> tuple[set[Key], int | None]:
    """What stays of `held` (a supported set) under numeric priority, and the ceiling.

    The ceiling is the highest priority among the matched entities that rank; kept are those at
    the ceiling, the exempt ones, and — transitively — what a kept member needs in order to hold
    and what it entails. It needs every target of a `depends_on`, the entailers of an
    entailed-only member, and one alternative of each OR-group (`depends_on_any`): none more
    when an alternative is kept already, else the alternatives of the highest priority that
    hold (all of them when tied; one without a number of its own — it holds only by
    entailment — only when none has one). The kept set is supported by construction: every
    requirement met in `held` is met by what was pulled in."""
    ranked = {k for k in held & base if k in numeric}
    if not ranked:
        return set(held), None
    ceiling = max(numeric[k] for k in ranked)
    keep = {k for k in held & base if k not in numeric or numeric[k] == ceiling}
    while True:
        keep = _with_what_they_need(keep, held, base, index, entailed_by)
        # An OR-group none of whose alternatives is kept yet: the best that hold join (all such
        # groups at once, so the result does not depend on an order among them).
        chosen: set[Key] = set()
        for key in keep:
            for req in index.depends.get(key, ()):
                if req.any_of and not req.targets & keep:
                    chosen |= _best_alternatives(req.targets & held, numeric)
        if not chosen:
            return keep, ceiling
        keep |= chosen


def _with_what_they_need(
    keep: set[Key],
    held: set[Key],
    base: set[Key],
    index: RelationshipIndex,
    entailed_by: Mapping[Key, list[tuple[Relationship, Key]]],
) -> set[Key]:
    """`keep` closed under what its members need outright and what they entail: the targets of
    their `depends_on`, the entailers (in `held`) of an entailed-only member, and the guidelines
    they entail."""
    keep = set(keep)
    frontier = sorted(keep)
    while frontier:
        key = frontier.pop()
        pulled: set[Key] = set()
        for req in index.depends.get(key, ()):
            if not req.any_of:
                pulled |= req.targets & held
        if key not in base:
            pulled |= {src for _, src in entailed_by.get(key, ()) if src in held}
        for _, targets in index.entails.get(key, ()):
            pulled |= targets & held
        for k in sorted(pulled - keep):
            keep.add(k)
            frontier.append(k)
    return keep


def _best_alternatives(options: Collection[Key], numeric: Mapping[Key, int]) -> set[Key]:
    """The alternatives of an OR-group to keep: those of the highest priority (all when tied);
    when none has a number of its own, all of them."""
    ranked = {k for k in options if k in numeric}
    if not ranked:
        return set(options)
    top = max(numeric[k] for k in ranked)
    return {k for k in ranked if numeric[k] == top}
