"""Management API routes the studio page reads (waypoint/studio/), included by
`functions.management` (so they sit behind its `X-Api-Key` check like every other route):

    GET /sessions?agent=&limit=&cursor=   the agent's sessions, one index Query a page
                                          (`engine.sessions.index`): channel, last activity,
                                          mode, journeys in flight
    GET /sessions/{session_id}/turns?after=&limit=
                                          the session's turns (id, time, what the customer said
                                          first) so any turn's trace can be opened
"""

from __future__ import annotations

from datetime import datetime

from fastapi import Query
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from engine.agent_id import check_agent_id
from engine.sessions.history import EVENT_PAGE
from engine.sessions.index import (
    MAX_SESSION_LIST_PAGE,
    SESSION_LIST_PAGE,
    SessionIndex,
    SessionPage,
)
from engine.sessions.session import EventSource
from functions.management_errors import error_responses
from functions.management_params import AgentIdQuery, SessionIdPath
from functions.route_table import RouteTable
from infra.runtime import current_runtime
from infra.turn_queue import check_session_id

routes = RouteTable()

MAX_TURN_PAGE = 100
# A turn list page reads at most this many event pages: a session with thousands of events
# answers in bounded time, and `next_after` says where to continue.
_EVENT_PAGES_PER_TURN_PAGE = 5
_PREVIEW_CHARS = 80


class TurnSummary(BaseModel):
    turn_id: str
    at: datetime  # its first event's time
    first_offset: int
    customer_text: str = ""  # the start of what the customer said, if this turn answered them


class TurnPage(BaseModel):
    session_id: str
    turns: list[TurnSummary]
    next_after: int | None = None  # pass as `after` for the next page; None: no more events


@routes.get("/sessions", response_model=SessionPage, responses=error_responses(400, 501))
async def list_sessions(
    agent: AgentIdQuery = None,
    limit: int = Query(default=SESSION_LIST_PAGE, ge=1, le=MAX_SESSION_LIST_PAGE),
    cursor: str | None = Query(default=None, max_length=100),
) -> SessionPage:
    """A page of an agent's sessions (the configured agent by default), newest activity first
    within the page; pass the returned `cursor` for the next page."""
    runtime = current_runtime()
    agent_id = agent or runtime.settings.agent_id
    if agent_id is None:
        raise HTTPException(422, "agent is required (no default agent is configured)")
    check_agent_id(agent_id)
    if cursor is not None:
        try:
            check_session_id(cursor)
        except ValueError:
            raise HTTPException(
                400, "cursor: not one this API returned; list again without it"
            ) from None
    store = runtime.sessions
    if not isinstance(store, SessionIndex):
        raise HTTPException(501, "this deployment's session store keeps no session index")
    return await store.list_sessions(agent_id, limit=limit, cursor=cursor)


@routes.get("/sessions/{session_id}/turns", response_model=TurnPage, responses=error_responses(404))
async def list_turns(
    session_id: SessionIdPath,
    after: int = Query(default=-1, ge=-1),
    limit: int = Query(default=MAX_TURN_PAGE, ge=1, le=MAX_TURN_PAGE),
) -> TurnPage:
    """The session's turns in order, read from its events (a page of events at a time)."""
    sessions = current_runtime().sessions
    turns: dict[str, TurnSummary] = {}
    cursor = after
    for _ in range(_EVENT_PAGES_PER_TURN_PAGE):
        events = await sessions.events(session_id, after=cursor, limit=EVENT_PAGE)
        if events is None:
            raise HTTPException(404, f"no session {session_id[:100]!r}")
        for event in events:
            if event.turn_id is None:
                continue
            if event.turn_id not in turns:
                if len(turns) == limit:  # the page is full: continue from before this turn
                    return TurnPage(
                        session_id=session_id, turns=list(turns.values()), next_after=cursor
                    )
                turns[event.turn_id] = TurnSummary(
                    turn_id=event.turn_id, at=event.created_at, first_offset=event.offset
                )
            summary = turns[event.turn_id]
            if event.source is EventSource.CUSTOMER and event.text and not summary.customer_text:
                summary.customer_text = event.text[:_PREVIEW_CHARS]
            cursor = event.offset
        if len(events) < EVENT_PAGE:
            return TurnPage(session_id=session_id, turns=list(turns.values()), next_after=None)
    return TurnPage(session_id=session_id, turns=list(turns.values()), next_after=cursor)
