"""Management API Lambda (API Gateway HTTP API → FastAPI through Mangum).

Every request needs `X-Api-Key` (compared in constant time with `WAYPOINT_MANAGEMENT_API_KEY`,
which may come from the SSM secrets path); without it: 401, before anything else is looked at.

    POST /agents[?force=true]             publish an agent (JSON or YAML body) → 201 | 422 problems
                                          | 409 when it would strand sessions or lacks tools
                                          (`infra.agent_versions`; `force` publishes anyway)
    POST /agents/check                    the same check, nothing written → 200 {refused, check}
    POST /agents/{agent_id}/rollback      flip the published pointer back (body: {"version"?})
    GET  /agents/{agent_id}[?version=]    the published (or given) version
    GET  /agents/{agent_id}/graph         its journeys drawn, SVG or Mermaid (`functions.graph_api`)
    POST /sessions                        create a session (web chat, tests)
    GET  /sessions?agent=&limit=&cursor=  the agent's sessions, a page at a time (`studio_api`)
    GET  /sessions/{session_id}           its state, without events
    GET  /sessions/{session_id}/turns     its turns (ids and times), to open their traces
    GET  /sessions/{session_id}/events    its events, in order (`?after=` offset)
    GET  /sessions/{session_id}/traces/{turn_id}
    POST /sessions/{session_id}/messages  a customer message: runs the turn and returns the reply,
                                          or queues it (`?async=1`, 202) for the turn worker
    POST /sessions/{session_id}/interrupts/{call_id}
                                          the result of the pending interrupter step (a form):
                                          completes the step and runs the turn (or `?async=1`
                                          queues it); 409 unless `call_id` is the pending one
    GET  /handoffs, POST /sessions/{session_id}/handoff[/take|/messages|/release]
                                          human handoff: list, start, take, write as a person,
                                          hand back (`functions.handoff_api`)
    DELETE /customers/{channel}/{customer_id}
                                          erase everything stored about one customer: their
                                          sessions, events, traces, S3 bodies, inbox claims
                                          (their words in others' group sessions are redacted)
    GET  /                                this index: the operations, where the reference is
    GET  /openapi.json                    the OpenAPI schema
    GET  /docs                            the API reference page (self-contained) — the one path
                                          answered without the key: a static page holding no
                                          data, which asks for the key to load the schema

Errors are `{"error": "...", "problems": [...]}` with the right status; never a stack trace.
"""

from __future__ import annotations

import hmac
import json
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools import Logger
from fastapi import FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from engine.agent_id import InvalidAgentId, check_agent_id
from engine.document_text import (
    MAX_DOCUMENT_BYTES,
    DocumentTooComplex,
    DocumentTooLarge,
    parse_document_text,
)
from engine.errors import AgentNotFound, InvalidAgentDefinition, SessionConflict
from engine.history import EVENT_PAGE
from engine.session import Event, PendingInterrupt, SessionState
from engine.trace import TurnTrace
from engine.version_diff import PublishCheck
from engine.versioning import journeys_in_flight
from functions.graph_api import add_graph_route
from functions.handoff_api import HandoffView
from functions.handoff_api import install as install_handoff_routes
from functions.http_entry import http_lambda_handler
from functions.management_cors import install as install_cors
from functions.studio_api import router as studio_routes
from infra.agent_versions import PublishRefused, ToolRegistryUnavailable
from infra.channels.base import InterruptResult, NormalizedMessage, ReplyOption
from infra.channels.text import MAX_INBOUND_CHARS, clean_text
from infra.outbox import reply_options
from infra.runtime import QueuedMessage, check_session_id, current_runtime

if TYPE_CHECKING:
    from engine.model import AgentSnapshot
    from engine.turn import TurnOutput  # the engine loads on the first turn, not at import

API_CHANNEL = "api"  # messages posted here; the worker does not deliver them anywhere
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")

logger = Logger(service="waypoint-management")
app = FastAPI(
    title="Waypoint management API",
    version="1",
    description="Publish agents, create sessions, read events and traces, post messages. "
    "Every request needs the `X-Api-Key` header.",
    docs_url=None,  # our own page (`api_reference`): it must send the key to load the schema
    redoc_url=None,
    openapi_url="/openapi.json",  # behind the key, like everything but /docs
)
PUBLIC_PATHS = frozenset({"/docs"})


# --------------------------------------------------------------------------------------------------
# Contract


class ErrorBody(BaseModel):
    error: str
    problems: list[str] = Field(default_factory=list)


class PublishedAgentView(BaseModel):
    agent_id: str
    version: str
    embedded: dict[str, int]  # namespace → vectors written to S3
    # the diff against the version published before, and the risks (non-empty only if forced)
    check: PublishCheck | None = None
    forced: bool = False


class PublishCheckView(BaseModel):
    agent_id: str
    version: str  # the version it would be published as
    refused: bool  # POST /agents would answer 409 (without ?force=true)
    check: PublishCheck


class RollbackRequest(BaseModel):
    version: str | None = Field(default=None, max_length=64)  # default: the previous one


class RollbackView(BaseModel):
    agent_id: str
    from_version: str
    to_version: str


class AgentView(BaseModel):
    id: str
    version: str
    name: str
    description: str
    guidelines: list[str]
    journeys: list[str]
    tools: list[str]
    definition: dict[str, Any]  # the agent as a document (same shape POST /agents accepts)


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
    # (a journey is in flight), whatever is published meanwhile (engine.versioning).
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
    agent_id: str | None = Field(default=None, min_length=1, max_length=100)
    session_id: str | None = Field(default=None, min_length=1, max_length=100)
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


# --------------------------------------------------------------------------------------------------
# Authentication and errors


def _error(status: int, error: str, problems: list[str] | None = None) -> JSONResponse:
    body = ErrorBody(error=error, problems=problems or [])
    return JSONResponse(body.model_dump(), status_code=status)


@app.middleware("http")
async def require_api_key(request: Request, call_next: Any) -> Response:
    """401 unless `X-Api-Key` equals the configured key (constant-time compare). Runs before
    routing and body parsing, so an anonymous caller learns nothing else."""
    if _route_path(request) in PUBLIC_PATHS:
        public: Response = await call_next(request)
        return public
    expected = current_runtime().management_api_key()
    received = request.headers.get("x-api-key")
    if expected is None:
        logger.error("WAYPOINT_MANAGEMENT_API_KEY is not configured: every request is refused")
    if (
        expected is None
        or received is None
        or not hmac.compare_digest(received.encode(), expected.encode())
    ):
        refused = _error(401, "missing or wrong X-Api-Key header")
        refused.headers["WWW-Authenticate"] = "ApiKey"
        return refused
    response: Response = await call_next(request)
    return response


# Outside the key check: a browser's preflight carries no key (WAYPOINT_CORS_ORIGINS).
install_cors(app)


def _route_path(request: Request) -> str:
    """The path inside this app (`/docs`), wherever it is mounted (`/api/docs` locally)."""
    path: str = request.scope.get("path", "")
    root: str = request.scope.get("root_path", "").rstrip("/")
    return path[len(root) :] if root and path.startswith(root + "/") else path


@app.exception_handler(HTTPException)
async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return _error(exc.status_code, str(exc.detail))


@app.exception_handler(RequestValidationError)
async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
    ]
    return _error(422, "invalid request", problems)


@app.exception_handler(InvalidAgentDefinition)
async def _invalid_agent(request: Request, exc: InvalidAgentDefinition) -> JSONResponse:
    if isinstance(exc, DocumentTooLarge):
        return _error(413, "agent document too large", exc.problems)
    if isinstance(exc, InvalidAgentId):
        return _error(400, "invalid agent id", exc.problems)
    if isinstance(exc, DocumentTooComplex):
        return _error(400, "agent document refused", exc.problems)
    return _error(422, "invalid agent definition", exc.problems)


@app.exception_handler(PublishRefused)
async def _publish_refused(request: Request, exc: PublishRefused) -> JSONResponse:
    body = ErrorBody(
        error="publish refused: it would strand sessions or call tools the deployment lacks; "
        "fix the problems, or publish again with ?force=true",
        problems=[r.message for r in exc.check.risks],
    ).model_dump()
    body["check"] = exc.check.model_dump(mode="json")
    return JSONResponse(body, status_code=409)


@app.exception_handler(ToolRegistryUnavailable)
async def _registry_unavailable(request: Request, exc: ToolRegistryUnavailable) -> JSONResponse:
    return _error(503, str(exc))


@app.exception_handler(AgentNotFound)
async def _agent_not_found(request: Request, exc: AgentNotFound) -> JSONResponse:
    return _error(404, str(exc))


@app.exception_handler(SessionConflict)
async def _conflict(request: Request, exc: SessionConflict) -> JSONResponse:
    return _error(409, "the session changed concurrently; retry the request")


@app.exception_handler(Exception)
async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("management request failed")
    return _error(500, "internal error")


# --------------------------------------------------------------------------------------------------
# Agents


def parse_agent_document(raw: bytes, content_type: str) -> dict[str, Any]:
    """The request body as an agent document (YAML when the content type says so, else JSON)."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    # Byte, alias-expansion and nesting limits: engine.document_text.
    data = parse_document_text(raw, "yaml" if media_type in _YAML_TYPES else "json", "body")
    header = data.get("agent") if isinstance(data, dict) else None
    if isinstance(header, dict) and "id" in header:
        check_agent_id(header["id"])  # a 400 naming the rule, before anything else
    if not isinstance(data, dict):
        raise InvalidAgentDefinition(["body: expected a mapping with an 'agent' section"])
    return data


@app.post("/agents", response_model=PublishedAgentView, status_code=201)
async def publish_agent(request: Request, force: bool = False) -> PublishedAgentView:
    """Validate, check against the published version (sessions in flight, deployed tools) and
    publish: embeddings to S3, then the version pointer. 409 with the check when refused."""
    from infra.agent_versions import publish_checked

    snapshot = await _agent_from_request(request)
    outcome = await publish_checked(current_runtime(), snapshot, force=force)
    published = outcome.published
    logger.info(
        "agent published",
        extra={
            "agent_id": published.agent_id,
            "version": published.version,
            "forced_over": [r.message for r in outcome.check.risks] if outcome.forced else [],
        },
    )
    return PublishedAgentView(
        agent_id=published.agent_id,
        version=published.version,
        embedded=published.embedded,
        check=outcome.check,
        forced=outcome.forced,
    )


@app.post("/agents/check", response_model=PublishCheckView)
async def check_agent(request: Request) -> PublishCheckView:
    """What publishing this agent now would change and whether it would be refused, without
    writing anything (the same check `POST /agents` makes)."""
    from engine.memory import versioned
    from infra.agent_versions import check_publish_for

    snapshot = versioned(await _agent_from_request(request))
    check = await check_publish_for(current_runtime(), snapshot)
    return PublishCheckView(
        agent_id=snapshot.id, version=snapshot.version, refused=check.refused, check=check
    )


async def _agent_from_request(request: Request) -> AgentSnapshot:
    """The request body as a validated agent (YAML or JSON), size-limited before reading."""
    from engine.authoring import load_agent

    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > MAX_DOCUMENT_BYTES:  # refused before reading it
        raise DocumentTooLarge(
            [
                f"body: {declared} bytes is over the {MAX_DOCUMENT_BYTES}-byte limit for agent documents"
            ]
        )
    raw = await request.body()
    return load_agent(parse_agent_document(raw, request.headers.get("content-type", "")))


@app.post("/agents/{agent_id}/rollback", response_model=RollbackView)
async def rollback_agent(agent_id: str, body: RollbackRequest | None = None) -> RollbackView:
    """Point the agent back at an earlier stored version (default: the previous one)."""
    from infra.agent_versions import rollback

    check_agent_id(agent_id)
    before, after = await rollback(current_runtime(), agent_id, body.version if body else None)
    logger.info("agent rolled back", extra={"agent_id": agent_id, "from": before, "to": after})
    return RollbackView(agent_id=agent_id, from_version=before, to_version=after)


@app.get("/agents/{agent_id}", response_model=AgentView)
async def get_agent(agent_id: str, version: str | None = None) -> AgentView:
    from engine.authoring import dump_agent

    check_agent_id(agent_id)
    snapshot = await current_runtime().agents.get(agent_id, version)
    return AgentView(
        id=snapshot.id,
        version=snapshot.version,
        name=snapshot.name,
        description=snapshot.description,
        guidelines=[g.id for g in snapshot.guidelines],
        journeys=[j.id for j in snapshot.journeys],
        tools=[t.name for t in snapshot.tools],
        definition=dump_agent(snapshot),
    )


add_graph_route(app)  # GET /agents/{agent_id}/graph


# --------------------------------------------------------------------------------------------------
# Sessions


async def _session(session_id: str) -> SessionState:
    state = await current_runtime().sessions.load(session_id)
    if state is None:
        raise HTTPException(404, f"no session {session_id[:100]!r}")
    return state


@app.post("/sessions", response_model=SessionView, status_code=201)
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


@app.get("/sessions/{session_id}", response_model=SessionView)
async def get_session(session_id: str) -> SessionView:
    return SessionView.of(await _session(session_id))


@app.get("/sessions/{session_id}/events", response_model=EventPage)
async def get_events(
    session_id: str,
    after: int = Query(default=-1, ge=-1),
    limit: int = Query(default=EVENT_PAGE, ge=1, le=EVENT_PAGE),
) -> EventPage:
    """The session's stored history, a page at a time: pass the last offset seen as `after`."""
    events = await current_runtime().sessions.events(session_id, after=after, limit=limit)
    if events is None:
        await _session(session_id)  # the same 404 as every other session route
        events = []
    return EventPage(session_id=session_id, events=events)


@app.get("/sessions/{session_id}/traces/{turn_id}", response_model=TurnTrace)
async def get_trace(session_id: str, turn_id: str) -> TurnTrace:
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
    complete: bool = True  # False (HTTP 202): the erasure continues; call DELETE again
    detail: str | None = None


@app.delete(
    "/customers/{channel}/{customer_id}",
    response_model=ErasureView,
    responses={202: {"model": ErasureView, "description": "erasure continues: call again"}},
)
async def erase_customer(
    response: Response,
    channel: str = Path(pattern=r"^[a-z]{1,32}$"),
    customer_id: str = Path(min_length=1, max_length=200),
) -> ErasureView:
    """Erase one customer (a person on a channel; `api` for sessions made with POST /sessions).
    Idempotent: erasing again finds nothing and deletes nothing. A very large erasure that does
    not fit one call answers 202 with `complete: false`: call again until it answers 200."""
    from infra.aws.erasure import CustomerErasure

    report = await CustomerErasure(current_runtime().sessions).erase(channel, customer_id)
    logger.info(
        "customer erased" if report.complete else "customer erasure continues",
        extra={"sessions": len(report.sessions_deleted) + len(report.sessions_redacted)},
    )
    if not report.complete:
        response.status_code = 202
    return ErasureView(**report.__dict__)


@app.post(
    "/sessions/{session_id}/messages",
    response_model=TurnView | QueuedView,
    responses={202: {"model": QueuedView}},
)
async def post_message(
    session_id: str,
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


@app.post(
    "/sessions/{session_id}/interrupts/{call_id}",
    response_model=TurnView | QueuedView,
    responses={202: {"model": QueuedView}, 409: {"model": ErrorBody}},
)
async def deliver_interrupt_result(
    session_id: str,
    body: InterruptResultBody,
    response: Response,
    call_id: str = Path(min_length=1, max_length=200),
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


app.include_router(studio_routes)  # GET /sessions, /sessions/{id}/turns (the studio page)


# --------------------------------------------------------------------------------------------------
# The API's own reference


def _openapi_with_key() -> dict[str, Any]:
    """FastAPI's schema, plus the `X-Api-Key` scheme every operation requires."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schema.setdefault("components", {})["securitySchemes"] = {
            "ApiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
        }
        schema["security"] = [{"ApiKey": []}]
        app.openapi_schema = schema
    return app.openapi_schema


app.openapi = _openapi_with_key  # type: ignore[method-assign]


class ApiIndex(BaseModel):
    service: str
    version: str
    openapi: str
    docs: str
    operations: list[str]


@app.get("/", response_model=ApiIndex, include_in_schema=False)
async def api_index(request: Request) -> ApiIndex:
    """What this API offers and where its reference is (instead of a bare 404)."""
    root = request.scope.get("root_path", "").rstrip("/")
    operations = [
        f"{method} {root}{route.path}"
        for route in app.routes
        if getattr(route, "include_in_schema", False)
        for method in sorted(getattr(route, "methods", ()) or ())
    ]
    return ApiIndex(
        service=app.title,
        version=app.version,
        openapi=f"{root}/openapi.json",
        docs=f"{root}/docs",
        operations=operations,
    )


@app.get("/docs", include_in_schema=False)
async def api_reference() -> Response:
    """The API reference page: static, without data; it loads the schema with the key."""
    from fastapi.responses import HTMLResponse

    from functions.api_reference import REFERENCE_PAGE

    return HTMLResponse(REFERENCE_PAGE)


install_handoff_routes(app)  # GET /handoffs, POST /sessions/{id}/handoff[...]

# --------------------------------------------------------------------------------------------------
# Lambda entry point

handler = http_lambda_handler(app, logger)
