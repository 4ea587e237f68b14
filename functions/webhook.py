"""Webhook Lambda: chat platforms call `GET|POST /webhooks/{channel}` (API Gateway HTTP API).

For every request: look the channel up, cap the body, let the channel verify it on the raw bytes
and normalize it (`infra.channels`), then for each message: claim its event id in the inbox
(atomic, 8+ days, owned by this request), create the session if it is new (carrying the
erasure tombstone of its customer, `engine.privacy.erasure`), enqueue it on the SQS
FIFO turn queue (group = session), mark the claim QUEUED, and acknowledge. The turn runs in the worker; the reply goes out through the
platform's API, never in this response.

- A message in the Slack support channel (`WAYPOINT_SUPPORT_SLACK_CHANNEL`) from outside its
  allow-list (`infra.channels.support_channel`: a Slack Connect member of another organization)
  is acknowledged and dropped: never queued, never relayed to a customer.
- A duplicate (platform retry, Slack `X-Slack-Retry-Num`, the same WhatsApp message in a new
  batch) is acknowledged like the original and enqueues nothing.
- If the session or the enqueue fails after the claim, the claim is released and the answer is
  503, so the platform retries and nothing is lost. If the request dies instead (Lambda timeout),
  its claim stays CLAIMED; once its lease (30 s) is over, the platform's next retry takes it over
  and queues the message (the queue's deduplication id keeps a single copy).
- A copy that arrives while another request holds the claim unqueued waits up to 2 s for it,
  then answers 503: a 200 before the message is queued could lose it.
- Rejections (`WebhookRejected`) answer their status with `{"error": message}`; the messages are
  written to be safe to return. Anything else is a 500 with no detail (the log has it).

Imports stay light (Starlette, Mangum, the channel models): boto3 and the stores are built by the
runtime on the first request, and the engine (numpy) is never imported here. The app is a
Starlette app — the ASGI toolkit FastAPI is built on (`FastAPI` is its subclass), served by Mangum
like the management API — and not a `FastAPI` app: this one raw route uses nothing FastAPI adds
(no parameter validation, no OpenAPI document: it was switched off), and importing `fastapi`
builds its ≈ 40 OpenAPI pydantic models whether or not an app uses them, ≈ 200 ms of every cold
start on the path the platforms call (Slack waits 3 s for the acknowledgement). Errors keep
FastAPI's shapes: an `HTTPException` (404 off the route, 405) answers `{"detail": …}` as
FastAPI's handler did, anything unexpected a 500 with `{"error": "internal error"}`
(tests/functions/test_webhook.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid

from aws_lambda_powertools import Logger
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.privacy.erasure import erasures_of
from engine.sessions.inbox import ClaimOutcome
from engine.sessions.session import SessionState
from functions.http_entry import http_lambda_handler
from infra.channels.base import ChannelRequest, NormalizedMessage, WebhookOutcome
from infra.channels.errors import PayloadTooLarge, WebhookRejected
from infra.channels.ingress import DEFAULT_MAX_BODY_BYTES
from infra.channels.registry import lookup_channel
from infra.runtime import Runtime, current_runtime
from infra.turn_queue import QueuedMessage, session_id_for

# Meta redelivers for up to 7 days, Telegram keeps updates 24 h: 8 days covers every platform.
INBOX_TTL_SECONDS = 8 * 24 * 3600
# A claim not marked QUEUED within its lease is taken over by the next retry: the request that
# made it is dead by then (the webhook's Lambda Timeout is 10 s, template.yaml).
CLAIM_LEASE_SECONDS = 30
# How long a concurrent copy of an event waits for the request holding its claim to queue it.
IN_FLIGHT_WAIT_SECONDS = 2.0
IN_FLIGHT_POLL_SECONDS = 0.05
_KNOWN_SESSIONS_MAX = 4096

logger = Logger(service="waypoint-webhook")


class EnqueueFailed(Exception):
    """Claimed but not enqueued: the claim was released; answer 503 so the platform retries."""


class MessageInFlight(EnqueueFailed):
    """Another request holds the event's claim and has not queued it yet: 503, retry later."""


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_body(request: Request, max_bytes: int, channel: str) -> bytes:
    """The raw body, refused with 413 as soon as it is known to exceed `max_bytes`: from the
    declared Content-Length before reading, else while streaming it."""
    declared = request.headers.get("content-length", "").strip()
    if declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"{channel} webhook body is over the {max_bytes}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"{channel} webhook body is over the {max_bytes}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


async def receive(request: Request) -> Response:
    """`GET|POST /webhooks/{channel}`: verify, dedupe, enqueue, acknowledge."""
    channel = str(request.path_params["channel"])
    runtime = current_runtime()
    try:
        handler = lookup_channel(runtime.channels, channel)
        max_bytes = int(getattr(handler, "max_body_bytes", DEFAULT_MAX_BODY_BYTES))
        body = await read_body(request, max_bytes, channel)
        channel_request = ChannelRequest.from_http(
            request.method, str(request.url), headers=dict(request.headers), body=body
        )
        outcome = handler.handle(channel_request)
    except WebhookRejected as rejected:
        logger.info(
            "webhook rejected",
            extra={"channel": channel[:40], "status": rejected.status, "reason": str(rejected)},
        )
        return _error(rejected.status, str(rejected), rejected.headers)

    try:
        accepted = await accept(runtime, outcome)
    except MessageInFlight:
        return _error(503, "an earlier delivery of this event is still being queued; please retry")
    except EnqueueFailed:
        return _error(503, "the message could not be queued; please retry")
    logger.info(
        "webhook accepted",
        extra={
            "channel": channel,
            "kind": outcome.kind,
            "messages": len(outcome.messages),
            "enqueued": accepted,
            "reason": outcome.reason,
        },
    )
    return Response(outcome.body, status_code=outcome.status, headers=outcome.headers)


async def accept(runtime: Runtime, outcome: WebhookOutcome) -> int:
    """Dedupe, create sessions and enqueue every message of a verified request; returns how many
    were new. Raises `EnqueueFailed` (claim released) when one could not be queued."""
    owner = uuid.uuid4().hex  # this request: its own retried writes are recognised as its own
    relay = runtime.settings.support_relay
    enqueued = 0
    for message in outcome.messages:
        if relay is not None and relay.refuses(message):
            # In the support channel, but not from an allowed team or person (a Slack Connect
            # member of another organization): never relayed to a customer, never a session.
            logger.warning(
                "support channel message from outside the allow-list dropped",
                extra={
                    "sender_team": message.sender_team,
                    "team_allowed": message.sender_team in relay.teams,
                },
            )
            continue
        claim_id = f"{message.account_id}:{message.event_id}"  # event ids are per account
        if not await _claim(runtime, message, claim_id, owner):
            logger.info("duplicate event", extra={"channel": message.channel})
            continue
        try:
            queued = await _queued(runtime, message)
            runtime.enqueue(queued)
        except Exception:
            logger.exception("could not enqueue; releasing the claim so the platform retries")
            try:
                await runtime.inbox.release(message.channel, claim_id, owner)
            except Exception:  # the claim's lease runs out and a retry takes it over
                logger.exception(
                    "could not release the inbox claim; a retry takes it over after the lease",
                    extra={"channel": message.channel, "event_id": message.event_id},
                )
            raise EnqueueFailed from None
        try:
            marked = await runtime.inbox.mark_queued(message.channel, claim_id, owner)
        except Exception:  # queued all the same: a retry past the lease is dropped by SQS dedup
            logger.exception("queued, but the claim could not be marked QUEUED")
            marked = True
        if not marked:
            logger.warning(
                "queued after the claim's lease ran out; another request took it over (the "
                "queue's deduplication id keeps one copy)",
                extra={"channel": message.channel},
            )
        enqueued += 1
    return enqueued


async def _claim(runtime: Runtime, message: NormalizedMessage, claim_id: str, owner: str) -> bool:
    """True when this request holds the claim and must queue the message; False for a
    duplicate of a queued message. While another request holds a live, unqueued claim (a
    concurrent platform retry), wait briefly for it: acknowledging before the message is queued
    would lose it if that request then died, so past the wait the answer is 503."""
    deadline = time.monotonic() + IN_FLIGHT_WAIT_SECONDS
    while True:
        try:
            outcome = await runtime.inbox.claim(
                message.channel,
                claim_id,
                INBOX_TTL_SECONDS,
                owner=owner,
                lease_seconds=CLAIM_LEASE_SECONDS,
            )
        except Exception:  # throttled or unreachable: nothing written, the platform retries
            logger.exception("could not claim the event; asking the platform to retry")
            raise EnqueueFailed from None
        if outcome is not ClaimOutcome.IN_FLIGHT:
            return outcome is ClaimOutcome.OURS
        if time.monotonic() >= deadline:
            logger.info("event claimed by another request, not queued yet; asking for a retry")
            raise MessageInFlight from None
        await asyncio.sleep(IN_FLIGHT_POLL_SECONDS)


async def _queued(runtime: Runtime, message: NormalizedMessage) -> QueuedMessage:
    agent_id = runtime.agent_for(message.channel)
    session_id = session_id_for(agent_id, message.channel, message.conversation_key)
    logger.set_correlation_id(session_id)
    known = runtime.known_sessions  # sessions never disappear: create each once per container
    # A person's reply in the handoff support channel belongs to a customer's session (the
    # worker finds it by the thread): it needs no session of its own.
    relay = runtime.settings.support_relay
    if session_id not in known and not (relay is not None and relay.in_channel(message)):
        # If they were erased (their session deleted) while a message of theirs was queued, the
        # new session remembers when: that message is dropped, this one is answered.
        erased = await erasures_of(runtime.sessions, message.channel, [message.customer_id])
        await runtime.sessions.ensure(  # never reads the session back (no S3 read needed)
            SessionState(
                id=session_id,
                agent_id=agent_id,
                customer_id=message.customer_id,
                channel=message.channel,
                metadata={"account_id": message.account_id},
                erased_senders=erased,
            )
        )
        if len(known) >= _KNOWN_SESSIONS_MAX:
            known.clear()
        known.add(session_id)
    return QueuedMessage(session_id=session_id, agent_id=agent_id, message=message)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, method not allowed) as FastAPI answers them."""
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("webhook failed")
    return _error(500, "internal error")


app = Starlette(
    # A plain route: the raw request is all it needs.
    routes=[Route("/webhooks/{channel}", receive, methods=["GET", "POST"])],
    exception_handlers={HTTPException: _http_error, Exception: _unexpected},
)
handler = http_lambda_handler(app, logger)
