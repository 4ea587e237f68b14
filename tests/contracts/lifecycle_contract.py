"""The session lifecycle contract: retention (items expire after their TTLs and read as absent; a
session starts afresh over an expired one) and erasing one customer. Both session stores run it:
subclass `RetentionContract` / `ErasureContract` and provide the fixture they name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from engine.privacy.erasure import ERASED, ERASURE_TOMBSTONE_DAYS, person_digest
from engine.privacy.retention import DAY, Retention
from engine.sessions.session import Event, EventKind, EventSource, SessionState

from .customer_state_contract import ManualClock
from .factories import T0, turn_commit

# Short TTLs, so a test moves the clock past them: idle sessions 10 days, events 5, traces 1.
SHORT = Retention(session_idle=10 * DAY, events=5 * DAY, traces=1 * DAY)
Erase = Callable[[str, str], Awaitable[Any]]  # (channel, customer) → a report of what went


def customer_said(offset: int, text: str, turn: str, sender: str) -> Event:
    return Event(
        id=f"ev-{turn}-{offset}",
        offset=offset,
        kind=EventKind.MESSAGE,
        source=EventSource.CUSTOMER,
        created_at=T0,
        turn_id=turn,
        text=text,
        data={"channel_event_id": f"telegram:bot:{turn}", "sender": sender},
    )


async def talk(
    store: Any,
    session_id: str,
    turn: str,
    text: str,
    sender: str,
    trace: dict[str, Any] | None = None,
) -> None:
    """One turn: `sender` says `text`, the agent replies "reply to {turn}"; its trace is
    `trace`, else what it heard."""
    state = await store.load(session_id)
    assert state is not None
    commit = turn_commit(state, turn, f"reply to {turn}")
    said = customer_said(state.next_offset(), text, turn, sender)
    reply = commit.new_events[0].model_copy(update={"offset": said.offset + 1})
    await store.commit(
        type(commit)(
            turn_id=turn,
            expected_version=state.version,
            state=commit.state.model_copy(update={"events": (*state.events, said, reply)}),
            new_events=(said, reply),
            trace=trace or {"turn": turn, "heard": text},
        )
    )


def session(session_id: str, customer: str, channel: str = "telegram") -> SessionState:
    return SessionState(id=session_id, agent_id="bank", customer_id=customer, channel=channel)


class RetentionContract:
    @pytest.fixture
    def store_and_clock(self) -> tuple[Any, ManualClock]:
        raise NotImplementedError("provide a session store built with SHORT and a ManualClock")

    @pytest.fixture
    def erase_on(self) -> Callable[[Any], Erase]:
        raise NotImplementedError("provide the customer erasure over a given session store")

    async def test_an_erasure_is_remembered_for_its_tombstone_days_then_forgotten(
        self, store_and_clock: Any, erase_on: Callable[[Any], Erase]
    ) -> None:
        store, clock = store_and_clock
        erased_at = clock.now()
        await erase_on(store)("telegram", "alice")
        clock.advance(ERASURE_TOMBSTONE_DAYS * DAY - 60)
        assert await store.erased_at("telegram", "alice") == erased_at
        clock.advance(60)
        assert await store.erased_at("telegram", "alice") is None

    async def test_a_trace_expires_after_its_ttl(self, store_and_clock: Any) -> None:
        store, clock = store_and_clock
        await store.create(session("s1", "c1"))
        await talk(store, "s1", "t0", "first", "c1")
        assert await store.trace("s1", "t0") == {"turn": "t0", "heard": "first"}
        clock.advance(2 * DAY)
        assert await store.trace("s1", "t0") is None

    async def test_old_events_expire_first_and_a_live_session_goes_on(
        self, store_and_clock: Any
    ) -> None:
        store, clock = store_and_clock
        await store.create(session("s1", "c1"))
        await talk(store, "s1", "t0", "first", "c1")
        clock.advance(2 * DAY)
        await talk(store, "s1", "t1", "second", "c1")
        clock.advance(4 * DAY)  # t0's events are 6 days old: expired; t1's are 4
        loaded = await store.load("s1")
        assert loaded is not None and [e.text for e in loaded.events] == ["second", "reply to t1"]
        history = await store.events("s1")
        assert history is not None and [e.text for e in history] == ["second", "reply to t1"]
        await talk(store, "s1", "t2", "third", "c1")
        loaded = await store.load("s1")
        assert loaded is not None and loaded.events[-1].text == "reply to t2"

    async def test_an_idle_session_expires_and_starts_afresh_under_its_id(
        self, store_and_clock: Any
    ) -> None:
        store, clock = store_and_clock
        await store.create(session("s1", "c1"))
        await talk(store, "s1", "t0", "first", "c1")
        clock.advance(9 * DAY)
        await talk(store, "s1", "t1", "still here", "c1")  # a write pushes the expiry back
        clock.advance(9 * DAY)
        assert await store.load("s1") is not None
        clock.advance(2 * DAY)  # 11 days idle
        assert await store.load("s1") is None
        assert await store.events("s1") is None
        fresh = await store.create(session("s1", "c1"))
        assert fresh.version == 0 and fresh.events == ()
        await talk(store, "s1", "t0", "new life", "c1")  # same offsets and turn id as before
        loaded = await store.load("s1")
        assert loaded is not None and [e.text for e in loaded.events] == ["new life", "reply to t0"]


@dataclass
class ErasureWorld:
    """A session store, the inbox and variable stores beside it, and the erasure over all three."""

    store: Any
    inbox: Any
    variables: Any
    erase: Erase


class ErasureContract:
    @pytest.fixture
    def erasure_world(self) -> ErasureWorld:
        raise NotImplementedError("provide the stores and their customer erasure")

    @pytest.fixture
    def store_and_erase(self, erasure_world: ErasureWorld) -> tuple[Any, Erase]:
        return erasure_world.store, erasure_world.erase

    async def test_their_inbox_claims_and_context_variables_go_too(
        self, erasure_world: ErasureWorld
    ) -> None:
        w = erasure_world
        await w.store.create(session("alice-1", "alice"))
        await talk(w.store, "alice-1", "a0", "hi", "alice")  # its channel id: telegram:bot:a0
        await w.inbox.claim("telegram", "bot:a0", 3600, owner="w", lease_seconds=30)
        await w.inbox.claim("telegram", "bot:b0", 3600, owner="w", lease_seconds=30)  # bob's
        await w.variables.set_variable("bank", "alice", "tier", "gold")
        await w.variables.set_variable("bank", "bob", "tier", "silver")

        report = await w.erase("telegram", "alice")

        assert report.inbox_claims_deleted == 1
        assert not await w.inbox.is_claimed("telegram", "bot:a0")
        assert await w.inbox.is_claimed("telegram", "bot:b0")
        assert await w.variables.get_variables("bank", "alice") == {}
        assert await w.variables.get_variables("bank", "bob") == {"tier": "silver"}

    async def test_a_customers_own_session_is_deleted_whole(self, store_and_erase: Any) -> None:
        store, erase = store_and_erase
        await store.create(session("alice-1", "alice"))
        await talk(store, "alice-1", "a0", "my passport is X12345678", "alice")
        await store.create(session("bob-1", "bob"))
        await talk(store, "bob-1", "b0", "hello from bob", "bob")

        report = await erase("telegram", "alice")

        assert report.sessions_deleted == ["alice-1"] and report.sessions_redacted == []
        assert await store.load("alice-1") is None
        assert await store.events("alice-1") is None
        assert await store.trace("alice-1", "a0") is None
        bob = await store.load("bob-1")
        assert bob is not None and bob.events[0].text == "hello from bob"

    async def test_in_a_group_only_their_part_goes_and_the_order_stays(
        self, store_and_erase: Any
    ) -> None:
        store, erase = store_and_erase
        await store.create(session("grp", "bob"))
        await talk(store, "grp", "g0", "bob in the group", "bob")
        await talk(store, "grp", "g1", "alice: X12345678", "alice")
        group = await store.load("grp")
        assert group is not None
        await store.replace_state(
            group.model_copy(update={"principals": {"alice": {"passport": "X12345678"}}}),
            expected_version=group.version,
        )

        report = await erase("telegram", "alice")

        assert report.sessions_redacted == ["grp"] and report.sessions_deleted == []
        history = await store.events("grp")
        assert history is not None
        # The agent's reply to her goes too: it answers her, and may quote her values.
        assert [e.text for e in history] == ["bob in the group", "reply to g0", None, None]
        assert history[2].data == history[3].data == {"erased": True}
        state = await store.load("grp")
        assert state is not None and state.principals == {} and state.customer_id == "bob"
        assert await store.trace("grp", "g1") is None
        assert await store.trace("grp", "g0") == {"turn": "g0", "heard": "bob in the group"}

    async def test_the_answers_to_them_go_too_tool_results_and_offered_options(
        self, store_and_erase: Any
    ) -> None:
        store, erase = store_and_erase
        await store.create(session("grp", "bob"))
        await talk(store, "grp", "g0", "bob in the group", "bob")
        state = await store.load("grp")
        assert state is not None
        said = customer_said(2, "my savings please", "g1", "alice")
        lookup = Event(
            id="ev-g1-tool", offset=3, kind=EventKind.TOOL, source=EventSource.SYSTEM,
            created_at=T0, turn_id="g1",
            data={"tool": "find_account", "llm_view": {"account": "SAV-991"}, "sender": "alice"},
        )  # fmt: skip
        offer = Event(
            id="ev-g1-reply", offset=4, kind=EventKind.MESSAGE, source=EventSource.AGENT,
            created_at=T0, turn_id="g1", text="Which one, SAV-991?",
            data={"options": [{"id": "SAV-991", "label": "Savings SAV-991"}]},
        )  # fmt: skip
        commit = turn_commit(state, "g1")
        await store.commit(
            type(commit)(
                turn_id="g1",
                expected_version=state.version,
                state=commit.state.model_copy(
                    update={"events": (*state.events, said, lookup, offer)}
                ),
                new_events=(said, lookup, offer),
                trace={"turn": "g1"},
            )
        )

        await erase("telegram", "alice")

        history = await store.events("grp")
        assert history is not None
        assert [e.text for e in history] == ["bob in the group", "reply to g0", None, None, None]
        assert all(e.data == {"erased": True} for e in history[2:])
        assert "SAV-991" not in str(await store.load("grp"))

    async def test_the_traces_of_later_turns_go_too_their_prompts_quote_them(
        self, store_and_erase: Any
    ) -> None:
        store, erase = store_and_erase
        await store.create(session("grp", "bob"))
        await talk(store, "grp", "g0", "bob in the group", "bob")
        await talk(store, "grp", "g1", "alice: X12345678", "alice")
        # Bob's next turn: its recorded prompt holds the conversation's window, her words in it.
        quoting = {"prompt": "alice: X12345678\nbob: and mine?"}
        await talk(store, "grp", "g2", "and mine?", "bob", trace=quoting)

        await erase("telegram", "alice")

        assert await store.trace("grp", "g2") is None
        assert await store.trace("grp", "g1") is None
        assert await store.trace("grp", "g0") == {"turn": "g0", "heard": "bob in the group"}
        history = await store.events("grp")
        assert history is not None and [e.text for e in history][4] == "and mine?"

    async def test_a_group_the_erased_customer_opened_stays_for_the_others(
        self, store_and_erase: Any
    ) -> None:
        store, erase = store_and_erase
        await store.create(session("grp", "alice"))
        await talk(store, "grp", "g0", "alice opens", "alice")
        await talk(store, "grp", "g1", "bob here", "bob")

        report = await erase("telegram", "alice")

        assert report.sessions_redacted == ["grp"]
        state = await store.load("grp")
        assert state is not None and state.customer_id == ERASED
        assert [e.text for e in state.events] == [None, None, "bob here", "reply to g1"]

    async def test_the_erasure_is_remembered_for_a_session_created_afresh(
        self, store_and_erase: Any
    ) -> None:
        """Their own session is gone whole, a group keeps them in its state: either way, when
        they were erased is kept (by digest) for a message of theirs still queued."""
        store, erase = store_and_erase
        await store.create(session("alice-1", "alice"))
        await talk(store, "alice-1", "a0", "hi", "alice")
        await store.create(session("grp", "bob"))
        await talk(store, "grp", "g0", "bob here", "bob")
        await talk(store, "grp", "g1", "alice here", "alice")
        assert await store.erased_at("telegram", "alice") is None

        await erase("telegram", "alice")

        erased_at = await store.erased_at("telegram", "alice")
        assert erased_at is not None
        assert await store.erased_at("telegram", "bob") is None
        assert await store.erased_at("sms", "alice") is None  # another channel: another person
        group = await store.load("grp")
        assert group is not None
        assert group.erased_senders == {person_digest("telegram", "alice"): erased_at}
        await erase("telegram", "alice")  # again: remembered from the last call
        again = await store.erased_at("telegram", "alice")
        assert again is not None and again >= erased_at

    async def test_erasing_twice_finds_nothing_more_and_other_channels_are_apart(
        self, store_and_erase: Any
    ) -> None:
        store, erase = store_and_erase
        await store.create(session("alice-tg", "alice"))
        await talk(store, "alice-tg", "a0", "hi", "alice")
        await store.create(session("alice-sms", "alice", channel="sms"))
        await talk(store, "alice-sms", "s0", "hi by sms", "alice")

        await erase("telegram", "alice")
        again = await erase("telegram", "alice")

        assert again.sessions_deleted == again.sessions_redacted == []
        assert await store.load("alice-sms") is not None  # another channel: another person
