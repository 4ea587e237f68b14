"""Reply bookkeeping: which agent replies a turn owes its messages, and renderer fallbacks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from engine.sessions.session import Event, EventKind, EventSource, SessionState
from functions.worker_telemetry import logger, metrics
from infra.channels.base import DeliveryReceipt
from infra.turn_queue import QueuedMessage

PLAIN_FALLBACKS_METRIC = "RenderedRepliesRefused"  # a renderer bug: the reply went out as text


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
