"""The management API's session routes: create and read a session, its history and a turn's
trace, post a customer message (the turn runs now, or is queued), deliver the result of a
pending form, and erase one customer. The studio's session list and the handoff routes are
`functions.studio_api`'s and `functions.handoff_api`'s. Added to the app by `install`
(`functions.management`)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Query, Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from engine.agent_id import AGENT_ID_PATTERN, check_agent_id
from engine.sessions.history import EVENT_PAGE
from engine.sessions.session import Event, PendingInterrupt, SessionState
from engine.trace import TurnTrace
from engine.versioning.pinning import journeys_in_flight
from functions.handoff_api import HandoffView
from functions.management_errors import documented_response, error_responses, logger
from functions.management_params import (
    CallIdPath,
    ChannelPath,
    CustomerIdPath,
    SessionIdPath,
    TurnIdPath,
)
from infra.channels.base import InterruptResult, NormalizedMessage, ReplyOption
from infra.channels.text import MAX_INBOUND_CHARS, clean_text
from infra.runtime import current_runtime
from infra.turn_queue import SESSION_ID_PATTERN, QueuedMessage, check_session_id

if TYPE_CHECKING:
    from engine.turn import TurnOutput  # the engine loads on the first turn, not at import

API_CHANNEL = "api"  # messages posted here; the worker does not deliver them anywhere


class SessionView(BaseModel):
    id: str
    agent_id: str
    customer_id: str
    channel: str
    version: int
    events: int
    active_journeys: list[str]
    journey_paths: dict[str, list[str | None]]
    completed_journeys: list[str]
    pending_interrupt: PendingInterrupt | None
    metadata: dict[str, Any]
    # The agent version the session's last turn ran on; `pinned`: the next turn runs on it too
    # (a journey is in flight), whatever is published meanwhile (engine.versioning.pinning).
    agent_version: str | None = None
    pinned: bool = False
    # `human` while a person has the session (engine.handoff); `handoff` says why and who
    mode: str = "auto"
    handoff: HandoffView | None = None

    @classmethod
    def of(cls, state: SessionState) -> SessionView:
        return cls(
            id=state.id,
            agent_id=state.agent_id,
            customer_id=state.customer_id,
            channel=state.channel,
            version=state.version,
            events=state.next_offset(),  # every stored event; a turn loads the recent ones
            active_journeys=state.active_journey_ids,
            journey_paths={j: list(path) for j, path in state.journey_paths.items()},
            completed_journeys=list(state.completed_journeys),
            # where the channel answers (a chat id, a phone number) stays inside the service
            pending_interrupt=(
                state.pending_interrupt.model_copy(update={"reply_to": None})
                if state.pending_interrupt
                else None
            ),
            metadata=state.metadata,
            agent_version=state.agent_version,
            pinned=bool(journeys_in_flight(state)),
            mode=state.mode.value,
            handoff=HandoffView.of(state.handoff),
        )


class EventPage(BaseModel):
    session_id: str
    events: list[Event]


class NewSession(BaseModel):
    customer_id: str = Field(min_length=1, max_length=200)
    agent_id: str | None = Field(
        default=None, pattern=AGENT_ID_PATTERN, description="default: the configured agent"
    )
    session_id: str | None = Field(
        default=None, pattern=SESSION_ID_PATTERN, description="default: a new `api-…` id"
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


class NewMessage(BaseModel):
    text: str = Field(default="", max_length=MAX_INBOUND_CHARS)
    choice: str | None = Field(default=None, min_length=1, max_length=256)
    event_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="idempotency key: posting the same event id again returns the same reply",
    )


class ReplyView(BaseModel):
    text: str
    options: list[ReplyOption]
    view: dict[str, Any] | None = None


class TurnView(BaseModel):
    session_id: str
    turn_id: str
    replayed: bool
    reply: ReplyView | None
    events: list[Event]  # what this turn added (empty on a replay)

    @classmethod
    def of(cls, session_id: str, output: TurnOutput) -> TurnView:
        from infra.outbox import reply_options  # (with botocore's errors: on a turn, not at start)

        reply = None
        if output.reply is not None:
            view = output.reply.data.get("view")
            reply = ReplyView(
                text=output.reply.text or "",
                options=reply_options(output.reply),
                view=view if isinstance(view, dict) else None,
            )
        return cls(
            session_id=session_id,
            turn_id=output.trace.turn_id,
            replayed=output.replayed,
            reply=reply,
            events=output.new_events,
        )


class QueuedView(BaseModel):
    session_id: str
    event_id: str
    queued: Literal[True] = True


async def _session(session_id: str) -> SessionState:
    state = await current_runtime().sessions.load(session_id)
    if state is None:
        raise HTTPException(404, f"no session {session_id[:100]!r}")
    return state


async def create_session(body: NewSession) -> SessionView:
    """Create a session (or return the existing one with that id) for an existing agent."""
    runtime = current_runtime()
    agent_id = body.agent_id or runtime.settings.agent_id
    if agent_id is None:
        raise HTTPException(422, "agent_id is required (no default agent is configured)")
    check_agent_id(agent_id)
    try:
        session_id = check_session_id(body.session_id or f"api-{uuid.uuid4().hex}")
    except ValueError as exc:
        raise HTTPException(422, f"session_id: {exc}") from None
    await runtime.agents.get(agent_id)  # 404 for an unknown agent, before anything is written
    state = await runtime.sessions.create(
        SessionState(
            id=session_id,
            agent_id=agent_id,
            customer_id=body.customer_id,
            channel=API_CHANNEL,
            metadata=body.metadata,
        )
    )
    return SessionView.of(state)


async def get_session(session_id: SessionIdPath) -> SessionView:
    return SessionView.of(await _session(session_id))


async def get_events(
    session_id: SessionIdPath,
    after: int = Query(default=-1, ge=-1),
    limit: int = Query(default=EVENT_PAGE, ge=1, le=EVENT_PAGE),
) -> EventPage:
    """The session's stored history, a page at a time: pass the last offset seen as `after`."""
    events = await current_runtime().sessions.events(session_id, after=after, limit=limit)
    if events is None:
        await _session(session_id)  # the same 404 as every other session route
        events = []
    return EventPage(session_id=session_id, events=events)


async def get_trace(session_id: SessionIdPath, turn_id: TurnIdPath) -> TurnTrace:
    trace = await current_runtime().sessions.trace(session_id, turn_id)
    if trace is None:
        raise HTTPException(404, f"no trace of turn {turn_id[:100]!r} in this session")
    return TurnTrace.model_validate(trace)


class ErasureView(BaseModel):
    channel: str
    customer_id: str
    sessions_deleted: list[str]
    sessions_redacted: list[str]
    items_deleted: int
    objects_deleted: int
    inbox_claims_deleted: int
    dead_letters_deleted: int = 0  # their messages taken out of the turn queue's DLQ
    complete: bool = True  # False (HTTP 202): the erasure continues; call DELETE again
    detail: str | None = None


async def erase_customer(
    response: Response,
    channel: ChannelPath,
    customer_id: CustomerIdPath,
) -> ErasureView:
    """Erase one customer (a person on a channel; `api` for sessions made with POST /sessions).
    Idempotent: erasing again finds nothing and deletes nothing. A very large erasure that does
    not fit one call answers 202 with `complete: false`: call again until it answers 200."""
    from infra.aws.erasure import CustomerErasure

    report = await CustomerErasure(current_runtime().sessions).erase(channel, customer_id)
    logger.info(
        "customer erased" if report.complete else "customer erasure continues",
        extra={
            "sessions": len(report.sessions_deleted) + len(report.sessions_redacted),
            # their messages taken out of the turn DLQ (messages held in flight elsewhere, or
            # dead-lettered in the last minute, can be missed: infra/aws/dead_letters.py)
            "dead_letters": report.dead_letters_deleted,
        },
    )
    if not report.complete:
        response.status_code = 202
    return ErasureView(**report.__dict__)


async def post_message(
    session_id: SessionIdPath,
    body: NewMessage,
    response: Response,
    queue: bool = Query(default=False, alias="async"),
) -> TurnView | QueuedView:
    """A customer message: run the turn now and return the reply, or (`?async=1`) queue it for
    the turn worker and return 202. `event_id` makes retries safe: the same id is answered once."""
    runtime = current_runtime()
    state = await _session(session_id)
    text = clean_text(body.text)
    if not text and body.choice is None:
        raise HTTPException(422, "a message needs a non-empty text or a choice")
    event_id = body.event_id or uuid.uuid4().hex
    message = NormalizedMessage(
        channel=API_CHANNEL,
        account_id=API_CHANNEL,
        event_id=event_id,
        conversation_key=session_id,
        customer_id=state.customer_id,
        text=text,
        choice=body.choice,
        raw_type="api",
        received_at=datetime.now(UTC),
    )
    if queue:
        runtime.enqueue(
            QueuedMessage(session_id=session_id, agent_id=state.agent_id, message=message)
        )
        response.status_code = 202
        return QueuedView(session_id=session_id, event_id=event_id)

    output = await runtime.engine.handle(session_id, [message.to_inbound()])
    return TurnView.of(session_id, output)


# --------------------------------------------------------------------------------------------------
# Interrupts: the result of a form (or any interrupter step) delivered into its session

MAX_INTERRUPT_RESULT_BYTES = 16 * 1024
INTERRUPT_RESULT_TYPE = "interrupt_result"  # raw_type of the message that carries it


class InterruptResultBody(BaseModel):
    result: dict[str, Any] | str | int | float | bool = Field(
        description="the form's fields (each becomes a collected value of that name), or one "
        "value (stored under the tool's `fills` name)"
    )


async def deliver_interrupt_result(
    session_id: SessionIdPath,
    body: InterruptResultBody,
    response: Response,
    call_id: CallIdPath,
    queue: bool = Query(default=False, alias="async"),
) -> TurnView | QueuedView:
    """Complete the session's pending interrupter step with its result and resume the journey.

    The result travels as a message of the session (event id `interrupt:{call_id}`), so it is
    answered like a customer message: once (delivering it again replays the same turn), in order
    with the session's other turns, and with a reply. `?async=1` queues it on the session's FIFO
    group for the turn worker instead of running the turn now. A session on a chat channel is
    always queued: the worker delivers the reply to the conversation the form was sent to."""
    runtime = current_runtime()
    state = await _session(session_id)
    if len(json.dumps(body.result)) > MAX_INTERRUPT_RESULT_BYTES:
        raise HTTPException(
            413, f"an interrupt result is limited to {MAX_INTERRUPT_RESULT_BYTES} bytes of JSON"
        )
    pending = state.pending_interrupt
    # On a chat channel the reply goes where the form was sent; elsewhere clients read events.
    chat = state.channel if state.channel != API_CHANNEL else None
    reply_to = pending.reply_to if pending and pending.call_id == call_id else None
    message = NormalizedMessage(
        channel=chat or API_CHANNEL,
        account_id=str(state.metadata.get("account_id") or API_CHANNEL) if chat else API_CHANNEL,
        event_id=f"interrupt:{call_id}",
        conversation_key=session_id,
        customer_id=(pending.sender if pending and pending.sender else state.customer_id),
        reply_to=reply_to or {},
        raw_type=INTERRUPT_RESULT_TYPE,
        received_at=datetime.now(UTC),
        interrupt_result=InterruptResult(call_id=call_id, result=body.result),
    )
    delivered = state.has_processed(message.dedup_key)
    waiting = pending is not None and pending.kind == "interrupter" and pending.call_id == call_id
    if not delivered and not waiting:
        raise HTTPException(
            409,
            f"call {call_id[:100]!r} is not the pending interrupter of this session "
            + (f"(it waits for {pending.call_id!r})" if pending else "(nothing is pending)"),
        )
    if queue or chat:
        if not delivered:
            runtime.enqueue(
                QueuedMessage(session_id=session_id, agent_id=state.agent_id, message=message)
            )
        response.status_code = 202
        return QueuedView(session_id=session_id, event_id=message.event_id)
    output = await runtime.engine.handle(session_id, [message.to_inbound()])
    return TurnView.of(session_id, output)


# A synchronous turn the model could not answer (WAYPOINT_ON_MODEL_RATE_LIMIT=defer).
RATE_LIMITED = {
    503: "the model is rate-limited: nothing was recorded; send the same request (same "
    "`event_id`) again after `Retry-After` seconds, or queue it with `?async=1`"
}


def install(app: FastAPI) -> None:
    """Add the session and customer routes to `app`, as its own routes, in this order."""
    queued: dict[int | str, dict[str, Any]] = {
        202: documented_response(QueuedView, "queued for the turn worker")
    }
    app.add_api_route(
        "/sessions",
        create_session,
        methods=["POST"],
        response_model=SessionView,
        status_code=201,
        responses=error_responses(400, 404, 409),
    )
    app.add_api_route(
        "/sessions/{session_id}",
        get_session,
        methods=["GET"],
        response_model=SessionView,
        responses=error_responses(404),
    )
    app.add_api_route(
        "/sessions/{session_id}/events",
        get_events,
        methods=["GET"],
        response_model=EventPage,
        responses=error_responses(404),
    )
    app.add_api_route(
        "/sessions/{session_id}/traces/{turn_id}",
        get_trace,
        methods=["GET"],
        response_model=TurnTrace,
        responses=error_responses(404),
    )
    app.add_api_route(
        "/customers/{channel}/{customer_id}",
        erase_customer,
        methods=["DELETE"],
        response_model=ErasureView,
        responses={
            202: documented_response(ErasureView, "erasure continues: call again"),
            **error_responses(),
        },
    )
    app.add_api_route(
        "/sessions/{session_id}/messages",
        post_message,
        methods=["POST"],
        response_model=TurnView | QueuedView,
        responses={**queued, **error_responses(400, 404, 409, 503, described=RATE_LIMITED)},
    )
    app.add_api_route(
        "/sessions/{session_id}/interrupts/{call_id}",
        deliver_interrupt_result,
        methods=["POST"],
        response_model=TurnView | QueuedView,
        responses={
            **queued,
            **error_responses(
                400,
                404,
                409,
                413,
                503,
                described={
                    409: "`call_id` is not the session's pending interrupter step",
                    **RATE_LIMITED,
                },
            ),
        },
    )
