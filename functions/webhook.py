"""Webhook Lambda: chat platforms call `GET|POST /webhooks/{channel}` (API Gateway HTTP API).

For every request: look the channel up, cap the body, let the channel verify it on the raw bytes
and normalize it (`infra.channels`), then for each message: claim its event id in the inbox
(atomic, 8+ days), create the session if it is new, enqueue it on the SQS FIFO turn queue (group =
session), and acknowledge at once. The turn runs in the worker; the reply goes out through the
platform's API, never in this response.

- A duplicate (platform retry, Slack `X-Slack-Retry-Num`, the same WhatsApp message in a new
  batch) is acknowledged like the original and enqueues nothing.
- If the session or the enqueue fails after the claim, the claim is released and the answer is
  503, so the platform retries and nothing is lost.
- Rejections (`WebhookRejected`) answer their status with `{"error": message}`; the messages are
  written to be safe to return. Anything else is a 500 with no detail (the log has it).

Imports stay light (FastAPI, Mangum, the channel models): boto3 and the stores are built by the
runtime on the first request, and the engine (numpy) is never imported here.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from engine.session import SessionState
from functions.http_entry import http_lambda_handler
from infra.channels.base import ChannelRequest, NormalizedMessage, WebhookOutcome
from infra.channels.errors import PayloadTooLarge, WebhookRejected
from infra.channels.ingress import DEFAULT_MAX_BODY_BYTES
from infra.channels.registry import lookup_channel
from infra.runtime import QueuedMessage, Runtime, current_runtime, session_id_for

# Meta redelivers for up to 7 days, Telegram keeps updates 24 h: 8 days covers every platform.
INBOX_TTL_SECONDS = 8 * 24 * 3600
_KNOWN_SESSIONS_MAX = 4096

logger = Logger(service="waypoint-webhook")
app = FastAPI(title="Waypoint webhooks", docs_url=None, redoc_url=None, openapi_url=None)


class EnqueueFailed(Exception):
    """Claimed but not enqueued: the claim was released; answer 503 so the platform retries."""


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
    enqueued = 0
    for message in outcome.messages:
        claim_id = f"{message.account_id}:{message.event_id}"  # event ids are per account
        try:
            claimed = await runtime.inbox.claim(message.channel, claim_id, INBOX_TTL_SECONDS)
        except Exception:  # throttled or unreachable: nothing written, the platform retries
            logger.exception("could not claim the event; asking the platform to retry")
            raise EnqueueFailed from None
        if not claimed:
            logger.info("duplicate event", extra={"channel": message.channel})
            continue
        try:
            queued = await _queued(runtime, message)
            runtime.enqueue(queued)
        except Exception:
            logger.exception("could not enqueue; releasing the claim so the platform retries")
            try:
                await runtime.inbox.release(message.channel, claim_id)
            except Exception:  # the retry will look like a duplicate: say which event to replay
                logger.exception(
                    "could not release the inbox claim; replay this event by hand",
                    extra={"channel": message.channel, "event_id": message.event_id},
                )
            raise EnqueueFailed from None
        enqueued += 1
    return enqueued


async def _queued(runtime: Runtime, message: NormalizedMessage) -> QueuedMessage:
    agent_id = runtime.agent_for(message.channel)
    session_id = session_id_for(agent_id, message.channel, message.conversation_key)
    logger.set_correlation_id(session_id)
    known = runtime.known_sessions  # sessions never disappear: create each once per container
    if session_id not in known:
        await runtime.sessions.ensure(  # never reads the session back (no S3 read needed)
            SessionState(
                id=session_id,
                agent_id=agent_id,
                customer_id=message.customer_id,
                channel=message.channel,
                metadata={"account_id": message.account_id},
            )
        )
        if len(known) >= _KNOWN_SESSIONS_MAX:
            known.clear()
        known.add(session_id)
    return QueuedMessage(session_id=session_id, agent_id=agent_id, message=message)


# A plain route: the raw request is all it needs, and FastAPI's parameter analysis would import
# pydantic.v1 (~50 ms of cold start) to inspect the signature.
app.add_route("/webhooks/{channel}", receive, methods=["GET", "POST"])


@app.exception_handler(Exception)
async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("webhook failed")
    return _error(500, "internal error")


handler = http_lambda_handler(app, logger)
