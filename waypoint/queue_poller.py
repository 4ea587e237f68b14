"""Lambda's SQS event source mapping, locally: the poller `waypoint.local_server` runs to feed
the turn worker, with the record shape the mapping builds. It also keeps, per session, why
records failed, for `waypoint chat` to tell in one line."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger("waypoint.local")


def queue_records(messages: Sequence[Mapping[str, Any]], queue_arn: str) -> list[dict[str, Any]]:
    """Lambda event records for messages received from an SQS FIFO queue, built the way the SQS
    event source mapping builds them."""
    records = []
    for message in messages:
        attributes = dict(message.get("Attributes", {}))
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": {
                    "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
                    "SentTimestamp": attributes.get("SentTimestamp", "0"),
                    "SequenceNumber": attributes.get("SequenceNumber", "0"),
                    "MessageGroupId": attributes["MessageGroupId"],
                    "SenderId": attributes.get("SenderId", "AIDAEXAMPLE"),
                    "MessageDeduplicationId": attributes.get("MessageDeduplicationId", ""),
                    "ApproximateFirstReceiveTimestamp": attributes.get(
                        "ApproximateFirstReceiveTimestamp", "0"
                    ),
                },
                "messageAttributes": {},
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            }
        )
    return records


def _deferred_groups(messages: Sequence[Mapping[str, Any]], processor: Any) -> set[str]:
    """The message groups (sessions) of the batch whose turn was deferred (`TurnDeferred`)."""
    from functions.worker_backpressure import TurnDeferred

    groups = {m["MessageId"]: m["Attributes"]["MessageGroupId"] for m in messages}
    deferred: set[str] = set()
    for record, info in zip(processor.fail_messages, processor.exceptions, strict=False):
        message_id = getattr(record, "message_id", None) or dict(record).get("messageId")
        if info and isinstance(info[1], TurnDeferred) and message_id in groups:
            deferred.add(groups[str(message_id)])
    return deferred


class QueuePoller(threading.Thread):
    """Lambda's SQS event source mapping, locally: batches → worker handler → delete successes.
    Failed records become visible again after `retry_after` seconds and are retried."""

    def __init__(self, sqs: Any, queue_url: str, *, batch_size: int = 10, retry_after: int = 1):
        super().__init__(name="waypoint-queue-poller", daemon=True)
        self.sqs = sqs
        self.queue_url = queue_url
        self.batch_size = batch_size
        self.retry_after = retry_after
        self.batches = 0
        self.failed_records = 0
        # Why records of a message group (a session) failed, oldest first: `waypoint chat` tells
        # the customer's side in one line instead of waiting on a turn that keeps failing.
        self.failures: dict[str, list[str]] = {}
        self.on_turns: Any = None  # called with the sessions whose turns succeeded in a batch
        # Held while a batch is handled: whoever changes the runtime (a republish) waits for it.
        self.busy = threading.Lock()
        self._stop_event = threading.Event()
        arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
        self.queue_arn = arn["Attributes"]["QueueArn"]

    def stop(self) -> None:
        """Stop after the batch in hand; a long poll waiting for messages returns at once."""
        from infra.aws.moto_fidelity import wake_long_polls

        self._stop_event.set()
        wake_long_polls()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.poll_once(wait_seconds=1)
            except Exception:  # keep polling: the next batch may succeed (and the demo says so)
                log.exception("local worker invocation failed")
                time.sleep(0.5)

    def poll_once(self, wait_seconds: int = 0) -> int:
        """Receive one batch and invoke the worker on it; returns the number of records."""
        from functions import worker
        from infra.aws.lambda_routing import LocalLambdaContext

        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            AttributeNames=["All"],
            WaitTimeSeconds=wait_seconds,
        ).get("Messages", [])
        if not messages:
            return 0
        event = {"Records": queue_records(messages, self.queue_arn)}
        with self.busy:
            try:
                response = worker.handler(event, LocalLambdaContext("waypoint-local-worker"))
            except Exception as exc:  # the whole invocation failed: every record comes back
                self._record_invocation_failure(messages, exc)
                self._retry_soon(messages)
                raise
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        self.batches += 1
        self.failed_records += len(failed)
        self._record_failures(messages, failed, worker.processor)
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                ],
            )
        # A turn deferred because the model is rate-limited: the worker set its session's back-off
        # itself (functions.worker_backpressure); every other failure is retried soon.
        deferred = _deferred_groups(messages, worker.processor)
        self._retry_soon(
            [
                m
                for m in messages
                if m["MessageId"] in failed and m["Attributes"]["MessageGroupId"] not in deferred
            ]
        )
        if self.on_turns is not None and done:
            self.on_turns(sorted({m["Attributes"]["MessageGroupId"] for m in done}))
        return len(messages)

    def _record_failures(
        self, messages: Sequence[Mapping[str, Any]], failed: set[str], processor: Any
    ) -> None:
        """Keep, per session, why each failed record failed (the worker's own exception)."""
        from waypoint.agent_source import failure_summary

        reasons: dict[str, str] = {}
        for record, info in zip(processor.fail_messages, processor.exceptions, strict=False):
            message_id = getattr(record, "message_id", None) or dict(record).get("messageId")
            if message_id and info and info[1] is not None:
                reasons[str(message_id)] = failure_summary(info[1])
        for m in messages:
            if m["MessageId"] in failed:
                group = m["Attributes"]["MessageGroupId"]
                reason = reasons.get(m["MessageId"], "the turn worker failed")
                self.failures.setdefault(group, []).append(reason)

    def _retry_soon(self, messages: Sequence[Mapping[str, Any]]) -> None:
        for m in messages:
            self.sqs.change_message_visibility(
                QueueUrl=self.queue_url,
                ReceiptHandle=m["ReceiptHandle"],
                VisibilityTimeout=self.retry_after,
            )

    def _record_invocation_failure(
        self, messages: Sequence[Mapping[str, Any]], exc: Exception
    ) -> None:
        from waypoint.agent_source import failure_summary

        for m in messages:
            group = m["Attributes"]["MessageGroupId"]
            self.failures.setdefault(group, []).append(failure_summary(exc))

    def failures_of(self, session_id: str) -> list[str]:
        return list(self.failures.get(session_id, ()))
