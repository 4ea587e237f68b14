"""Management API routes for human handoff, for teams with their own inbox tool.

    GET  /handoffs[?agent_id=&status=]      sessions with a person (or waiting for one), oldest
                                            first: from an index item per session, never a scan
    POST /sessions/{id}/handoff             hand the session to a person (body: reason, by);
                                            a person's messages go where the customer was last
                                            answered
    POST /sessions/{id}/handoff/take        a person takes it (body: person, take_over)
    POST /sessions/{id}/handoff/messages    a person writes to the customer (body: person, text,
                                            event_id = idempotency key, take_over): recorded,
                                            then queued for the turn worker, which delivers it on
                                            the customer's channel through the outbox; never a
                                            turn. Writing to a waiting handoff takes it.
    POST /sessions/{id}/handoff/release     hand it back to the agent (body: person, note,
                                            take_over)

A mode that does not fit (writing while the agent has the session) is 409 with what to do
instead; so is taking, writing to or handing back a session someone else has, naming who, unless
the body says `"take_over": true` (reassigned to the caller, recorded). A retry with the same
`event_id` is the same change: answered with what it recorded, never refused, never sent twice.
Added to `functions.management` as its own routes (same key, same errors).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictBool
from starlette.exceptions import HTTPException

from engine.sessions.session import Event, Handoff, SessionMode, SessionState
from functions.management_errors import error_responses
from functions.management_params import AgentIdQuery, SessionIdPath
from functions.route_table import RouteTable
from infra.channels.text import MAX_INBOUND_CHARS
from infra.handoff_changes import (
    AppliedChange,
    SessionMissing,
    apply_change,
    change_id_for,
    person_message_job,
)
from infra.runtime import current_runtime

routes = RouteTable(tags=["handoff"])
# A change to a session: it may not exist, or not be in the mode the change needs.
_CHANGE_ERRORS = error_responses(
    400, 404, 409, described={409: "the session's mode does not allow it, or someone else has it"}
)

Person = Field(min_length=1, max_length=200, description="who acts: a name or an inbox user id")
TakeOver = Field(
    default=False,
    description="someone else has the session: take it over (recorded as a `handoff_taken` "
    "event naming whom it was taken from) instead of being refused with 409",
)


class HandoffView(BaseModel):
    """A session's handoff as the API shows it (where the channel answers stays inside)."""

    reason: str
    trigger: str
    source_id: str | None = None
    since: str
    assignee: str | None = None
    taken_at: str | None = None
    ticket_id: str | None = None
    support_thread: dict[str, str] | None = None

    @classmethod
    def of(cls, handoff: Handoff | None) -> HandoffView | None:
        if handoff is None:
            return None
        return cls(
            reason=handoff.reason,
            trigger=handoff.trigger,
            source_id=handoff.source_id,
            since=handoff.since.isoformat(),
            assignee=handoff.assignee,
            taken_at=handoff.taken_at.isoformat() if handoff.taken_at else None,
            ticket_id=handoff.ticket_id,
            support_thread=handoff.support_thread,
        )


class WaitingView(BaseModel):
    session_id: str
    agent_id: str
    channel: str
    customer_id: str
    status: Literal["waiting", "taken", "ticket"]
    reason: str
    trigger: str
    since: str
    assignee: str | None
    ticket_id: str | None
    updated_at: str


class WaitingList(BaseModel):
    sessions: list[WaitingView]


class StartHandoff(BaseModel):
    reason: str = Field(min_length=1, max_length=500)
    by: str = Person


class TakeHandoff(BaseModel):
    person: str = Person
    take_over: StrictBool = TakeOver


class PersonMessage(BaseModel):
    person: str = Person
    text: str = Field(min_length=1, max_length=MAX_INBOUND_CHARS)
    event_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="idempotency key: the same event id again records and sends it once",
    )
    take_over: StrictBool = TakeOver


class ReleaseHandoff(BaseModel):
    person: str = Person
    note: str = Field(default="", max_length=500)
    take_over: StrictBool = TakeOver


class ChangeView(BaseModel):
    session_id: str
    mode: SessionMode
    handoff: HandoffView | None
    events: list[Event]  # what the operation added (or had added, on a retry)
    replayed: bool


class MessageView(ChangeView):
    # "queued": the turn worker delivers it on the customer's channel (through the outbox);
    # "not_delivered": nowhere to send it (API channel, or the address is not known yet)
    delivery: Literal["queued", "not_delivered"]
    delivery_error: str | None = None


def _view(session_id: str, applied: AppliedChange) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "mode": applied.state.mode,
        "handoff": HandoffView.of(applied.state.handoff),
        "events": list(applied.events),
        "replayed": applied.replayed,
    }


async def _apply(session_id: str, kind: str, key: str | None, make: Any) -> AppliedChange:
    # The handoff rules (and the agent model they read) load with the first change, not when
    # the management API starts.
    from engine.handoff import HandoffStateError

    runtime = current_runtime()
    change_id = change_id_for(kind, session_id, key)
    now = runtime.clock.now()
    try:
        return await apply_change(
            runtime.sessions, session_id, change_id, lambda s: make(s, change_id, now)
        )
    except SessionMissing as missing:
        raise HTTPException(404, str(missing)) from None
    except HandoffStateError as wrong:
        raise HTTPException(409, str(wrong)) from None


@routes.get("/handoffs", response_model=WaitingList, responses=error_responses(400))
async def list_handoffs(
    agent_id: AgentIdQuery = None,
    status: Literal["waiting", "taken", "ticket"] | None = None,
) -> WaitingList:
    """Sessions handed off to a person, oldest first; `status` narrows the list."""
    listed = await current_runtime().sessions.waiting_for_person(agent_id)
    views = [
        WaitingView(**asdict(w), status=w.status)
        for w in listed
        if status is None or w.status == status
    ]
    return WaitingList(sessions=views)


@routes.post(
    "/sessions/{session_id}/handoff",
    response_model=ChangeView,
    status_code=201,
    responses=_CHANGE_ERRORS,
)
async def start(session_id: SessionIdPath, body: StartHandoff) -> ChangeView:
    """Hand the session to a person now (the agent stops answering it)."""

    def make(s: SessionState, cid: str, now: Any) -> Any:
        from engine.handoff import start_handoff

        return start_handoff(s, cid, now, by=body.by, reason=body.reason)

    return ChangeView(**_view(session_id, await _apply(session_id, "handoff", None, make)))


@routes.post(
    "/sessions/{session_id}/handoff/take", response_model=ChangeView, responses=_CHANGE_ERRORS
)
async def take_session(session_id: SessionIdPath, body: TakeHandoff) -> ChangeView:
    """`person` takes the handed-off session; 409 naming who has it when someone else does
    (unless `take_over`)."""

    def make(s: SessionState, cid: str, now: Any) -> Any:
        from engine.handoff import take

        return take(s, cid, now, person=body.person, take_over=body.take_over)

    return ChangeView(**_view(session_id, await _apply(session_id, "take", None, make)))


@routes.post(
    "/sessions/{session_id}/handoff/messages",
    response_model=MessageView,
    responses={
        **_CHANGE_ERRORS,
        **error_responses(503, described={503: "recorded, but not queued; retry (same event_id)"}),
    },
)
async def post_person_message(session_id: SessionIdPath, body: PersonMessage) -> MessageView:
    """A person's message: recorded in the session and delivered to the customer on their
    channel (through the outbox; a retry with the same `event_id` never sends twice). A waiting
    handoff is taken by the writer; someone else's is 409 unless `take_over`."""

    def make(s: SessionState, cid: str, now: Any) -> Any:
        from engine.handoff import person_message

        return person_message(
            s, cid, now, person=body.person, text=body.text, take_over=body.take_over
        )

    applied = await _apply(session_id, "human", body.event_id, make)
    event = next((e for e in applied.events if e.text is not None), None)
    job = person_message_job(applied.state, event) if event is not None else None
    if job is None:
        why = "the customer's address is learned from their next message"
        if applied.state.channel == "api" or event is None:
            why = "clients of this session read its events"
        return MessageView(
            **_view(session_id, applied), delivery="not_delivered", delivery_error=why
        )
    try:
        current_runtime().enqueue(job)  # type: ignore[arg-type]  # same queue contract
    except Exception:
        raise HTTPException(
            503, "recorded, but not queued for delivery; retry with the same event_id"
        ) from None
    return MessageView(**_view(session_id, applied), delivery="queued")


@routes.post(
    "/sessions/{session_id}/handoff/release", response_model=ChangeView, responses=_CHANGE_ERRORS
)
async def release(session_id: SessionIdPath, body: ReleaseHandoff) -> ChangeView:
    """Hand the session back to the agent; it answers the customer's next message with the
    person's messages in its history. Someone else's session is 409 unless `take_over`."""

    def make(s: SessionState, cid: str, now: Any) -> Any:
        from engine.handoff import hand_back

        return hand_back(s, cid, now, by=body.person, why=body.note, take_over=body.take_over)

    return ChangeView(**_view(session_id, await _apply(session_id, "release", None, make)))
