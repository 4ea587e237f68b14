"""Turn worker Lambda: consumes the SQS FIFO turn queue, runs turns, delivers replies.

- **Partial batch failures.** Powertools' `SqsFifoPartialProcessor(skip_group_on_error=True)`:
  a failed record is reported in `batchItemFailures`, and so is every later record of the same
  message group (session) in the batch, so a session's messages never overtake each other. Other
  sessions in the batch are unaffected.
- **Bursts.** The messages of one session in a batch (a customer typing three lines in a row) are
  answered by ONE turn that sees all of them (`TurnEngine.handle(session, messages)`).
  `WAYPOINT_REPLY_PER_MESSAGE=1` runs one turn per message instead.
- **Delivery through the outbox** (`infra.outbox`). The turn commits, then its reply is sent
  through the channel (`infra.channels`) under the turn's outbox lease (SENDING, one owner, 60 s),
  and the record flips to SENT. A redelivered message replays the turn (no recomputation, no
  second LLM call) and sends only if the record is not SENT; a second delivery of the same turn
  running concurrently waits briefly for the lease holder, then fails its record for a later
  retry instead of sending too. A retryable failure is retried once in the invocation (1 s
  later), then the record goes back to PENDING and the SQS record fails; after
  `MAX_DELIVERY_ATTEMPTS` (5) attempts, or a refusal for good (bad token,
  user blocked the bot), the reply is marked FAILED, a `delivery_failed` status event is added
  to the session and the record is acknowledged: one undeliverable reply must not block the
  session's queue. Messages from the management API (channel `api`) are not delivered: clients
  read the session's events.
- **Time.** A turn is not started with less than `TURN_TIME_RESERVE_MS` of the invocation left
  (`context.get_remaining_time_in_millis()`): the untouched records are reported as batch item
  failures and come back, rather than being cut off by the Lambda Timeout.
- **Observability.** Powertools Logger (session id as correlation id; text lengths only, never
  message text), Metrics (EMF: turn latency, LLM calls, prompt tokens, tool errors, deliveries)
  and X-Ray: Lambda's active tracing for every invocation; the SDK's subsegments only with
  `WAYPOINT_XRAY_SDK=1`, loaded on the first invocation (`functions.tracing`), never at import.

The engine and the stores are imported on the first record (`infra.runtime`), not at import.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.batch import (
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from engine.errors import WaypointError
from engine.session import Event, EventKind, EventSource, InboundMessage, SessionState
from functions.tracing import LazyTracer
from infra.channels.base import Channel, DeliveryReceipt, ReplyOption
from infra.channels.errors import DeliveryError
from infra.channels.support_channel import is_support_message
from infra.handoff_changes import QueuedPersonMessage
from infra.outbox import DynamoOutbox, Lease, LeaseOutcome, outbound_reply
from infra.runtime import QueuedMessage, Runtime, current_runtime

if TYPE_CHECKING:
    from engine.turn import TurnOutput
    from infra.handoff_changes import OutsideTurnDelivery

SERVICE = "waypoint-worker"
logger = Logger(service=SERVICE)
# `service` explicitly: it is the dimension template.yaml's DeliveryFailedAlarm watches.
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Waypoint", service=SERVICE
)
DELIVERIES_FAILED_METRIC = "DeliveriesFailed"  # alarmed (template.yaml: DeliveryFailedAlarm)
PLAIN_FALLBACKS_METRIC = "RenderedRepliesRefused"  # a renderer bug: the reply went out as text
# The X-Ray SDK is imported on the first invocation, and only when subsegments are wanted
# (functions/tracing.py); Lambda's active tracing records the invocation either way.
tracer = LazyTracer(SERVICE)
processor = SqsFifoPartialProcessor(skip_group_on_error=True)
# Report every record as failed rather than raising when all fail: same retry, no Lambda error.
processor.raise_on_entire_batch_failure = False


class MalformedQueueMessage(WaypointError):
    """A queue message that is not a `QueuedMessage`; it fails until it lands in the DLQ."""


class ReplyNotDelivered(WaypointError):
    """The platform could not take the reply now; the outbox goes back to PENDING, SQS retries."""


class ReplyInFlight(ReplyNotDelivered):
    """Another delivery of the same turn holds the outbox lease; SQS retries this record."""


class OutOfTime(WaypointError):
    """Too little of the invocation is left to run a turn; the record is retried by SQS."""


# A reply whose sends keep failing is given up after this many attempts (counted on its outbox
# record, across invocations) and its record acknowledged: the session's FIFO group moves on.
# Each invocation tries up to SENDS_PER_INVOCATION times, INLINE_RETRY_DELAY_SECONDS apart, so
# the session waits at most two visibility timeouts for a platform that stays down.
MAX_DELIVERY_ATTEMPTS = 5
SENDS_PER_INVOCATION = 2
INLINE_RETRY_DELAY_SECONDS = 1.0
SEND_TIME_RESERVE_MS = 15_000  # one more send: the http client's 10 s timeout, with room
# Longer than one send (the http client's 10 s timeout) with room; far shorter than the queue's
# visibility timeout, so a redelivery after a dead worker finds the lease expired.
DELIVERY_LEASE_SECONDS = 60
BUSY_WAIT_SECONDS = 3.0
BUSY_POLL_SECONDS = 0.05
# A turn is not started with less than this left of the invocation: the management API runs a
# whole turn within its 29 s Timeout, so 30 s is enough for one; a turn cut off by the Lambda
# Timeout would come back only after the queue's visibility timeout.
TURN_TIME_RESERVE_MS = 30_000


# --------------------------------------------------------------------------------------------------
# Bursts: which records are answered together


@dataclass
class Burst:
    """The records of one session answered by one turn (in queue order)."""

    session_id: str
    record_ids: list[str] = field(default_factory=list)
    requests: list[QueuedMessage] = field(default_factory=list)
    answered: bool = False


def plan_bursts(
    records: Iterable[dict[str, Any]], *, per_message: bool
) -> dict[str, Burst | MalformedQueueMessage | QueuedPersonMessage]:
    """Record id → its burst (or why it cannot be read). All records of a session in the batch
    form one burst (FIFO keeps them in order within their group), unless `per_message`."""
    plan: dict[str, Burst | MalformedQueueMessage | QueuedPersonMessage] = {}
    by_session: dict[str, Burst] = {}
    for record in records:
        record_id = str(record.get("messageId", ""))
        person = QueuedPersonMessage.parse(record.get("body") or "")
        if person is not None:  # a person's message to deliver (infra.handoff_changes)
            plan[record_id] = person
            continue
        try:
            queued = QueuedMessage.model_validate_json(record.get("body") or "")
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False)[:3]
            )
            plan[record_id] = MalformedQueueMessage(f"not a turn queue message: {problems}")
            continue
        burst = None if per_message else by_session.get(queued.session_id)
        if burst is None:
            burst = Burst(queued.session_id)
            by_session[queued.session_id] = burst
        burst.record_ids.append(record_id)
        burst.requests.append(queued)
        plan[record_id] = burst
    return plan


# --------------------------------------------------------------------------------------------------
# Replies


@dataclass(frozen=True)
class PendingReply:
    turn_id: str
    event: Event
    answering: QueuedMessage | None  # the last message of the burst this turn answered
    reply_to: dict[str, Any] | None = None  # where to send instead (a person's message)

    @property
    def address(self) -> dict[str, Any]:
        if self.reply_to is not None:
            return self.reply_to
        return self.answering.message.reply_to if self.answering is not None else {}


def replies_for(state: SessionState, requests: Sequence[QueuedMessage]) -> list[PendingReply]:
    """Every turn that answered a message of `requests`, in order, with its agent reply.

    Usually one turn. More after a partial redelivery: if a burst's first turn committed but its
    reply was not delivered, and the redelivered batch also carries newer messages, the engine
    answers only the new ones in a new turn; the older turn's reply is found (and sent) here."""
    by_event_id = {q.message.dedup_key: q for q in requests}
    answering: dict[str, QueuedMessage] = {}
    replies: dict[str, Event] = {}
    for event in state.events:
        if event.kind is not EventKind.MESSAGE or event.turn_id is None:
            continue
        if event.source is EventSource.CUSTOMER:
            queued = by_event_id.get(str(event.data.get("channel_event_id")))
            if queued is not None:
                answering[event.turn_id] = queued
        elif event.source is EventSource.AGENT and event.turn_id in answering:
            replies[event.turn_id] = event
    return [
        PendingReply(turn_id, replies[turn_id], queued)
        for turn_id, queued in answering.items()
        if turn_id in replies
    ]


# --------------------------------------------------------------------------------------------------
# The worker


class TurnWorker:
    """Answers the bursts of one SQS batch; `handle_record` is Powertools' record handler."""

    def __init__(
        self,
        runtime: Runtime,
        plan: dict[str, Burst | MalformedQueueMessage | QueuedPersonMessage],
        context: Any = None,
    ) -> None:
        self.runtime = runtime
        self.plan = plan
        self.context = context  # the Lambda context: how much of the invocation is left

    def handle_record(self, record: SQSRecord) -> None:
        burst = self.plan.get(record.message_id)
        if burst is None:
            raise MalformedQueueMessage("record missing from the batch plan")
        if isinstance(burst, MalformedQueueMessage):
            logger.error("malformed queue message", extra={"reason": str(burst)})
            raise burst
        if isinstance(burst, QueuedPersonMessage):
            logger.set_correlation_id(burst.session_id)
            self.runtime.run(self.deliver_person_message(burst))
            return
        if burst.answered:
            return  # answered together with the first record of its burst
        logger.set_correlation_id(burst.session_id)
        remaining = self._remaining_ms()
        if remaining is not None and remaining < TURN_TIME_RESERVE_MS:
            metrics.add_metric(name="RecordsDeferred", unit=MetricUnit.Count, value=1)
            raise OutOfTime(
                f"{remaining} ms left of the invocation, under the {TURN_TIME_RESERVE_MS} ms a "
                "turn needs; SQS retries this record"
            )
        self.runtime.run(self.answer(burst))
        burst.answered = True

    async def deliver_person_message(self, job: QueuedPersonMessage) -> None:
        """A message recorded outside a turn (a person's, a ticket's notice): sent like a
        turn's reply (outbox lease, retries, give-up), with no turn run."""
        from infra.handoff_changes import delivery_of_job

        now = self.runtime.clock.now()
        delivery = await delivery_of_job(self.runtime.sessions, now, job)
        await self._deliver_outside_turn(delivery)
        if delivery is not None:
            from infra.handoff_slack import mirror_to_thread

            try:
                await mirror_to_thread(self.runtime, delivery)
            except Exception:
                logger.exception("could not post to the support thread")

    async def _deliver_outside_turn(self, delivery: OutsideTurnDelivery | None) -> None:
        channel = self.runtime.channels.get(delivery.channel) if delivery else None
        if delivery is None or channel is None:
            return
        pending = PendingReply(delivery.record_id, delivery.event, None, delivery.reply_to)
        await self._deliver(channel, delivery.session_id, pending)

    def _remaining_ms(self) -> int | None:
        remaining = getattr(self.context, "get_remaining_time_in_millis", None)
        return int(remaining()) if callable(remaining) else None

    @tracer.capture_method
    async def answer(self, burst: Burst) -> None:
        """One turn for the burst's messages, then deliver what they were answered with."""
        from infra.channels.typing import typing_while

        started = time.perf_counter()
        last = burst.requests[-1].message
        if is_support_message(last):  # a person in the support channel: no turn (handoff)
            await self._support_replies(burst)
            return
        channel = self.runtime.channels.get(last.channel)
        messages = [await self._inbound(q) for q in burst.requests]
        # "Typing…" from pickup until the turn ends (best effort: never fails the turn).
        async with typing_while(channel, last.reply_to, self.runtime.http):
            output = await self._turn(burst, messages)
        self._record_turn(burst, output, (time.perf_counter() - started) * 1000)
        if channel is None:
            return  # e.g. "api": the management API's clients read the session's events
        for pending in replies_for(output.state, burst.requests):
            await self._deliver(channel, burst.session_id, pending)
        await self._to_support_thread(output)

    async def _to_support_thread(self, output: TurnOutput) -> None:
        """The Slack support thread of a handed-off session (infra.handoff_slack): opened by
        the turn that handed off, then the customer's messages. Never fails the turn."""
        from infra.handoff_slack import after_turn

        try:
            await after_turn(self.runtime, output.state, output.trace.turn_id)
        except Exception:
            logger.exception("could not post to the support thread")

    async def _support_replies(self, burst: Burst) -> None:
        """A person's replies (or a hand-back) in a support thread, delivered to the customer."""
        from infra.handoff_slack import person_wrote

        for queued in burst.requests:
            await self._deliver_outside_turn(await person_wrote(self.runtime, queued.message))

    async def _inbound(self, queued: QueuedMessage) -> InboundMessage:
        """The engine's message; a compacted button id (Telegram's 64-byte callback data) is
        mapped back to the option it stands for, using the session's pending options."""
        inbound = queued.message.to_inbound()
        choice = inbound.choice
        if not choice or not choice.startswith("~"):
            return inbound
        from infra.channels.options import resolve_choice

        session = await self.runtime.sessions.load(queued.session_id)
        pending = session.pending_interrupt if session else None
        offered = [
            ReplyOption(id=str(o["id"]), label=str(o.get("label") or o["id"]))
            for o in (pending.options if pending else ())
            if o.get("id")
        ]
        resolved = resolve_choice(choice, offered)
        return inbound.model_copy(update={"choice": resolved}) if resolved else inbound

    async def _turn(self, burst: Burst, messages: list[InboundMessage]) -> TurnOutput:
        engine = self.runtime.engine
        try:
            return await engine.handle(burst.session_id, messages)
        except KeyError:
            # The webhook creates sessions; one missing here was lost or deleted: recreate it.
            if await self.runtime.sessions.load(burst.session_id) is not None:
                raise
            await self.runtime.sessions.create(_new_session(burst.requests[0]))
            return await engine.handle(burst.session_id, messages)

    def _record_turn(self, burst: Burst, output: TurnOutput, latency_ms: float) -> None:
        trace = output.trace
        tool_errors = sum(1 for call in trace.tool_calls if call.status == "error")
        logger.info(
            "turn replayed" if output.replayed else "turn committed",
            extra={
                "session_id": burst.session_id,
                "turn_id": trace.turn_id,
                "messages": len(burst.requests),
                "chars_in": sum(len(q.message.text) for q in burst.requests),
                "chars_out": len(output.reply.text or "") if output.reply else 0,
                "llm_calls": len(trace.llm_calls),
                "prompt_tokens": trace.prompt_tokens,
                "tool_errors": tool_errors,
                "latency_ms": round(latency_ms, 1),
            },
        )
        if output.replayed:
            metrics.add_metric(name="TurnsReplayed", unit=MetricUnit.Count, value=1)
            return
        metrics.add_metric(name="TurnLatency", unit=MetricUnit.Milliseconds, value=latency_ms)
        metrics.add_metric(name="MessagesPerTurn", unit=MetricUnit.Count, value=len(burst.requests))
        metrics.add_metric(name="LLMCalls", unit=MetricUnit.Count, value=len(trace.llm_calls))
        metrics.add_metric(name="PromptTokens", unit=MetricUnit.Count, value=trace.prompt_tokens)
        metrics.add_metric(name="ToolErrors", unit=MetricUnit.Count, value=tool_errors)

    async def _deliver(self, channel: Channel, session_id: str, pending: PendingReply) -> None:
        """Send one turn's reply under the outbox's lease, at most `MAX_DELIVERY_ATTEMPTS`
        times across invocations; past that (or refused for good) it is marked FAILED, recorded
        in the session and acknowledged, so the session's queue moves on."""
        outbox = self.runtime.outbox
        turn_id = pending.turn_id
        owner = uuid.uuid4().hex
        lease = await self._take(channel, session_id, turn_id, owner)
        if lease is None:
            logger.info("reply already delivered", extra={"turn_id": turn_id})
            return
        if lease.entry.attempts > MAX_DELIVERY_ATTEMPTS:  # earlier attempts died mid-send
            error = lease.entry.last_error or "every attempt was interrupted"
            await self._give_up(channel, session_id, turn_id, error, lease.entry.attempts)
            return
        try:
            await self._send_under_lease(channel, session_id, pending, owner, lease)
        except ReplyNotDelivered:
            raise  # the lease was given back (or is someone else's)
        except Exception:
            # Not a platform answer (a bug, a throttled write): hand the record back so the retry
            # need not wait for the lease. The release is conditional on SENDING under our owner,
            # so it changes nothing once the record was marked. A process that dies here (a
            # Lambda timeout) cannot release; the lease runs out instead.
            await _release_quietly(outbox, session_id, turn_id, owner, "interrupted")
            raise

    async def _send_under_lease(
        self, channel: Channel, session_id: str, pending: PendingReply, owner: str, lease: Lease
    ) -> None:
        outbox = self.runtime.outbox
        turn_id = pending.turn_id
        reply = outbound_reply(pending.event, pending.address)
        if reply is None:
            await outbox.mark_failed(session_id, turn_id, "the reply has no text")
            return
        for send in range(1, SENDS_PER_INVOCATION + 1):
            attempts = lease.entry.attempts
            try:
                receipt = await channel.send(reply, self.runtime.http)
            except DeliveryError as error:
                extra = {
                    "turn_id": turn_id,
                    "channel": channel.name,
                    "error": str(error),
                    "platform_status": error.platform_status,
                    "attempts": attempts,
                }
                if not error.retryable:
                    logger.error("reply refused by the platform; not retried", extra=extra)
                    metrics.add_metric(name="DeliveriesRefused", unit=MetricUnit.Count, value=1)
                    await self._give_up(channel, session_id, turn_id, str(error), attempts)
                    return
                if attempts >= MAX_DELIVERY_ATTEMPTS:
                    await self._give_up(channel, session_id, turn_id, str(error), attempts)
                    return
                logger.warning("reply not delivered; will retry", extra=extra)
                metrics.add_metric(name="DeliveryRetries", unit=MetricUnit.Count, value=1)
                if send < SENDS_PER_INVOCATION and self._has_time_for_another_send():
                    # A platform's 503 is often over in a second; the record's next delivery
                    # would come only after the queue's visibility timeout.
                    await asyncio.sleep(INLINE_RETRY_DELAY_SECONDS)
                    lease = await self._renew(channel, session_id, turn_id, owner)
                    continue
                await outbox.release(session_id, turn_id, owner, str(error))
                raise ReplyNotDelivered(str(error)) from None
            note_plain_fallbacks(receipt, turn_id)
            await self._mark_sent(session_id, turn_id, receipt.message_ids)
            return

    async def _renew(self, channel: Channel, session_id: str, turn_id: str, owner: str) -> Lease:
        """Take our own lease again for another send: counts the attempt, extends the lease."""
        lease = await self.runtime.outbox.take(
            session_id, turn_id, channel.name, owner=owner, lease_seconds=DELIVERY_LEASE_SECONDS
        )
        if lease.outcome is not LeaseOutcome.TAKEN:  # only a hand edit of the record does this
            raise ReplyInFlight(f"turn {turn_id}: the outbox lease was lost between two sends")
        return lease

    def _has_time_for_another_send(self) -> bool:
        remaining = self._remaining_ms()
        return remaining is None or remaining > SEND_TIME_RESERVE_MS

    async def _mark_sent(self, session_id: str, turn_id: str, message_ids: Sequence[str]) -> None:
        metrics.add_metric(name="RepliesSent", unit=MetricUnit.Count, value=1)
        # The platform has the reply now. Failing the record here would make SQS redeliver it and
        # send the reply again, so a failed SENT mark is retried briefly and then only logged.
        for attempt in range(3):
            try:
                await self.runtime.outbox.mark_sent(session_id, turn_id, message_ids)
                return
            except Exception:
                if attempt == 2:
                    logger.exception("reply sent but not marked SENT", extra={"turn_id": turn_id})
                    metrics.add_metric(name="SentMarkFailures", unit=MetricUnit.Count, value=1)
                    return
                await asyncio.sleep(0.05 * (attempt + 1))

    async def _take(
        self, channel: Channel, session_id: str, turn_id: str, owner: str
    ) -> Lease | None:
        """The outbox lease for this delivery; None when the reply needs no send. While another
        delivery of the same turn holds a live lease, wait briefly for it to finish; past that,
        fail the record (`ReplyInFlight`) so SQS retries it once that delivery is done."""
        deadline = time.monotonic() + BUSY_WAIT_SECONDS
        while True:
            lease = await self.runtime.outbox.take(
                session_id,
                turn_id,
                channel.name,
                owner=owner,
                lease_seconds=DELIVERY_LEASE_SECONDS,
            )
            if lease.outcome is LeaseOutcome.TAKEN:
                return lease
            if lease.outcome is LeaseOutcome.DONE:
                return None
            if time.monotonic() >= deadline:
                logger.info(
                    "another delivery holds the reply; retrying later", extra={"turn_id": turn_id}
                )
                raise ReplyInFlight(f"turn {turn_id}: another delivery is sending its reply")
            await asyncio.sleep(BUSY_POLL_SECONDS)

    async def _give_up(
        self, channel: Channel, session_id: str, turn_id: str, error: str, attempts: int
    ) -> None:
        """FAILED for good: marked in the outbox, recorded in the session as a
        `delivery_failed` event, counted in `DeliveriesFailed` (alarmed, template.yaml)."""
        from infra.delivery_failures import record_delivery_failure

        logger.error(
            "reply not delivered; given up",
            extra={"turn_id": turn_id, "channel": channel.name, "attempts": attempts},
        )
        # The session's event first: if marking FAILED then fails, the retry finds the record
        # still open, comes back here and finds the event already written.
        await record_delivery_failure(
            self.runtime.sessions,
            self.runtime.clock,
            session_id,
            turn_id,
            channel=channel.name,
            error=error,
            attempts=attempts,
        )
        await self.runtime.outbox.mark_failed(session_id, turn_id, error)
        metrics.add_metric(name=DELIVERIES_FAILED_METRIC, unit=MetricUnit.Count, value=1)


def note_plain_fallbacks(receipt: DeliveryReceipt, turn_id: str) -> None:
    """A rendered reply (buttons, list, blocks) went out as plain numbered text because the
    platform refused it or it broke the platform's rules: a renderer bug, logged and counted."""
    if not receipt.plain_fallbacks:
        return
    logger.error(
        "rendered reply refused; delivered as plain numbered text",
        extra={"turn_id": turn_id, "channel": receipt.channel, "why": receipt.plain_fallbacks},
    )
    metrics.add_metric(
        name=PLAIN_FALLBACKS_METRIC, unit=MetricUnit.Count, value=len(receipt.plain_fallbacks)
    )


async def _release_quietly(
    outbox: DynamoOutbox, session_id: str, turn_id: str, owner: str, error: str
) -> None:
    try:
        await outbox.release(session_id, turn_id, owner, error)
    except Exception:  # the lease runs out instead
        logger.exception("could not release the outbox lease", extra={"turn_id": turn_id})


def _new_session(queued: QueuedMessage) -> SessionState:
    return SessionState(
        id=queued.session_id,
        agent_id=queued.agent_id,
        customer_id=queued.message.customer_id,
        channel=queued.message.channel,
        metadata={"account_id": queued.message.account_id},
    )


# --------------------------------------------------------------------------------------------------
# Lambda entry point


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
# The cold-start metric bypasses POWERTOOLS_METRICS_DISABLED, so honor it here (local runs).
@metrics.log_metrics(capture_cold_start_metric=not is_metrics_disabled())
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """SQS FIFO event → `{"batchItemFailures": [...]}`."""
    runtime = current_runtime()
    records = event.get("Records") or []
    plan = plan_bursts(records, per_message=runtime.settings.reply_per_message)
    worker = TurnWorker(runtime, plan, context)
    response = process_partial_response(
        event=event, record_handler=worker.handle_record, processor=processor, context=context
    )
    failed = len(response.get("batchItemFailures", []))
    metrics.add_metric(name="RecordsFailed", unit=MetricUnit.Count, value=failed)
    if failed:
        logger.warning("batch partially failed", extra={"records": len(records), "failed": failed})
    return dict(response)


__all__ = [
    "Burst",
    "MalformedQueueMessage",
    "OutOfTime",
    "ReplyInFlight",
    "ReplyNotDelivered",
    "TurnWorker",
    "handler",
    "plan_bursts",
    "replies_for",
]
