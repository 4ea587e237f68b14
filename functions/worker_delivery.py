"""Delivering a turn's reply through the outbox (`infra.outbox`): lease, send, retry, give up.

The reply is sent through the channel (`infra.channels`) under the turn's outbox lease
(SENDING, one owner, 60 s), and the record flips to SENT. A redelivered message sends only if
the record is not SENT; a second delivery of the same turn running concurrently waits briefly
for the lease holder, then fails its record for a later retry instead of sending too. A
retryable failure is retried once in the invocation (1 s later), then the record goes back to
PENDING and the SQS record fails; after `MAX_DELIVERY_ATTEMPTS` (5) attempts, or a refusal for
good (bad token, user blocked the bot), the reply is marked FAILED, a `delivery_failed` status
event is added to the session and the record is acknowledged: one undeliverable reply must not
block the session's queue.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence

from aws_lambda_powertools.metrics import MetricUnit

from engine.errors import WaypointError
from functions.worker_replies import PendingReply, note_plain_fallbacks
from functions.worker_telemetry import logger, metrics
from infra.channels.base import Channel
from infra.channels.errors import DeliveryError
from infra.outbox import DynamoOutbox, Lease, LeaseOutcome, outbound_reply
from infra.runtime import Runtime

DELIVERIES_FAILED_METRIC = "DeliveriesFailed"  # alarmed (template.yaml: DeliveryFailedAlarm)
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


class ReplyNotDelivered(WaypointError):
    """The platform could not take the reply now; the outbox goes back to PENDING, SQS retries."""


class ReplyInFlight(ReplyNotDelivered):
    """Another delivery of the same turn holds the outbox lease; SQS retries this record."""


class ReplyDelivery:
    """Sends replies under the outbox's lease for one invocation; `remaining_ms` says how much
    of the invocation is left (None outside Lambda), to decide on an inline retry."""

    def __init__(self, runtime: Runtime, remaining_ms: Callable[[], int | None]) -> None:
        self.runtime = runtime
        self.remaining_ms = remaining_ms

    async def deliver(self, channel: Channel, session_id: str, pending: PendingReply) -> None:
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
        remaining = self.remaining_ms()
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


async def _release_quietly(
    outbox: DynamoOutbox, session_id: str, turn_id: str, owner: str, error: str
) -> None:
    try:
        await outbox.release(session_id, turn_id, owner, error)
    except Exception:  # the lease runs out instead
        logger.exception("could not release the outbox lease", extra={"turn_id": turn_id})
