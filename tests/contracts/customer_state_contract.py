"""Contracts of the inbound dedup store and the context variable store. Subclass and provide
`inbox_and_clock` (an inbox reading the given `ManualClock`) / `variable_store` fixtures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine.sessions.inbox import ClaimOutcome


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None):
        self.at = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


LEASE = 30


async def claim(inbox: Any, channel: str, event_id: str, ttl: int, owner: str) -> ClaimOutcome:
    outcome: ClaimOutcome = await inbox.claim(
        channel, event_id, ttl, owner=owner, lease_seconds=LEASE
    )
    return outcome


async def claim_and_queue(inbox: Any, channel: str, event_id: str, ttl: int, owner: str) -> None:
    assert await claim(inbox, channel, event_id, ttl, owner) is ClaimOutcome.OURS
    assert await inbox.mark_queued(channel, event_id, owner) is True


class InboxContract:
    @pytest.fixture
    def inbox_and_clock(self) -> tuple[Any, ManualClock]:
        raise NotImplementedError("provide an inbox_and_clock fixture")

    async def test_the_first_claim_wins_and_duplicates_of_a_queued_message_lose(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        inbox, _ = inbox_and_clock
        await claim_and_queue(inbox, "whatsapp", "wamid.1", 3600, "a")
        assert await claim(inbox, "whatsapp", "wamid.1", 3600, "b") is ClaimOutcome.QUEUED
        assert await claim(inbox, "whatsapp", "wamid.1", 3600, "a") is ClaimOutcome.QUEUED
        assert await inbox.is_claimed("whatsapp", "wamid.1") is True

    async def test_claims_are_per_channel(self, inbox_and_clock: tuple[Any, ManualClock]) -> None:
        inbox, _ = inbox_and_clock
        assert await claim(inbox, "whatsapp", "1", 60, "a") is ClaimOutcome.OURS
        assert await claim(inbox, "telegram", "1", 60, "b") is ClaimOutcome.OURS

    async def test_the_same_owner_claiming_again_gets_its_own_claim(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        """A retried write whose first response was lost must not read as its own duplicate."""
        inbox, _ = inbox_and_clock
        assert await claim(inbox, "web", "e1", 60, "a") is ClaimOutcome.OURS
        assert await claim(inbox, "web", "e1", 60, "a") is ClaimOutcome.OURS
        assert await inbox.mark_queued("web", "e1", "a") is True

    async def test_an_unqueued_claim_is_in_flight_until_its_lease_runs_out_then_taken_over(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        inbox, clock = inbox_and_clock
        assert await claim(inbox, "web", "e1", 3600, "dead") is ClaimOutcome.OURS
        clock.advance(LEASE - 1)
        assert await claim(inbox, "web", "e1", 3600, "retry") is ClaimOutcome.IN_FLIGHT
        clock.advance(1)
        assert await claim(inbox, "web", "e1", 3600, "retry") is ClaimOutcome.OURS
        assert await inbox.mark_queued("web", "e1", "dead") is False  # no longer its claim
        assert await inbox.mark_queued("web", "e1", "retry") is True
        clock.advance(LEASE * 10)
        assert await claim(inbox, "web", "e1", 3600, "late") is ClaimOutcome.QUEUED

    async def test_an_expired_claim_reads_as_absent_and_can_be_reclaimed(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        inbox, clock = inbox_and_clock
        await claim_and_queue(inbox, "web", "e1", 10, "a")
        clock.advance(9)
        assert await claim(inbox, "web", "e1", 10, "b") is ClaimOutcome.QUEUED
        clock.advance(2)  # past expires_at; the item may still physically exist
        assert await inbox.is_claimed("web", "e1") is False
        assert await claim(inbox, "web", "e1", 10, "c") is ClaimOutcome.OURS
        assert await claim(inbox, "web", "e1", 10, "d") is ClaimOutcome.IN_FLIGHT

    async def test_a_released_claim_can_be_claimed_again(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        inbox, _ = inbox_and_clock
        await claim(inbox, "web", "e1", 60, "a")
        await inbox.release("web", "e1", "a")
        assert await inbox.is_claimed("web", "e1") is False
        assert await claim(inbox, "web", "e1", 60, "b") is ClaimOutcome.OURS

    async def test_only_the_owner_of_an_unqueued_claim_can_release_it(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        inbox, _ = inbox_and_clock
        await claim(inbox, "web", "e1", 60, "a")
        await inbox.release("web", "e1", "b")
        assert await inbox.is_claimed("web", "e1") is True
        await inbox.mark_queued("web", "e1", "a")
        await inbox.release("web", "e1", "a")  # queued: a late release must not reopen it
        assert await claim(inbox, "web", "e1", 60, "c") is ClaimOutcome.QUEUED

    async def test_a_messages_one_moment_line_is_noted_once_whoever_asks(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        """Two deliveries of a deferred message (a redelivery, a second worker) both ask to
        send its "one moment" line: only the first is told to."""
        inbox, clock = inbox_and_clock
        await claim_and_queue(inbox, "telegram", "e1", 3600, "a")
        assert await inbox.note_one_moment("telegram", "e1", 3600) is True
        clock.advance(60)
        assert await inbox.note_one_moment("telegram", "e1", 3600) is False
        assert await inbox.note_one_moment("telegram", "e2", 3600) is True  # per message
        assert await inbox.note_one_moment("slack", "e1", 3600) is True  # per channel
        # The claim is unchanged: still a queued duplicate for a retried webhook.
        assert await claim(inbox, "telegram", "e1", 3600, "b") is ClaimOutcome.QUEUED

    async def test_a_one_moment_note_without_a_claim_reads_as_queued_until_it_expires(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        """A message queued without a claim (an interrupt result from the management API)."""
        inbox, clock = inbox_and_clock
        assert await inbox.note_one_moment("web", "interrupt:c1", 100) is True
        assert await inbox.is_claimed("web", "interrupt:c1") is True
        assert await claim(inbox, "web", "interrupt:c1", 100, "b") is ClaimOutcome.QUEUED
        clock.advance(101)
        assert await inbox.is_claimed("web", "interrupt:c1") is False


class VariableStoreContract:
    @pytest.fixture
    def variable_store(self) -> Any:
        raise NotImplementedError("provide a variable_store fixture")

    async def test_unknown_customer_has_no_values(self, variable_store: Any) -> None:
        assert await variable_store.get_variables("bank", "telegram", "c1") == {}

    async def test_values_are_json_and_per_customer(self, variable_store: Any) -> None:
        await variable_store.set_variable("bank", "telegram", "c1", "tier", "gold")
        await variable_store.set_variable(
            "bank", "telegram", "c1", "limits", {"daily": 1000, "cards": (1, 2)}
        )
        await variable_store.set_variable("bank", "telegram", "c2", "tier", "silver")
        await variable_store.set_variable("shop", "telegram", "c1", "tier", "bronze")
        assert await variable_store.get_variables("bank", "telegram", "c1") == {
            "tier": "gold",
            "limits": {"daily": 1000, "cards": [1, 2]},
        }
        assert await variable_store.get_variables("bank", "telegram", "c2") == {"tier": "silver"}

    async def test_set_replaces_and_delete_forgets(self, variable_store: Any) -> None:
        await variable_store.set_variable("bank", "telegram", "c1", "tier", "gold")
        await variable_store.set_variable("bank", "telegram", "c1", "tier", "platinum")
        await variable_store.set_variable("bank", "telegram", "c1", "nickname", None)
        assert await variable_store.get_variables("bank", "telegram", "c1") == {
            "tier": "platinum",
            "nickname": None,
        }
        await variable_store.delete_variable("bank", "telegram", "c1", "tier")
        await variable_store.delete_variable("bank", "telegram", "c1", "never-set")
        assert await variable_store.get_variables("bank", "telegram", "c1") == {"nickname": None}

    async def test_the_same_id_on_two_channels_is_two_profiles(self, variable_store: Any) -> None:
        await variable_store.set_variable("bank", "telegram", "4242", "tier", "gold")
        await variable_store.set_variable("bank", "slack", "4242", "nickname", "Bo")
        assert await variable_store.get_variables("bank", "telegram", "4242") == {"tier": "gold"}
        assert await variable_store.get_variables("bank", "slack", "4242") == {"nickname": "Bo"}
        await variable_store.delete_variable("bank", "slack", "4242", "tier")  # not slack's
        assert await variable_store.get_variables("bank", "telegram", "4242") == {"tier": "gold"}

    async def test_values_that_are_not_json_are_rejected(self, variable_store: Any) -> None:
        with pytest.raises(TypeError):
            await variable_store.set_variable("bank", "telegram", "c1", "bad", object())
