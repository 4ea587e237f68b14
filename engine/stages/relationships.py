"""The relationships stage: priority, dependency and entailment over what matched this turn.

Journey-scoped guidelines count only while their journey is in scope; journeys a priority
suppresses keep their previous position, so their suppressed step is not taken as performed.
Reads matches and journey progress; writes the trace's relation records (and, through
`suppress_journeys`, journey progress).
"""

from __future__ import annotations

from engine.model import EntityKind
from engine.relations import Key, Resolution, resolve
from engine.stages.state import TurnState, tag_members_of


def resolve_relationships(state: TurnState) -> Resolution:
    """What applies now: the guidelines and journeys that survive the agent's relationships."""
    active_journeys = [j for j in state.steps if j in state.active()]
    matched = set(state.matches)
    # Journey-scoped guidelines depend on their journey being active — or having been active
    # when the turn began, so "confirm nothing was transferred" still applies in the turn the
    # customer cancels.
    in_scope = set(active_journeys) | set(state.session.active_journey_ids)
    for gid in list(matched):
        scoped = state.matches[gid].guideline.scoped_journey_id
        if scoped is not None and scoped not in in_scope:
            matched.discard(gid)
    # Journeys in scope satisfy dependencies; only those with a step this turn are shown
    # (consumers read steps from `state.steps`).
    # Entailment adds only guidelines this turn may use: enabled, allowed by their tags, and
    # (when journey-scoped) with their journey in scope. A journey the customer just left still
    # satisfies dependencies, but only journeys still active rank by priority.
    usable = state.usable.ids_in_scope(in_scope)
    resolution = resolve(
        state.agent.relationships,
        matched,
        in_scope,
        known_guidelines=usable,
        priority_journeys=active_journeys,
        members=tag_members_of(state.agent),
        numeric_priority=numeric_priorities(state, matched, active_journeys),
    )
    for record in resolution.records:
        if record not in state.trace.relations:
            state.trace.relations.append(record)
    return resolution


def numeric_priorities(
    state: TurnState, matched: set[str], ranking_journeys: list[str]
) -> dict[Key, int]:
    """The numeric priority of each matched entity that ranks by number. A journey's steps, its
    scoped guidelines and its conditions take the journey's priority — and rank only while the
    journey does (still active); a journey the customer just left, and its guidelines, are
    exempt, as they are from relational priority."""
    ranking = set(ranking_journeys)
    ranks: dict[Key, int] = {
        (EntityKind.JOURNEY, jid): state.agent.journey(jid).priority for jid in ranking
    }
    for gid in matched:
        guideline = state.agent.guideline(gid)
        owner = guideline.scoped_journey_id or guideline.condition_of_journey
        if owner is None:
            ranks[(EntityKind.GUIDELINE, gid)] = guideline.priority
        elif owner in ranking:
            ranks[(EntityKind.GUIDELINE, gid)] = state.agent.journey(owner).priority
    return ranks


def suppress_journeys(state: TurnState, resolution: Resolution) -> None:
    """A journey whose step is suppressed by priority, or dropped by an unmet dependency, keeps
    its previous position: the step it did not show is not taken as asked."""
    for jid in resolution.suppressed_journeys | resolution.dropped_journeys:
        state.paths[jid] = state.session.journey_paths.get(jid, ())
        state.steps.pop(jid, None)
