"""The worker's part in a handoff (`infra.handoff_changes`, `infra.handoff_slack`): messages
recorded outside a turn (a person's, a ticket's notice), a person's replies in a support
thread, and the Slack support thread a handed-off session's turns post to.

Each is sent like a turn's reply (`ReplyDelivery`: outbox lease, retries, give-up), with no
turn run. Posting to the support thread never fails the turn or the delivery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from functions.worker_bursts import Burst
from functions.worker_delivery import ReplyDelivery
from functions.worker_replies import PendingReply
from functions.worker_telemetry import logger
from infra.handoff_changes import QueuedPersonMessage
from infra.runtime import Runtime

if TYPE_CHECKING:
    from engine.turn import TurnOutput
    from infra.handoff_changes import OutsideTurnDelivery


async def deliver_person_message(
    runtime: Runtime, delivery: ReplyDelivery, job: QueuedPersonMessage
) -> None:
    """A message recorded outside a turn (a person's, a ticket's notice): sent like a
    turn's reply (outbox lease, retries, give-up), with no turn run."""
    from infra.handoff_changes import delivery_of_job

    now = runtime.clock.now()
    outside = await delivery_of_job(runtime.sessions, now, job)
    await deliver_outside_turn(runtime, delivery, outside)
    if outside is not None:
        from infra.handoff_slack import mirror_to_thread

        try:
            await mirror_to_thread(runtime, outside)
        except Exception:
            logger.exception("could not post to the support thread")


async def deliver_outside_turn(
    runtime: Runtime, delivery: ReplyDelivery, outside: OutsideTurnDelivery | None
) -> None:
    """Send a message that no turn answered with, through its session's channel."""
    channel = runtime.channels.get(outside.channel) if outside else None
    if outside is None or channel is None:
        return
    pending = PendingReply(outside.record_id, outside.event, None, outside.reply_to)
    await delivery.deliver(channel, outside.session_id, pending)


async def support_replies(runtime: Runtime, delivery: ReplyDelivery, burst: Burst) -> None:
    """A person's replies (or a hand-back) in a support thread, delivered to the customer."""
    from infra.handoff_slack import person_wrote

    for queued in burst.requests:
        outside = await person_wrote(runtime, queued.message)
        await deliver_outside_turn(runtime, delivery, outside)


async def to_support_thread(runtime: Runtime, output: TurnOutput) -> None:
    """The Slack support thread of a handed-off session (infra.handoff_slack): opened by
    the turn that handed off, then the customer's messages. Never fails the turn."""
    from infra.handoff_slack import after_turn

    try:
        await after_turn(runtime, output.state, output.trace.turn_id)
    except Exception:
        logger.exception("could not post to the support thread")
