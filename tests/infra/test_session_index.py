"""The DynamoDB session list (`infra.aws.session_index`): an item per session under its agent,
one Query a page, gone from the list when the idle session expires (before TTL deletes it)."""

from __future__ import annotations

from engine.sessions.index import SessionIndex
from infra.aws.dynamo_sessions import DynamoSessionStore
from infra.aws.local_stack import LocalStack
from infra.aws.retention import Retention
from tests.contracts.customer_state_contract import ManualClock
from tests.contracts.factories import new_session, turn_commit

DAY = 24 * 3600


async def test_an_idle_session_past_its_ttl_leaves_the_list(local_stack: LocalStack) -> None:
    clock = ManualClock()
    retention = Retention(session_idle=2 * DAY, events=DAY, traces=DAY)
    store = DynamoSessionStore(clock=clock, retention=retention)
    assert isinstance(store, SessionIndex)
    quiet = await store.create(new_session("quiet"))
    busy = await store.create(new_session("busy"))
    await store.commit(turn_commit(quiet, "t1", "hello"))
    clock.advance(DAY)
    await store.commit(turn_commit(busy, "t1", "hello"))  # pushes only its own expiry back
    clock.advance(DAY + 1)

    listed = await store.list_sessions("bank")

    assert [s.session_id for s in listed.sessions] == ["busy"]


async def test_pages_continue_from_the_cursor_without_repeats(local_stack: LocalStack) -> None:
    store = DynamoSessionStore()
    for i in range(5):
        await store.create(new_session(f"s{i}"))
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = await store.list_sessions("bank", limit=2, cursor=cursor)
        seen.extend(s.session_id for s in page.sessions)
        cursor = page.cursor
        if cursor is None:
            break
    assert sorted(seen) == [f"s{i}" for i in range(5)] and len(seen) == 5
