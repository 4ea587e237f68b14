"""The index of an agent's sessions: one small summary per session, rewritten at every commit.

It lets a person list an agent's conversations (the studio's Sessions view, `GET /sessions`)
without reading every session: the summary says what a list shows — channel, last activity,
who answers (its mode: the agent or a person), what it waits for (its status) and its journeys in
flight. Both stores keep it in the same
write as the session itself (`engine.memory.stores`, `infra.aws.session_index`), so a listed session is
never behind its state.

It holds no customer words and no customer id: erasing a customer deletes the summary with the
session, and a listing shows nothing an operator could not read by opening the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from engine.sessions.session import Event, SessionState

# What a session waits for between turns, in the order a person would check it.
SessionStatus = Literal[
    "awaiting form", "awaiting choice", "awaiting confirmation", "in journey", "open"
]
SESSION_LIST_PAGE = 50  # default and maximum page of `list_sessions`
MAX_SESSION_LIST_PAGE = 200


class SessionSummary(BaseModel):
    """One line of an agent's session list."""

    session_id: str
    agent_id: str
    channel: str
    last_activity: datetime | None = None  # the newest event's time (None: nothing happened yet)
    mode: str = "auto"  # who answers: the agent (`auto`) or a person (`human`, engine.handoff)
    status: SessionStatus = "open"
    active_journeys: list[str] = Field(default_factory=list)
    events: int = 0
    agent_version: str | None = None


class SessionPage(BaseModel):
    """A page of summaries, newest activity first within the page; `cursor` continues the
    listing (None: this was the last page)."""

    sessions: list[SessionSummary]
    cursor: str | None = None


def session_status(state: SessionState) -> SessionStatus:
    """What the session waits for: a form (an interrupter step), a choice among a selector's
    options, the customer's confirmation of
    a consequential tool call, the next step of a journey — or nothing in particular."""
    if state.pending_interrupt is not None:
        # an interrupter waits for a form's result; a selector for one of its options
        return (
            "awaiting form" if state.pending_interrupt.kind == "interrupter" else "awaiting choice"
        )
    if state.pending_confirmation is not None:
        return "awaiting confirmation"
    if state.active_journey_ids:
        return "in journey"
    return "open"


def summarize_session(state: SessionState, new_events: Sequence[Event] = ()) -> SessionSummary:
    """The summary a store writes with `state` and the events committed with it (a commit's
    state need not carry its new events: the events written are what counts)."""
    events = [*state.events, *new_events]
    newest = max(events, key=lambda e: e.offset) if events else None
    return SessionSummary(
        session_id=state.id,
        agent_id=state.agent_id,
        channel=state.channel,
        last_activity=newest.created_at if newest else None,
        mode=state.mode.value,
        status=session_status(state),
        active_journeys=state.active_journey_ids,
        events=newest.offset + 1 if newest else 0,
        agent_version=state.agent_version,
    )


def newest_first(summaries: list[SessionSummary]) -> list[SessionSummary]:
    """Most recent activity first; sessions with no activity yet last, then by id (stable)."""
    dated = sorted(
        (s for s in summaries if s.last_activity is not None),
        key=lambda s: (s.last_activity.timestamp() if s.last_activity else 0.0, s.session_id),
        reverse=True,
    )
    return dated + sorted(
        (s for s in summaries if s.last_activity is None), key=lambda s: s.session_id
    )


@runtime_checkable
class SessionIndex(Protocol):
    """A session store that keeps the index (both of ours do)."""

    async def list_sessions(
        self, agent_id: str, *, limit: int = SESSION_LIST_PAGE, cursor: str | None = None
    ) -> SessionPage:
        """Up to `limit` summaries of `agent_id`'s sessions after `cursor` (a session id: pages
        follow session ids, so a listing is complete however activity moves meanwhile)."""
        ...


def page_after(
    summaries: dict[str, SessionSummary], agent_id: str, limit: int, cursor: str | None
) -> SessionPage:
    """A page of an in-memory index in the order the DynamoDB one is read (by session id)."""
    ids = sorted(
        i for i, s in summaries.items() if s.agent_id == agent_id and (cursor is None or i > cursor)
    )
    chosen = ids[:limit]
    more = len(ids) > limit
    return SessionPage(
        sessions=newest_first([summaries[i] for i in chosen]),
        cursor=chosen[-1] if more and chosen else None,
    )
