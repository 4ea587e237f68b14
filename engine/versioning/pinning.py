"""Agent versions and the sessions that run on them: pinning, migrations and clean ends.

A session remembers the agent version its last turn ran on (`SessionState.agent_version`). While
a journey is in flight (active, suspended for a prerequisite, or waiting on an interrupt or a
confirmation) the next turn runs on that same version — the session is *pinned* — so publishing
mid-conversation never renames the step it is at or removes the journey it is in. It moves to
the published version at a safe point (nothing in flight), or earlier when the published version
declares a migration (`JourneyMigration`) for every journey it has in flight.

Whatever version a turn runs on, a reference it cannot resolve (a journey or step that version
does not have: the pinned version was lost, or the session predates pinning) ends that journey
cleanly, and the reply tells the customer in plain words, in their language (`ended_notice`).
Nothing here calls a model: the choice is deterministic and made before the turn's first stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from engine.language.lines import Say
from engine.sessions.session import SessionState

if TYPE_CHECKING:  # (annotations only: the management API imports this module at start)
    from engine.model import AgentSnapshot, Journey

VersionHow = Literal["published", "pinned", "migrated"]


@dataclass(frozen=True)
class VersionChoice:
    """The agent version a turn runs on and the session as that version can read it."""

    agent: AgentSnapshot
    session: SessionState  # migrated and with dangling references ended
    how: VersionHow
    published_version: str
    ended: tuple[str, ...] = ()  # titles of journeys ended because this version lacks them
    notes: tuple[str, ...] = ()  # for the trace

    def notice(self, say: Say) -> str | None:
        """What the customer is told about ended journeys (in the language of `say`), or None."""
        return ended_notice(say, self.ended)


def journeys_in_flight(session: SessionState) -> tuple[str, ...]:
    """Journeys the session is in the middle of: active, suspended, or owning a pending step."""
    ids = [*session.active_journey_ids, *session.suspended_journeys]
    for pending in (session.pending_interrupt, session.pending_confirmation):
        if pending is not None and pending.journey_id:
            ids.append(pending.journey_id)
    return tuple(dict.fromkeys(ids))


class SessionPosition(BaseModel):
    """Where one session with a journey in flight is: what a publish may strand."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    session_id: str
    agent_version: str
    # journey id → the step it is at; None for a journey suspended or waiting on a pending step
    journeys: dict[str, str | None]


def session_position(state: SessionState) -> SessionPosition | None:
    """The session's position, or None when no journey is in flight (nothing to strand)."""
    in_flight = journeys_in_flight(state)
    if not in_flight:
        return None
    journeys: dict[str, str | None] = {}
    for jid in in_flight:
        path = state.journey_paths.get(jid, ())
        journeys[jid] = path[-1] if path and jid in state.active_journey_ids else None
    return SessionPosition(
        session_id=state.id, agent_version=state.agent_version or "", journeys=journeys
    )


def choose_version(
    session: SessionState, published: AgentSnapshot, pinned: AgentSnapshot | None
) -> VersionChoice:
    """Which version this turn runs on: the published one, the session's pinned one (`pinned`,
    loaded from `session.agent_version`; None when it was not found), or the published one
    after applying its migrations."""
    in_flight = journeys_in_flight(session)
    notes: list[str] = []
    agent = published
    how: VersionHow = "published"
    stale = session.agent_version not in (None, "", published.version)
    if in_flight and stale:
        if pinned is None:
            notes.append(
                f"pinned version {session.agent_version} is not stored; continuing on the "
                f"published version {published.version}"
            )
        else:
            migrated = migrate_session(session, pinned.version, published)
            if migrated is not None:
                session, how = migrated, "migrated"
                notes.append(
                    f"migrated from {pinned.version} to {published.version}: "
                    + ", ".join(in_flight)
                )
            else:
                agent, how = pinned, "pinned"
                notes.append(
                    f"pinned to {pinned.version} (published: {published.version}) while "
                    + ", ".join(in_flight)
                    + " in flight"
                )
    session, ended = end_dangling(session, agent, previous=pinned)
    if ended:
        notes.append("ended, no longer in this version: " + ", ".join(ended))
    return VersionChoice(
        agent=agent,
        session=session,
        how=how,
        published_version=published.version,
        ended=ended,
        notes=tuple(notes),
    )


def _has_node(journey: Journey, node_id: str) -> bool:
    return any(n.id == node_id for n in journey.nodes)


def _without_lost_steps(journey: Journey, path: Sequence[str | None]) -> tuple[str | None, ...]:
    """`path` without the steps `journey` no longer has — they are history only — except the
    last entry of its last run, kept even when lost: it says where that run stood, and a run
    that stood at a lost step must not look left at an earlier one, to be offered for
    resumption there (`engine.matching.journey_graph.exited_run`)."""
    last = len(path) - (2 if path and path[-1] is None else 1)
    return tuple(n for i, n in enumerate(path) if n is None or i == last or _has_node(journey, n))


def migrate_session(
    session: SessionState, from_version: str, target: AgentSnapshot
) -> SessionState | None:
    """The session moved onto `target` by the migrations `target` declares, or None when some
    journey in flight has no migration from `from_version` (or its current step cannot be
    placed in `target`): the session then stays pinned."""
    renames: dict[str, dict[str, str]] = {}
    for jid in journeys_in_flight(session):
        migration = target.migration_for(jid, from_version)
        if migration is None or not target.has_journey(jid):
            return None
        path = session.journey_paths.get(jid, ())
        if path and path[-1] is not None:
            current = migration.steps.get(path[-1], path[-1])
            if not _has_node(target.journey(jid), current):
                return None
        renames[jid] = dict(migration.steps)
    return _renamed(session, target, renames)


def _renamed(
    session: SessionState, target: AgentSnapshot, renames: dict[str, dict[str, str]]
) -> SessionState:
    def step(jid: str, node_id: str) -> str:
        return renames.get(jid, {}).get(node_id, node_id)

    paths: dict[str, tuple[str | None, ...]] = {}
    for jid, path in session.journey_paths.items():
        if jid not in renames:
            paths[jid] = path
            continue
        journey = target.journey(jid)
        moved = [None if n is None else step(jid, n) for n in path]
        paths[jid] = _without_lost_steps(journey, moved)
    collected = tuple(
        c.model_copy(update={"node_id": step(c.journey_id, c.node_id)}) for c in session.collected
    )
    failed = {jid: step(jid, node) for jid, node in session.failed_steps.items()}
    interrupt = session.pending_interrupt
    if interrupt is not None and interrupt.journey_id and interrupt.node_id:
        interrupt = interrupt.model_copy(
            update={"node_id": step(interrupt.journey_id, interrupt.node_id)}
        )
    confirmation = session.pending_confirmation
    if confirmation is not None and confirmation.journey_id and confirmation.node_id:
        confirmation = confirmation.model_copy(
            update={"node_id": step(confirmation.journey_id, confirmation.node_id)}
        )
    return session.model_copy(
        update={
            "journey_paths": paths,
            "collected": collected,
            "failed_steps": failed,
            "pending_interrupt": interrupt,
            "pending_confirmation": confirmation,
        }
    )


def end_dangling(
    session: SessionState, agent: AgentSnapshot, *, previous: AgentSnapshot | None = None
) -> tuple[SessionState, tuple[str, ...]]:
    """End every journey in flight that `agent` cannot continue (the journey, or the step the
    session is at, does not exist in it); returns the session and the ended journeys' titles
    (from `previous`, the version the session was on, when known)."""
    ended: list[str] = []
    paths: dict[str, tuple[str | None, ...]] = {}
    for jid, path in session.journey_paths.items():
        live = bool(path) and path[-1] is not None
        if not agent.has_journey(jid):
            paths[jid] = (*path, None) if live else path
            if live:
                ended.append(jid)
            continue
        journey = agent.journey(jid)
        known = _without_lost_steps(journey, path)
        at = path[-1] if path else None
        if at is not None and not _has_node(journey, at):
            ended.append(jid)  # the step it was at is gone: the journey cannot go on from there
            known = (*known, None)
        paths[jid] = known
    suspended = []
    for jid in session.suspended_journeys:
        if agent.has_journey(jid):
            suspended.append(jid)
        elif jid not in ended:
            ended.append(jid)
    gone = set(ended)

    def resolves(journey_id: str | None, node_id: str | None) -> bool:
        if not journey_id:
            return True
        if journey_id in gone or not agent.has_journey(journey_id):
            return False
        return node_id is None or _has_node(agent.journey(journey_id), node_id)

    interrupt = session.pending_interrupt
    if interrupt is not None and not resolves(interrupt.journey_id, interrupt.node_id):
        if interrupt.journey_id and interrupt.journey_id not in gone:
            ended.append(interrupt.journey_id)
        interrupt = None
    confirmation = session.pending_confirmation
    if confirmation is not None and not resolves(confirmation.journey_id, confirmation.node_id):
        if confirmation.journey_id and confirmation.journey_id not in ended:
            ended.append(confirmation.journey_id)
        confirmation = None
    if not ended:
        return session, ()
    failed = {j: n for j, n in session.failed_steps.items() if j not in set(ended)}
    cleaned = session.model_copy(
        update={
            "journey_paths": paths,
            "suspended_journeys": tuple(suspended),
            "pending_interrupt": interrupt,
            "pending_confirmation": confirmation,
            "failed_steps": failed,
            "retries_not_taken": tuple(j for j in session.retries_not_taken if j in failed),
        }
    )
    return cleaned, tuple(_title(jid, previous) for jid in ended)


def _title(journey_id: str, previous: AgentSnapshot | None) -> str:
    if previous is not None and previous.has_journey(journey_id):
        return previous.journey(journey_id).title
    return journey_id.replace("_", " ")


def ended_notice(say: Say, titles: tuple[str, ...]) -> str | None:
    """Plain words for the customer about journeys that had to end, or None."""
    if not titles:
        return None
    if len(titles) == 1:
        return say("journey_ended", journey=titles[0])
    return say("journeys_ended", journeys=list(titles))


def migration_problems(snapshot: AgentSnapshot) -> list[str]:
    """What is wrong with the migrations `snapshot` declares, each naming the element to fix.
    (Old step ids are checked against the published version at publish time, where it is
    known: `compare_versions`.)"""
    found: list[str] = []
    seen: set[tuple[str, str | None]] = set()
    journeys = sorted(j.id for j in snapshot.journeys)
    for index, migration in enumerate(snapshot.migrations):
        where = f"migrations[{index}] (journey '{migration.journey}')"
        key = (migration.journey, migration.from_version)
        if key in seen:
            found.append(f"{where}: declared twice; keep one migration per journey and version")
        seen.add(key)
        if not snapshot.has_journey(migration.journey):
            found.append(
                f"{where}: this version has no journey '{migration.journey}' (known journeys: "
                f"{', '.join(journeys) or 'none'}); a migration moves sessions into a journey "
                "that still exists"
            )
            continue
        journey = snapshot.journey(migration.journey)
        for old, new in migration.steps.items():
            if new == journey.root_id or not _has_node(journey, new):
                states = ", ".join(sorted(n.id for n in journey.nodes if n.id != journey.root_id))
                found.append(
                    f"{where}: step '{old}' moves to '{new}', which journey "
                    f"'{journey.id}' does not have (its steps: {states})"
                )
    return found
