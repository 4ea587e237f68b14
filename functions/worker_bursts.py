"""Which records of an SQS batch are answered together: one burst per session.

The messages of one session in a batch (a customer typing three lines in a row) are answered by
ONE turn that sees all of them; `WAYPOINT_REPLY_PER_MESSAGE=1` plans one burst per message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from engine.errors import WaypointError
from infra.handoff_changes import QueuedPersonMessage
from infra.turn_queue import QueuedMessage


class MalformedQueueMessage(WaypointError):
    """A queue message that is not a `QueuedMessage`; it fails until it lands in the DLQ."""


@dataclass
class Burst:
    """The records of one session answered by one turn (in queue order)."""

    session_id: str
    record_ids: list[str] = field(default_factory=list)
    requests: list[QueuedMessage] = field(default_factory=list)
    answered: bool = False


BatchPlan = dict[str, Burst | MalformedQueueMessage | QueuedPersonMessage]


def plan_bursts(records: Iterable[dict[str, Any]], *, per_message: bool) -> BatchPlan:
    """Record id → its burst (or why it cannot be read). All records of a session in the batch
    form one burst (FIFO keeps them in order within their group), unless `per_message`."""
    plan: BatchPlan = {}
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
