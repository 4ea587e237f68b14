"""The `SessionStore` contract. Every implementation runs these tests: subclass
`SessionStoreContract` and provide a `session_store` fixture."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime

import pytest

from engine.errors import SessionConflict
from engine.ports import SessionStore
from engine.sessions.history import EVENT_WINDOW
from engine.sessions.index import SessionIndex
from engine.sessions.session import CollectedValue, PendingInterrupt

from .factories import message, new_session, turn_commit


async def run_turn(
    store: SessionStore,
    session_id: str,
    turn_id: str,
    text: str,
    *,
    after_first_load: asyncio.Barrier | None = None,
) -> int:
    """What the turn worker does: load → compute → commit, reloading after a conflict.
    Returns the number of attempts."""
    attempts = 0
    while True:
        attempts += 1
        state = await store.load(session_id)
        assert state is not None
        if after_first_load is not None and attempts == 1:
            await after_first_load.wait()  # both turns have read the same version
        try:
            await store.commit(turn_commit(state, turn_id, text))
            return attempts
        except SessionConflict:
            continue


class SessionStoreContract:
    @pytest.fixture
    def session_store(self) -> SessionStore:
        raise NotImplementedError("provide a session_store fixture")

    async def test_unknown_session_loads_as_none(self, session_store: SessionStore) -> None:
        assert await session_store.load("nope") is None

    async def test_created_session_loads_back_equal(self, session_store: SessionStore) -> None:
        state = new_session(events=(message(0, "hello"), message(1, "I want to transfer money")))
        assert await session_store.create(state) == state
        assert await session_store.load("s1") == state

    async def test_creating_an_existing_session_returns_the_stored_one(
        self, session_store: SessionStore
    ) -> None:
        await session_store.create(new_session(channel="web"))
        again = await session_store.create(new_session(channel="sms"))
        assert again.channel == "web"

    async def test_every_state_field_survives_a_commit(self, session_store: SessionStore) -> None:
        state = await session_store.create(new_session())
        rich = state.model_copy(
            update={
                "journey_paths": {"transfer": ("root", "s0"), "stock": ("root", None)},
                "completed_journeys": ("balance",),
                "suspended_journeys": ("transfer",),
                "applied_guideline_ids": ("g1", "g2"),
                "pending_customer_guideline_ids": ("g3",),
                "collected": (
                    CollectedValue(
                        journey_id="transfer", node_id="s1", name="amount", value=12.5, turn_id="t1"
                    ),
                ),
                "variables": {"tier": "gold", "limits": {"daily": 1000}},
                "customer_tags": ("vip",),
                "pending_interrupt": PendingInterrupt(
                    tool="pick_account", call_id="c1", kind="selector", options=({"id": "a"},)
                ),
                "processed_event_ids": ("m1",),
                "metadata": {"locale": "zh-CN", "at": datetime(2026, 5, 1, tzinfo=UTC).isoformat()},
            }
        )
        commit = turn_commit(rich, "t1", "你好，请问要转多少钱？")
        assert await session_store.commit(commit) is True
        loaded = await session_store.load("s1")
        assert loaded == commit.state

    async def test_a_replys_buttons_are_stored_beside_it_not_in_the_window_a_turn_reads(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session())
        commit = turn_commit(state, "t1", "Transfer 100 to 1234324?")
        options = [{"id": "confirm", "label": "Yes"}, {"id": "cancel", "label": "No"}]
        view = {"type": "card", "title": "Transfer"}
        (reply,) = commit.new_events
        reply = reply.model_copy(update={"data": {"options": options, "view": view, "k": 1}})
        await session_store.commit(
            dataclasses.replace(
                commit,
                new_events=(reply,),
                state=commit.state.model_copy(update={"events": (reply,)}),
            )
        )
        loaded = await session_store.load("s1")
        assert loaded is not None and loaded.events[0].data == {"k": 1}
        history = await session_store.events("s1")
        assert history is not None and history[0] == reply  # as committed, buttons included

    async def test_a_first_turn_may_create_the_session(self, session_store: SessionStore) -> None:
        commit = turn_commit(new_session(), "t1", "hi")
        assert await session_store.commit(commit) is True
        loaded = await session_store.load("s1")
        assert loaded is not None and loaded.version == 1
        assert [e.text for e in loaded.events] == ["hi"]

    async def test_commits_append_events_in_order(self, session_store: SessionStore) -> None:
        state = await session_store.create(new_session(events=(message(0, "hello"),)))
        for i in range(3):
            await session_store.commit(turn_commit(state, f"t{i}", f"reply {i}", f"more {i}"))
            loaded = await session_store.load("s1")
            assert loaded is not None
            state = loaded
        assert [e.offset for e in state.events] == list(range(7))
        assert [e.text for e in state.events][-2:] == ["reply 2", "more 2"]
        assert state.version == 3

    async def test_loaded_events_are_the_stored_ones_not_the_commits_state_copy(
        self, session_store: SessionStore
    ) -> None:
        # The store persists new_events; state.events in the commit is not trusted twice.
        state = await session_store.create(new_session())
        commit = turn_commit(state, "t1", "only once")
        await session_store.commit(commit)
        loaded = await session_store.load("s1")
        assert loaded is not None and [e.text for e in loaded.events] == ["only once"]

    async def test_masked_events_replace_earlier_events_in_the_same_commit(
        self, session_store: SessionStore
    ) -> None:
        # A password typed before the turn that recognised it: that turn rewrites the message.
        state = await session_store.create(
            new_session(events=(message(0, "hi"), message(1, "user seldo pw monkey")))
        )
        commit = turn_commit(state, "t1", "logged in")
        masked = message(1, "user seldo pw •••")
        await session_store.commit(dataclasses.replace(commit, masked_events=(masked,)))
        loaded = await session_store.load("s1")
        assert loaded is not None
        assert [e.text for e in loaded.events] == ["hi", "user seldo pw •••", "logged in"]

    async def test_masked_events_may_not_stand_in_for_new_ones(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session(events=(message(0, "hi"),)))
        commit = turn_commit(state, "t1", "reply")
        late = message(1, "not earlier")
        with pytest.raises(ValueError, match="earlier events only"):
            await session_store.commit(dataclasses.replace(commit, masked_events=(late,)))
        assert (await session_store.load("s1")) == state

    async def test_a_stale_version_raises_session_conflict(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session())
        await session_store.commit(turn_commit(state, "t1", "first"))
        with pytest.raises(SessionConflict, match="reload the session"):
            await session_store.commit(turn_commit(state, "t2", "stale"))
        loaded = await session_store.load("s1")
        assert loaded is not None and [e.text for e in loaded.events] == ["first"]

    async def test_a_missing_session_conflicts_unless_expected_version_is_zero(
        self, session_store: SessionStore
    ) -> None:
        ghost = new_session(version=4)
        with pytest.raises(SessionConflict):
            await session_store.commit(turn_commit(ghost, "t1", "x"))
        assert await session_store.load("s1") is None

    async def test_an_event_offset_already_taken_conflicts(
        self, session_store: SessionStore
    ) -> None:
        await session_store.create(new_session(events=(message(0, "a"), message(1, "b"))))
        stale_view = new_session(events=(message(0, "a"),))  # missed event 1, same version 0
        with pytest.raises(SessionConflict, match=r"offset.* already taken"):
            await session_store.commit(turn_commit(stale_view, "t1", "collides with offset 1"))

    async def test_a_replayed_turn_returns_false_and_appends_nothing(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session())
        commit = turn_commit(state, "t1", "once")
        assert await session_store.commit(commit) is True
        assert await session_store.commit(commit) is False
        later = await session_store.load("s1")
        assert later is not None
        await session_store.commit(turn_commit(later, "t2", "twice"))
        assert await session_store.commit(commit) is False  # still a replay after later turns
        final = await session_store.load("s1")
        assert final is not None
        assert [e.text for e in final.events] == ["once", "twice"]
        assert final.version == 2

    async def test_a_malformed_commit_is_rejected_before_writing(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session())
        commit = turn_commit(state, "t1", "x")
        bad = type(commit)(
            turn_id="t1",
            expected_version=0,
            state=commit.state.model_copy(update={"version": 5}),
            new_events=commit.new_events,
        )
        with pytest.raises(ValueError, match="expected_version"):
            await session_store.commit(bad)
        assert (await session_store.load("s1")) == state

    async def test_the_trace_of_a_turn_is_kept(self, session_store: SessionStore) -> None:
        state = await session_store.create(new_session())
        trace = {
            "matched": ["g1"],
            "llm_calls": [{"model": "m", "prompt_tokens": 12}],
            "note": "ünïcode ✓",
        }
        await session_store.commit(turn_commit(state, "t1", "x", trace=trace))
        assert await session_store.trace("s1", "t1") == trace
        assert await session_store.trace("s1", "unknown") is None
        assert await session_store.trace("other", "t1") is None

    async def test_two_racing_turns_both_land_in_order_without_duplicates(
        self, session_store: SessionStore
    ) -> None:
        await session_store.create(new_session())
        barrier = asyncio.Barrier(2)
        attempts = await asyncio.gather(
            run_turn(session_store, "s1", "tA", "from A", after_first_load=barrier),
            run_turn(session_store, "s1", "tB", "from B", after_first_load=barrier),
        )
        assert sorted(attempts) == [1, 2]  # exactly one loser, which retried once
        final = await session_store.load("s1")
        assert final is not None
        assert final.version == 2
        assert sorted(e.text or "" for e in final.events) == ["from A", "from B"]
        assert [e.offset for e in final.events] == [0, 1]
        loser_turn = "tA" if attempts[0] == 2 else "tB"
        assert final.events[1].turn_id == loser_turn  # the loser re-applied on top of the winner
        assert final.committed_turn_ids[-1] == loser_turn

    async def test_a_long_session_loads_only_its_recent_window(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session())
        turns = EVENT_WINDOW  # two events each: twice the window
        for i in range(turns):
            await session_store.commit(turn_commit(state, f"t{i}", f"reply {i}", f"more {i}"))
            loaded = await session_store.load("s1")
            assert loaded is not None
            state = loaded
        assert [e.offset for e in state.events] == list(range(turns, 2 * turns))
        assert state.next_offset() == 2 * turns and state.version == turns
        # A racing turn on the windowed state still conflicts, then lands after a reload.
        await session_store.commit(turn_commit(state, "tx", "winner"))
        with pytest.raises(SessionConflict):
            await session_store.commit(turn_commit(state, "ty", "loser"))
        assert await session_store.commit(turn_commit(state, "tx", "winner")) is False
        assert await session_store.commit(turn_commit(state, "t0", "reply 0")) is False

    async def test_two_racing_turns_past_the_window_both_land_once_in_order(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session())
        for i in range(EVENT_WINDOW):
            await session_store.commit(turn_commit(state, f"t{i}", f"reply {i}"))
            loaded = await session_store.load("s1")
            assert loaded is not None
            state = loaded
        barrier = asyncio.Barrier(2)
        attempts = await asyncio.gather(
            run_turn(session_store, "s1", "tA", "from A", after_first_load=barrier),
            run_turn(session_store, "s1", "tB", "from B", after_first_load=barrier),
        )
        assert sorted(attempts) == [1, 2]
        history = await session_store.events("s1", after=-1, limit=1000)
        assert history is not None
        assert [e.offset for e in history] == list(range(EVENT_WINDOW + 2))
        assert sorted(e.text or "" for e in history[-2:]) == ["from A", "from B"]
        final = await session_store.load("s1")
        assert final is not None and len(final.events) == EVENT_WINDOW
        assert final.version == EVENT_WINDOW + 2

    async def test_the_whole_history_is_read_page_by_page(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session())
        for i in range(EVENT_WINDOW):
            await session_store.commit(turn_commit(state, f"t{i}", f"reply {i}", f"more {i}"))
            loaded = await session_store.load("s1")
            assert loaded is not None
            state = loaded
        pages, after = [], -1
        while page := await session_store.events("s1", after=after, limit=25):
            pages.append(page)
            after = page[-1].offset
        assert [len(p) for p in pages][:2] == [25, 25]
        assert [e.offset for p in pages for e in p] == list(range(2 * EVENT_WINDOW))
        assert await session_store.events("nope") is None

    async def test_the_session_list_follows_every_commit(self, session_store: SessionStore) -> None:
        # `engine.sessions.index`: the summary is written with the turn, from the events written
        assert isinstance(session_store, SessionIndex)
        state = await session_store.create(new_session())
        page = await session_store.list_sessions("bank")
        assert [(s.session_id, s.events, s.last_activity) for s in page.sessions] == [
            ("s1", 0, None)
        ]
        commit = turn_commit(state, "t1", "first", "second")
        await session_store.commit(commit)
        (summary,) = (await session_store.list_sessions("bank")).sessions
        assert summary.events == 2
        assert summary.last_activity == commit.new_events[-1].created_at
        assert (await session_store.list_sessions("another-agent")).sessions == []

    async def test_a_commit_rewrites_the_traces_of_turns_whose_events_it_masked(
        self, session_store: SessionStore
    ) -> None:
        state = await session_store.create(new_session())
        await session_store.commit(turn_commit(state, "t1", "pw hunter22", trace={"p": "hunter22"}))
        loaded = await session_store.load("s1")
        assert loaded is not None
        second = dataclasses.replace(
            turn_commit(loaded, "t2", "logged in", trace={"p": "ok"}),
            masked_traces={"t1": {"p": "•••"}},
        )
        await session_store.commit(second)
        assert await session_store.trace("s1", "t1") == {"p": "•••"}
        assert await session_store.trace("s1", "t2") == {"p": "ok"}

    async def test_a_conflicting_commit_leaves_the_session_list_as_it_was(
        self, session_store: SessionStore
    ) -> None:
        assert isinstance(session_store, SessionIndex)
        state = await session_store.create(new_session())
        await session_store.commit(turn_commit(state, "t1", "hi"))
        with pytest.raises(SessionConflict):  # computed on version 0: another turn was first
            await session_store.commit(turn_commit(state, "t2", "a", "b", "c"))
        (summary,) = (await session_store.list_sessions("bank")).sessions
        assert summary.events == 1


__all__ = ["SessionStoreContract", "run_turn"]
