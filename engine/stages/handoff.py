"""The handoff stage: when the agent steps aside for a person, and what a turn does meanwhile.

After relationships, a turn in `auto` mode hands the session to a person when
- a journey's step this turn is the built-in `hand_off_to_person` tool step,
- a guideline that applies names `hand_off_to_person` among its tools (its action is the reason),
- or the customer asked for a person in words (`HandoffConfig.customer_request`, on by default).
Handing off is deterministic (no model decides it, and none can undo it): the mode becomes
`human` (a `mode_changed` event), a pending selector or confirmation is dropped (a person now
answers, and a stale pick must never run a tool), and the customer is told what happens next —
the template tagged `handoff` when the agent has one, else its `handoff` line
(`HandoffConfig.message`); out of business hours, the `handoff_unavailable` template (or line)
and a ticket — each in the session's language.

A turn in `human` mode still recalls and matches (the trace shows what the agent would have
done), but composes nothing and runs no tool; it only records the customer's message, learns
where to answer them, and records a ticket (telling the customer) once no person has picked the
session up within `pickup_timeout_seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.agent_config import HANDOFF_TEMPLATE_TAG, HANDOFF_TOOL, HANDOFF_UNAVAILABLE_TAG
from engine.handoff import (
    approved_notice,
    asks_for_person,
    mode_event_data,
    pickup_overdue,
    ticket_data,
    within_business_hours,
)
from engine.matching.journey_forced_moves import auto_return
from engine.model import Guideline
from engine.relations import Resolution
from engine.sessions.history import fold_history
from engine.sessions.session import (
    Event,
    EventKind,
    EventSource,
    Handoff,
    SessionMode,
    SessionState,
    remember,
)
from engine.stages.journey_progress import apply_verified
from engine.stages.secret_masking import masked_kept_evidence
from engine.stages.state import TurnState


@dataclass(frozen=True)
class HandoffRequest:
    """Why this turn hands off: the trigger, the reason a person reads, and its source."""

    trigger: str  # "journey_step" | "guideline" | "customer_request"
    reason: str
    source_id: str | None = None


def handoff_request(state: TurnState, resolution: Resolution) -> HandoffRequest | None:
    """What hands this turn's session to a person, if anything (see the module docstring)."""
    agent = state.agent
    for journey_id, node_id in sorted(state.steps.items()):
        if journey_id not in resolution.journey_ids or not agent.has_journey(journey_id):
            continue
        journey = agent.journey(journey_id)
        node = journey.node(node_id)
        before = state.session.journey_paths.get(journey_id, ())
        if HANDOFF_TOOL in node.tools and before[-1:] != (node_id,):
            # (a session handed back while the journey still sits at this step moves on)
            reason = node.action or f"the '{journey.title}' journey hands off at this step"
            return HandoffRequest("journey_step", reason, f"{journey_id}/{node_id}")
    for g in _handing_off(agent.guidelines):
        if g.id in resolution.guideline_ids:
            return HandoffRequest("guideline", g.action or g.condition, g.id)
    config = agent.config.handoff
    if any(asks_for_person(m.text, config) for m in state.messages):
        return HandoffRequest("customer_request", "the customer asked for a person")
    return None


# guidelines tuple of an agent version → its guidelines naming the handoff tool, in its order
_HANDING_OFF: dict[int, tuple[tuple[Guideline, ...], tuple[Guideline, ...]]] = {}
_HANDING_OFF_LIMIT = 64


def _handing_off(guidelines: tuple[Guideline, ...]) -> tuple[Guideline, ...]:
    """The guidelines that name `hand_off_to_person`, once per agent version: few agents have
    any, and a turn should not walk thousands of guidelines to find none (cached while the
    version's tuple lives; the identity check guards against a reused id)."""
    cached = _HANDING_OFF.get(id(guidelines))
    if cached is not None and cached[0] is guidelines:
        return cached[1]
    if len(_HANDING_OFF) >= _HANDING_OFF_LIMIT:
        _HANDING_OFF.pop(next(iter(_HANDING_OFF)))
    found = tuple(g for g in guidelines if HANDOFF_TOOL in g.tools)
    _HANDING_OFF[id(guidelines)] = (guidelines, found)
    return found


def begin_handoff(state: TurnState, request: HandoffRequest) -> Event:
    """Hand the session to a person; returns the reply that tells the customer."""
    now = state.deps.clock.now()
    config = state.agent.config.handoff
    dropped: dict[str, Any] = {}
    if state.interrupt is not None:
        dropped["dropped_interrupt"] = state.interrupt.tool
        state.interrupt = None
    if state.pending_confirmation is not None or state.confirmed is not None:
        pending = state.pending_confirmation or state.confirmed
        dropped["dropped_confirmation"] = pending.tool if pending else None
        state.pending_confirmation = state.confirmed = None
    state.mode = SessionMode.HUMAN
    handoff = Handoff(
        reason=request.reason,
        trigger=request.trigger,
        source_id=request.source_id,
        since=now,
        reply_to=state.reply_address,
    )
    by = "customer" if request.trigger == "customer_request" else "agent"
    state.add_event(
        EventKind.STATUS,
        EventSource.SYSTEM,
        None,
        **mode_event_data(
            SessionMode.HUMAN,
            by=by,
            why=request.reason,
            trigger=request.trigger,
            **({"source_id": request.source_id} if request.source_id else {}),
            **dropped,
        ),
    )
    if request.trigger == "journey_step" and request.source_id:
        _move_past_step(state, request.source_id)
    available = within_business_hours(config.business_hours, now)
    if not available:
        ticket_id = f"{state.turn_id}.ticket"
        handoff = handoff.model_copy(update={"ticket_id": ticket_id})
        state.add_event(
            EventKind.STATUS,
            EventSource.SYSTEM,
            None,
            **ticket_data(ticket_id, handoff, "outside business hours"),
        )
    state.handoff = handoff
    state.trace.handoff = {
        "trigger": request.trigger,
        "reason": request.reason,
        "source_id": request.source_id,
        "available": available,
        **dropped,
    }
    state.trace.notes.append(
        f"handed off to a person ({request.trigger}): {request.reason}; no reply composed, no tool run"
    )
    tag = HANDOFF_TEMPLATE_TAG if available else HANDOFF_UNAVAILABLE_TAG
    text = approved_notice(state.agent, tag, state.language)
    return state.add_event(
        EventKind.MESSAGE, EventSource.AGENT, text, handoff_notice=True, language=state.language
    )


def record_for_person(state: TurnState, resolution: Resolution) -> Event | None:
    """A turn while a person has the session: record, trace what the agent would have done, and
    record a ticket once the pickup is overdue (the one reply such a turn may send)."""
    state.trace.mode = SessionMode.HUMAN.value
    state.trace.matched_guideline_ids = sorted(resolution.guideline_ids)
    would = ", ".join(sorted(resolution.guideline_ids)) or "no guideline"
    state.trace.notes.append(
        f"human mode: a person has the session; the agent stayed silent and ran no tool "
        f"(it would have applied: {would})"
    )
    handoff = state.handoff
    if handoff is None:  # a human session always has one; stay silent all the same
        return None
    address = state.reply_address
    if address:
        handoff = handoff.model_copy(update={"reply_to": address})
    state.handoff = handoff
    config = state.agent.config.handoff
    now = state.deps.clock.now()
    if not pickup_overdue(state.session, config, now):
        return None
    ticket_id = f"{state.turn_id}.ticket"
    state.handoff = handoff.model_copy(update={"ticket_id": ticket_id})
    why = f"no one picked it up within {config.pickup_timeout_seconds} s"
    state.add_event(
        EventKind.STATUS, EventSource.SYSTEM, None, **ticket_data(ticket_id, handoff, why)
    )
    state.trace.notes.append(f"handoff ticket {ticket_id}: {why}")
    text = approved_notice(state.agent, HANDOFF_UNAVAILABLE_TAG, state.language)
    return state.add_event(
        EventKind.MESSAGE, EventSource.AGENT, text, handoff_notice=True, language=state.language
    )


def silent_session_state(state: TurnState) -> SessionState:
    """The session after a `human`-mode turn: its events recorded, nothing of the agent's state
    moved (journeys, collected values, applied guidelines stay as the person found them)."""
    session = state.session
    window, kept = fold_history(
        session.kept_evidence,
        session.events,
        state.events,
        session.collected,
        requests=session.request_offsets(),
    )
    return session.model_copy(
        update={
            "version": session.version + 1,
            "events": window,
            "kept_evidence": tuple(masked_kept_evidence(state, e) for e in kept),
            "handoff": state.handoff,
            "last_reply_to": state.reply_address,
            "processed_event_ids": remember(
                session.processed_event_ids, *(m.event_id for m in state.messages)
            ),
            "committed_turn_ids": remember(session.committed_turn_ids, state.turn_id),
        }
    )


def _move_past_step(state: TurnState, source_id: str) -> None:
    """The handoff step is done by handing off: a journey with one way out of it moves on now,
    so that once the session is handed back the agent continues from there."""
    journey_id, _, _node_id = source_id.partition("/")
    journey = state.agent.journey(journey_id)
    step = auto_return(journey, state.views[journey_id], state.paths[journey_id], {HANDOFF_TOOL})
    if step is not None:
        apply_verified(state, journey_id, step, "auto_return", "handed off to a person")
