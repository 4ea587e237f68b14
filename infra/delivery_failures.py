"""A reply the worker gave up on, recorded where operators and clients look: a `delivery_failed`
status event in the session, read through the management API (`GET /sessions/{id}/events`).

The event is committed like a turn — its own turn id, conditional on the session's version — so
recording it twice (a redelivered record, a retry after a conflict) writes it once. Status events
are not part of the conversation the model sees (`engine.context.render_history` shows messages
and tool results only)."""

from __future__ import annotations

from typing import Any

from engine.errors import SessionConflict
from engine.ports import Clock, SessionStore, TurnCommit
from engine.sessions.history import fold_history
from engine.sessions.session import Event, EventKind, EventSource, remember, window_turn_ids

DELIVERY_FAILED = "delivery_failed"
_CONFLICT_RETRIES = 3


def delivery_failed_id(turn_id: str) -> str:
    """The status event's id, which is also the id of the commit that writes it."""
    return f"{turn_id}.delivery-failed"


async def record_delivery_failure(
    sessions: SessionStore,
    clock: Clock,
    session_id: str,
    turn_id: str,
    *,
    channel: str,
    error: str,
    attempts: int,
) -> Event | None:
    """Append a `delivery_failed` status event for `turn_id`'s reply; the stored event, or None
    when the session does not exist. Raises `SessionConflict` if the session kept changing."""
    marker = delivery_failed_id(turn_id)
    for attempt in range(_CONFLICT_RETRIES):
        state = await sessions.load(session_id)
        if state is None:
            return None
        recorded = next((e for e in state.events if e.id == marker), None)
        if recorded is not None:
            return recorded
        data: dict[str, Any] = {
            "status": DELIVERY_FAILED,
            "turn_id": turn_id,
            "channel": channel,
            "error": error,
            "attempts": attempts,
        }
        event = Event(
            id=marker,
            offset=state.next_offset(),
            kind=EventKind.STATUS,
            source=EventSource.SYSTEM,
            created_at=clock.now(),
            turn_id=marker,
            data=data,
        )
        window, kept = fold_history(
            state.kept_evidence,
            state.events,
            [event],
            state.collected,
            requests=state.request_offsets(),
        )
        new_state = state.model_copy(
            update={
                "version": state.version + 1,
                "events": window,
                "kept_evidence": kept,
                "committed_turn_ids": remember(
                    state.committed_turn_ids, marker, known=window_turn_ids(window)
                ),
            }
        )
        commit = TurnCommit(
            turn_id=marker,
            expected_version=state.version,
            state=new_state,
            new_events=[event],
            trace={"turn_id": marker, "session_id": session_id, **data},
        )
        try:
            await sessions.commit(commit)
        except SessionConflict:
            if attempt == _CONFLICT_RETRIES - 1:
                raise
            continue
        return event
    return None  # unreachable: the loop returns or raises
