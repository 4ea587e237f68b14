"""Contracts of the inbound dedup store and the context variable store. Subclass and provide
`inbox_and_clock` (an inbox reading the given `ManualClock`) / `variable_store` fixtures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None):
        self.at = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


class InboxContract:
    @pytest.fixture
    def inbox_and_clock(self) -> tuple[Any, ManualClock]:
        raise NotImplementedError("provide an inbox_and_clock fixture")

    async def test_the_first_claim_wins_and_duplicates_lose(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        inbox, _ = inbox_and_clock
        assert await inbox.claim("whatsapp", "wamid.1", 3600) is True
        assert await inbox.claim("whatsapp", "wamid.1", 3600) is False
        assert await inbox.is_claimed("whatsapp", "wamid.1") is True

    async def test_claims_are_per_channel(self, inbox_and_clock: tuple[Any, ManualClock]) -> None:
        inbox, _ = inbox_and_clock
        assert await inbox.claim("whatsapp", "1", 60) is True
        assert await inbox.claim("telegram", "1", 60) is True

    async def test_an_expired_claim_reads_as_absent_and_can_be_reclaimed(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        inbox, clock = inbox_and_clock
        assert await inbox.claim("web", "e1", 10) is True
        clock.advance(9)
        assert await inbox.claim("web", "e1", 10) is False
        clock.advance(2)  # past expires_at; the item may still physically exist
        assert await inbox.is_claimed("web", "e1") is False
        assert await inbox.claim("web", "e1", 10) is True
        assert await inbox.claim("web", "e1", 10) is False

    async def test_a_released_claim_can_be_claimed_again(
        self, inbox_and_clock: tuple[Any, ManualClock]
    ) -> None:
        inbox, _ = inbox_and_clock
        await inbox.claim("web", "e1", 60)
        await inbox.release("web", "e1")
        assert await inbox.is_claimed("web", "e1") is False
        assert await inbox.claim("web", "e1", 60) is True


class VariableStoreContract:
    @pytest.fixture
    def variable_store(self) -> Any:
        raise NotImplementedError("provide a variable_store fixture")

    async def test_unknown_customer_has_no_values(self, variable_store: Any) -> None:
        assert await variable_store.get_variables("bank", "c1") == {}

    async def test_values_are_json_and_per_customer(self, variable_store: Any) -> None:
        await variable_store.set_variable("bank", "c1", "tier", "gold")
        await variable_store.set_variable("bank", "c1", "limits", {"daily": 1000, "cards": (1, 2)})
        await variable_store.set_variable("bank", "c2", "tier", "silver")
        await variable_store.set_variable("shop", "c1", "tier", "bronze")
        assert await variable_store.get_variables("bank", "c1") == {
            "tier": "gold",
            "limits": {"daily": 1000, "cards": [1, 2]},
        }
        assert await variable_store.get_variables("bank", "c2") == {"tier": "silver"}

    async def test_set_replaces_and_delete_forgets(self, variable_store: Any) -> None:
        await variable_store.set_variable("bank", "c1", "tier", "gold")
        await variable_store.set_variable("bank", "c1", "tier", "platinum")
        await variable_store.set_variable("bank", "c1", "nickname", None)
        assert await variable_store.get_variables("bank", "c1") == {
            "tier": "platinum",
            "nickname": None,
        }
        await variable_store.delete_variable("bank", "c1", "tier")
        await variable_store.delete_variable("bank", "c1", "never-set")
        assert await variable_store.get_variables("bank", "c1") == {"nickname": None}

    async def test_values_that_are_not_json_are_rejected(self, variable_store: Any) -> None:
        with pytest.raises(TypeError):
            await variable_store.set_variable("bank", "c1", "bad", object())
