"""The outbox record's lease over DynamoDB (moto): one delivery holds a turn's reply at a time,
a retried write recognises its own lease, an expired lease is taken over, and a finished record
(SENT or FAILED) is never taken again."""

from __future__ import annotations

from infra.aws.local_stack import LocalStack
from infra.outbox import DynamoOutbox, LeaseOutcome, OutboxStatus
from tests.contracts.customer_state_contract import ManualClock

LEASE = 60


async def take(outbox: DynamoOutbox, owner: str) -> tuple[LeaseOutcome, OutboxStatus, int]:
    lease = await outbox.take("s1", "t1", "telegram", owner=owner, lease_seconds=LEASE)
    return lease.outcome, lease.entry.status, lease.entry.attempts


async def test_one_delivery_holds_the_lease_and_a_second_is_told_it_is_busy(
    local_stack: LocalStack,
) -> None:
    outbox = DynamoOutbox(clock=ManualClock())
    assert await take(outbox, "a") == (LeaseOutcome.TAKEN, OutboxStatus.SENDING, 1)
    assert await take(outbox, "b") == (LeaseOutcome.BUSY, OutboxStatus.SENDING, 1)
    assert await take(outbox, "a") == (LeaseOutcome.TAKEN, OutboxStatus.SENDING, 2)  # its own


async def test_an_expired_lease_is_taken_over_and_the_old_holder_cannot_release_it(
    local_stack: LocalStack,
) -> None:
    clock = ManualClock()
    outbox = DynamoOutbox(clock=clock)
    await take(outbox, "dead")
    clock.advance(LEASE - 1)
    assert (await take(outbox, "next"))[0] is LeaseOutcome.BUSY
    clock.advance(1)
    assert await take(outbox, "next") == (LeaseOutcome.TAKEN, OutboxStatus.SENDING, 2)
    assert await outbox.release("s1", "t1", "dead", "late") is False
    entry = await outbox.get("s1", "t1")
    assert entry is not None and entry.owner == "next"


async def test_a_released_record_is_pending_and_can_be_taken_by_anyone(
    local_stack: LocalStack,
) -> None:
    outbox = DynamoOutbox(clock=ManualClock())
    await take(outbox, "a")
    assert await outbox.release("s1", "t1", "a", "HTTP 503") is True
    entry = await outbox.get("s1", "t1")
    assert entry is not None and (entry.status, entry.last_error) == (
        OutboxStatus.PENDING,
        "HTTP 503",
    )
    assert await take(outbox, "b") == (LeaseOutcome.TAKEN, OutboxStatus.SENDING, 2)


async def test_sent_and_failed_records_are_done_for_every_later_delivery(
    local_stack: LocalStack,
) -> None:
    clock = ManualClock()
    outbox = DynamoOutbox(clock=clock)
    await take(outbox, "a")
    assert await outbox.mark_sent("s1", "t1", ["m1"]) is True
    clock.advance(LEASE * 10)
    assert await take(outbox, "b") == (LeaseOutcome.DONE, OutboxStatus.SENT, 1)
    assert await outbox.mark_failed("s1", "t1", "too late") is False  # SENT stays SENT

    await outbox.take("s1", "t2", "telegram", owner="a", lease_seconds=LEASE)
    assert await outbox.mark_failed("s1", "t2", "HTTP 403") is True
    lease = await outbox.take("s1", "t2", "telegram", owner="b", lease_seconds=LEASE)
    assert (lease.outcome, lease.entry.status) == (LeaseOutcome.DONE, OutboxStatus.FAILED)
