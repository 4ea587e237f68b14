"""Backpressure when the model is rate-limited: a deferred turn goes back to the queue with a
back-off, and its customer hears "one moment" once.

A turn the model could not answer because it stayed rate-limited (`engine.errors.ModelRateLimited`,
raised when `WAYPOINT_ON_MODEL_RATE_LIMIT=defer`, the default; or a 429 that escaped the engine,
e.g. from the embedder) committed nothing. Its records are reported as batch item failures — and,
by `SqsFifoPartialProcessor`, every later record of its session in the batch — and the worker sets
their visibility itself (`ChangeMessageVisibility`): `DEFER_BASE_SECONDS`, doubling with each
receive (`ApproximateReceiveCount`), at least the model's Retry-After, at most `DEFER_CAP_SECONDS`.
Without it the queue's VisibilityTimeout (720 s) would hold them. The session's FIFO group stays
locked while they are in flight, so nothing overtakes them; other sessions in the batch go on.

**The span before the dead-letter queue.** The queue's maxReceiveCount is 8 (template.yaml): a
message deferred on every receive waits 2 + 4 + 8 + 16 + 32 + 60 + 60 + 60 = 242 s of back-off
(plus each attempt's own time, its in-turn retries included) before SQS moves it to the
dead-letter queue — about 4 to 5 minutes of an unbroken rate limit. Why the cap is 60 s: a
provider's requests- and tokens-per-minute limits refill within a minute, so a turn retried once a
minute meets a fresh window each time, and a customer whose message comes back after the limit
lifted waits at most one more minute; a longer cap would stretch the span but leave customers
waiting long after the model has room again. Dead-lettered turns are alarmed and redriven as
docs/deploy.md says; the session's later messages were answered meanwhile.

**What the customer sees.** The typing indicator during each attempt (`functions.worker`, where
the channel has one), and, once the message will have waited `WAYPOINT_ONE_MOMENT_AFTER_SECONDS`
(8) by its next attempt, the agent's `one_moment` line — at most once per message, across
redeliveries and concurrent workers: the line is sent only by the delivery whose conditional write
on the message's inbox claim (`InboxStore.note_one_moment`) succeeded. A send that fails is not
retried (at most once, by design).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from engine.errors import ModelRateLimited, WaypointError, is_rate_limit
from functions.worker_bursts import Burst
from functions.worker_telemetry import logger, metrics
from infra.channels.base import OutboundReply

if TYPE_CHECKING:
    from infra.runtime import Runtime
    from infra.runtime_settings import RuntimeSettings
    from infra.turn_queue import QueuedMessage

DEFER_BASE_SECONDS = 2  # the first back-off; doubles with each receive
DEFER_CAP_SECONDS = 60  # a minute: the provider's rate window (see the module's docstring)
# How long a claim created for the line lives: as long as the webhook's (functions.webhook).
ONE_MOMENT_CLAIM_TTL_SECONDS = 8 * 24 * 3600
TURNS_DEFERRED_METRIC = "TurnsDeferred"


class TurnDeferred(WaypointError):
    """The model is rate-limited: the turn committed nothing and its records come back after a
    back-off (reported as batch item failures)."""


def deferral_of(error: BaseException, settings: RuntimeSettings) -> ModelRateLimited | None:
    """The rate limit `error` stands for, when its turn is to be deferred; None otherwise."""
    if isinstance(error, ModelRateLimited):
        return error
    if settings.on_model_rate_limit == "defer" and is_rate_limit(error):
        return ModelRateLimited(str(error), retry_after=error.retry_after)
    return None


def visibility_backoff(receive_count: int, retry_after: float | None = None) -> int:
    """Seconds until a deferred record is delivered again: `DEFER_BASE_SECONDS` doubling per
    receive, at least the model's Retry-After, at most `DEFER_CAP_SECONDS`."""
    backoff = float(DEFER_BASE_SECONDS * 2 ** (max(1, receive_count) - 1))
    if retry_after is not None:
        backoff = max(backoff, math.ceil(retry_after))
    return int(min(DEFER_CAP_SECONDS, backoff))


def receive_count(record: Mapping[str, Any]) -> int:
    """The record's ApproximateReceiveCount (1 when missing or unreadable)."""
    raw = (record.get("attributes") or {}).get("ApproximateReceiveCount", "1")
    try:
        return max(1, int(raw))
    except (TypeError, ValueError):
        return 1


class Backpressure:
    """The deferrals of one batch: `defer` as each burst is deferred, `give_back` once the batch's
    failures are known."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.deferred: dict[str, int] = {}  # session id → its records' visibility, seconds

    async def defer(
        self, burst: Burst, record: Mapping[str, Any], limited: ModelRateLimited
    ) -> TurnDeferred:
        """Note the burst as deferred (its back-off from `record`, the one being handled), tell
        its customer "one moment" if owed; returns the error to fail the record with."""
        delay = visibility_backoff(receive_count(record), limited.retry_after)
        self.deferred[burst.session_id] = delay
        metrics.add_metric(name=TURNS_DEFERRED_METRIC, unit=MetricUnit.Count, value=1)
        logger.warning(
            "turn deferred: the model is rate-limited",
            extra={
                "session_id": burst.session_id,
                "messages": len(burst.requests),
                "receive_count": receive_count(record),
                "visible_again_in_s": delay,
            },
        )
        await self._one_moment(burst, delay)
        return TurnDeferred(f"the model is rate-limited; retried in {delay} s: {limited}")

    def give_back(self, records: Iterable[Mapping[str, Any]], failed: set[str]) -> int:
        """Set the visibility of every failed record of a deferred session to its back-off (all
        of them alike: the group unlocks when its first record is visible again). Returns how
        many were set; one that cannot be set comes back after the queue's visibility timeout."""
        changed = 0
        for record in records:
            session = (record.get("attributes") or {}).get("MessageGroupId")
            delay = self.deferred.get(str(session))
            if delay is None or record.get("messageId") not in failed:
                continue
            try:
                self.runtime.sqs.change_message_visibility(
                    QueueUrl=self.runtime.queue_url,
                    ReceiptHandle=record["receiptHandle"],
                    VisibilityTimeout=delay,
                )
                changed += 1
            except Exception:  # it still comes back, after the queue's visibility timeout
                logger.exception(
                    "could not set a deferred record's visibility", extra={"session_id": session}
                )
        return changed

    async def _one_moment(self, burst: Burst, delay: int) -> None:
        """Send the agent's `one_moment` line when a message of the burst will have waited the
        configured time by its next attempt and no delivery has sent it for that message."""
        last = burst.requests[-1].message
        channel = self.runtime.channels.get(last.channel)
        if channel is None or not last.reply_to:
            return  # e.g. "api": its clients read the session's events
        threshold = self.runtime.settings.one_moment_after_seconds
        now = self.runtime.clock.now()
        owed = [
            q
            for q in burst.requests
            if (now - q.message.received_at).total_seconds() + delay >= threshold
        ]
        noted = [q for q in owed if await self._note(q)]
        if not noted:
            return
        try:
            text, language = await self._line(burst)
            reply = OutboundReply(
                text=text,
                reply_to=last.reply_to,
                id=f"one-moment:{noted[0].message.event_id}",
                language=language,
            )
            await channel.send(reply, self.runtime.http)
        except Exception as error:  # at most once: never sent again for these messages
            logger.warning(
                "the one-moment line was not delivered",
                extra={"channel": channel.name, "error": f"{type(error).__name__}: {error}"},
            )
            return
        metrics.add_metric(name="OneMomentLinesSent", unit=MetricUnit.Count, value=1)

    async def _note(self, queued: QueuedMessage) -> bool:
        message = queued.message
        claim_id = f"{message.account_id}:{message.event_id}"  # the webhook's claim id
        try:
            return await self.runtime.inbox.note_one_moment(
                message.channel, claim_id, ONE_MOMENT_CLAIM_TTL_SECONDS
            )
        except Exception:  # unsure whether another delivery sent it: do not
            logger.exception(
                "could not note the one-moment line", extra={"channel": message.channel}
            )
            return False

    async def _line(self, burst: Burst) -> tuple[str, str]:
        """The agent's `one_moment` line and its language: the session's, else the one the
        customer wrote in, else the agent's default."""
        from engine.language.detection import detect

        queued = burst.requests[-1]
        agent = await self.runtime.agents.get(queued.agent_id)
        lines = agent.config.lines()
        session = await self.runtime.sessions.load(burst.session_id)
        language = (session.language if session else None) or detect(
            queued.message.text or "", agent.config.languages
        )
        language = language or lines.default
        return lines.line("one_moment", language), language


__all__ = [
    "DEFER_BASE_SECONDS",
    "DEFER_CAP_SECONDS",
    "Backpressure",
    "TurnDeferred",
    "deferral_of",
    "visibility_backoff",
]
