"""The vocabulary of inbound deduplication (the `InboxStore` port), kept apart from
`engine.ports` so the webhook can use it without importing numpy."""

from __future__ import annotations

from enum import StrEnum


class ClaimOutcome(StrEnum):
    """What an inbox claim found for an inbound event."""

    OURS = "ours"  # this owner holds the claim: queue the message, then `mark_queued`
    QUEUED = "queued"  # a duplicate: the message is already on the turn queue
    IN_FLIGHT = "in_flight"  # another request holds a live claim and has not queued it yet
