"""Validation of what ties an agent's elements together: relationships (their ends exist, only an
observation disambiguates), priorities (no cycles, none on a journey's own guidelines) and journey
prerequisites (no cycles).

Part of `engine.validation.agent`; `find_cycles` is the cycle search both cycle checks use.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.model import AgentSnapshot, EntityKind, EntityRef, RelationshipKind


def _exists(ref: EntityRef, snapshot: AgentSnapshot) -> bool:
    if ref.kind is EntityKind.GUIDELINE:
        return snapshot.has_guideline(ref.id)
    if ref.kind is EntityKind.TAG:  # a tag exists when some guideline or journey carries it
        return any(ref.id in g.tags for g in snapshot.guidelines) or any(
            ref.id in j.tags for j in snapshot.journeys
        )
    return snapshot.has_journey(ref.id)


def relationship_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """Relationships with an end that does not exist, and non-observations that disambiguate."""
    for r in snapshot.relationships:
        owner = f"{r.kind.value} relationship {r.source} → {r.target}"
        for ref in (r.source, r.target):
            if not _exists(ref, snapshot):
                if ref.kind is EntityKind.TAG:
                    yield (
                        f"{owner}: no guideline or journey carries the tag '{ref.id}'; tag one "
                        "or fix the name"
                    )
                else:
                    yield f"{owner}: {_entity(ref)} does not exist"
        if r.kind is RelationshipKind.DISAMBIGUATION and r.source.kind is not EntityKind.GUIDELINE:
            yield f"{owner}: only an observation (a guideline) can disambiguate"


def find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Cycles of a directed graph as closed paths (`[a, b, a]`), each reported once."""
    cycles: dict[tuple[str, ...], list[str]] = {}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :]
                start = cycle.index(min(cycle))  # one rotation per cycle, to report it once
                canonical = tuple(cycle[start:] + cycle[:start])
                cycles.setdefault(canonical, [*canonical, canonical[0]])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in list(graph):
        if node not in state:
            visit(node)
    return list(cycles.values())


def priority_cycles(snapshot: AgentSnapshot) -> Iterator[str]:
    """Priority relationships that form a cycle, each cycle once."""
    graph: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    for r in snapshot.relationships:
        if r.kind is RelationshipKind.PRIORITY:
            graph.setdefault(str(r.source), []).append(str(r.target))
            labels[str(r.source)], labels[str(r.target)] = _entity(r.source), _entity(r.target)
    for cycle in find_cycles(graph):
        route = " → ".join(labels[node] for node in cycle)
        yield f"priority cycle: {route}; remove one of these priorities"


def journey_guideline_priorities(snapshot: AgentSnapshot) -> Iterator[str]:
    """Guidelines of a journey (scoped to it, or its conditions) with a priority of their own."""
    for g in snapshot.guidelines:
        owner = g.scoped_journey_id or g.condition_of_journey
        if owner is not None and g.priority != 0:
            yield (
                f"guideline '{g.id}' belongs to journey '{owner}' and takes its priority: set "
                f"priority on the journey, not on the guideline (got priority {g.priority})"
            )


def prerequisite_cycles(snapshot: AgentSnapshot) -> Iterator[str]:
    """Journeys that require each other in a cycle, each cycle once."""
    graph = {j.id: list(j.requires) for j in snapshot.journeys}
    for cycle in find_cycles(graph):
        route = " → ".join(f"'{j}'" for j in cycle)
        yield f"journey prerequisites form a cycle: {route}; no journey in it could ever start"


def _entity(ref: EntityRef) -> str:
    return f"{ref.kind.value} '{ref.id}'"
