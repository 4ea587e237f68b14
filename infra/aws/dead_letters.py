"""Taking an erased person's messages out of the turn queue's dead-letter queue (issue #33).

A message whose turn failed every attempt waits in the DLQ, up to 14 days, for an operator to
inspect and redrive it; it carries the customer's words and ids. SQS cannot delete by content, so
erasure scans it: messages are received, the person's are deleted, the others are made visible
again at once.

The DLQ is FIFO: a message group (a session) hands out its messages in order, the next only once
the one before is deleted or visible again. Someone else's message at the head of a group would
hide the person's behind it. So a head that may hide theirs (a message of the same channel, or
one the scan cannot read) is moved to its group's tail — sent again with the same group and body,
marked with the scan's id, then deleted — and the scan goes on until it meets a message it moved
itself: the group has been seen whole, in order, and its order is kept. A message of another
channel is simply held (its group is a session of that channel: none of theirs is in it).

What moving a message changes: its id, its receive count, and its 14 days start again from the
erasure; it was sent to the DLQ directly, so it has no source queue recorded — redrive it with the
turn queue as the destination (docs/RELIABILITY.md). Messages someone else holds in flight at
that moment (an operator reading the DLQ) are not seen; the scan is skipped when SQS counts no
message at all (its counts lag by up to a minute). Both are said in the erasure's log line.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import ValidationError

from infra.handoff_changes import QueuedPersonMessage
from infra.turn_queue import QueuedMessage

DEAD_LETTER_QUEUE_URL_ENV = "WAYPOINT_DEAD_LETTER_QUEUE_URL"
SCAN_ATTRIBUTE = "waypoint-erasure-scan"  # set on the messages a scan moved to their group's tail
HELD_SECONDS = 60  # how long a scan holds what it keeps, if it dies before letting go
POLL_SECONDS = 1  # long polling: a short poll may answer "empty" while messages wait
_COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


class Verdict(Enum):
    THEIRS = "theirs"  # deleted
    KEPT = "kept"  # held, then visible again: its group cannot hold theirs
    KEPT_LOOKING_BEHIND = "kept, looking behind"  # moved to its group's tail, seen again last


@dataclass
class DeadLetterScan:
    """One scan of the DLQ at `queue_url`: `judge(body)` says what each message is; `check_time`
    raises when the caller's time is spent (what is held is let go first)."""

    sqs: Any
    queue_url: str
    check_time: Callable[[], None]
    poll_seconds: int = POLL_SECONDS

    def purge(self, judge: Callable[[str], Verdict]) -> int:
        """Delete the messages `judge` calls theirs; returns how many."""
        if not self._counts_any():
            return 0
        scan = uuid.uuid4().hex
        held: list[str] = []
        deleted = 0
        try:
            while True:
                self.check_time()
                batch = self.sqs.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=10,
                    VisibilityTimeout=HELD_SECONDS,
                    WaitTimeSeconds=self.poll_seconds,
                    AttributeNames=["MessageGroupId"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
                if not batch:
                    return deleted
                for message in batch:
                    attributes = message.get("MessageAttributes") or {}
                    if attributes.get(SCAN_ATTRIBUTE, {}).get("StringValue") == scan:
                        held.append(message["ReceiptHandle"])  # back round: its group is seen
                        continue
                    verdict = judge(message["Body"])
                    if verdict is Verdict.THEIRS:
                        self._delete(message)
                        deleted += 1
                    elif verdict is Verdict.KEPT_LOOKING_BEHIND:
                        self._move_to_tail(message, scan)
                    else:
                        held.append(message["ReceiptHandle"])
        finally:
            for handle in held:  # visible again now, not after HELD_SECONDS
                self.sqs.change_message_visibility(
                    QueueUrl=self.queue_url, ReceiptHandle=handle, VisibilityTimeout=0
                )

    def _counts_any(self) -> bool:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=list(_COUNTS)
        )["Attributes"]
        return any(int(attributes.get(name, 0)) for name in _COUNTS)

    def _delete(self, message: dict[str, Any]) -> None:
        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def _move_to_tail(self, message: dict[str, Any], scan: str) -> None:
        # Sent before the original goes: a scan cut short between the two leaves a copy, never
        # a loss (a redriven copy is a duplicate the turn's idempotency absorbs).
        attributes = dict(message.get("MessageAttributes") or {})
        attributes[SCAN_ATTRIBUTE] = {"DataType": "String", "StringValue": scan}
        dedup = hashlib.sha256(f"{scan}:{message['MessageId']}".encode()).hexdigest()
        self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=message["Body"],
            MessageGroupId=message["Attributes"]["MessageGroupId"],
            MessageDeduplicationId=dedup,
            MessageAttributes=attributes,
        )
        self._delete(message)


def judge_for(channel: str, person: str, sessions_theirs: set[str]) -> Callable[[str], Verdict]:
    """What each dead letter is, erasing `person` on `channel`: their own messages, and a
    person's messages (a handoff) to the sessions deleted whole as theirs (`sessions_theirs`),
    are theirs. A message of another channel is in a group no message of theirs is in."""

    def judge(body: str) -> Verdict:
        to_customer = QueuedPersonMessage.parse(body)
        if to_customer is not None:
            if to_customer.session_id in sessions_theirs:
                return Verdict.THEIRS
            return Verdict.KEPT_LOOKING_BEHIND
        try:
            queued = QueuedMessage.model_validate_json(body)
        except ValidationError:  # not ours to read: kept, and whatever is behind it looked at
            return Verdict.KEPT_LOOKING_BEHIND
        if queued.message.channel != channel:
            return Verdict.KEPT
        if queued.message.customer_id == person:
            return Verdict.THEIRS
        return Verdict.KEPT_LOOKING_BEHIND

    return judge
