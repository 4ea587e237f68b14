"""Erasing a customer whose session ran for thousands of turns: one call deletes it all, 25 items
per BatchWriteItem, through DynamoDB's throttling; a call that runs out of time says so and the
next call finishes. Nothing of them is left: events, their buttons, turn markers, traces, S3
bodies, inbox claims, the in-flight index entry."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

from engine.sessions.session import Event, EventKind, EventSource, SessionState
from infra.aws.clients import client
from infra.aws.dynamo_inbox import DynamoInboxStore
from infra.aws.dynamo_sessions import DynamoSessionStore
from infra.aws.dynamo_table import session_pk
from infra.aws.erasure import CustomerErasure
from infra.aws.local_stack import LocalStack
from tests.contracts.customer_state_contract import ManualClock
from tests.contracts.factories import turn_commit
from tests.infra.test_erasure import everything, talk

pytestmark = pytest.mark.long(35)  # about that many seconds: scheduled first (tests/conftest.py)

TURNS = 700  # 1,400 events, 700 buttons, 700 markers, 700 traces, 700 inbox claims: 4,200 items
FEWER_TURNS = 250  # for the failure windows: still ~80 batches of 25
SESSION = "tg-dave"


def _turn_events(n: int, created: Any) -> tuple[Event, Event]:
    said = Event(
        id=f"ev-d{n}",
        offset=2 * n,
        kind=EventKind.MESSAGE,
        source=EventSource.CUSTOMER,
        created_at=created,
        turn_id=f"d{n}",
        text=f"dave says {n}",
        data={"channel_event_id": f"telegram:bot:d{n}", "sender": "dave"},
    )
    reply = Event(
        id=f"ev-r{n}",
        offset=2 * n + 1,
        kind=EventKind.MESSAGE,
        source=EventSource.AGENT,
        created_at=created,
        turn_id=f"d{n}",
        text=f"Shall I send it, dave? ({n})",
        data={"options": [{"id": "confirm", "label": "Yes"}, {"id": "cancel", "label": "No"}]},
    )
    return said, reply


def _batch_put(items: list[dict[str, Any]]) -> None:
    ddb, table = client("dynamodb"), os.environ["WAYPOINT_TABLE"]
    for start in range(0, len(items), 25):
        requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        ddb.batch_write_item(RequestItems={table: requests})


async def seed_long_session(
    store: DynamoSessionStore, clock: ManualClock, turns: int = TURNS
) -> None:
    """Dave's session as thousands of turns would have left it (written in batches: committing
    them one by one would take minutes on moto), then a few real turns on top: one with a trace
    big enough to be offloaded to S3, one leaving a journey in flight."""
    await store.create(
        SessionState(id=SESSION, agent_id="bank", customer_id="dave", channel="telegram")
    )
    pk = {"S": session_pk(SESSION)}
    items: list[dict[str, Any]] = []
    for n in range(turns):
        events = _turn_events(n, clock.now())
        items += [put["Put"]["Item"] for put in store._items.event_puts(SESSION, events)]
        items.append({"pk": pk, "sk": {"S": f"TURN#d{n}"}, "version": {"N": str(n + 1)}})
        items.append({"pk": pk, "sk": {"S": f"TRACE#d{n}"}, "body": {"S": f'{{"turn": {n}}}'}})
    _batch_put(items)
    client("dynamodb").update_item(
        TableName=os.environ["WAYPOINT_TABLE"],
        Key={"pk": pk, "sk": {"S": "META"}},
        UpdateExpression="SET next_offset = :n, version = :v",
        ExpressionAttributeValues={":n": {"N": str(2 * turns)}, ":v": {"N": str(turns)}},
    )
    inbox = DynamoInboxStore(clock=clock)
    for n in range(turns):
        await inbox.claim("telegram", f"bot:d{n}", 3600, owner="w", lease_seconds=30)
    big = base64.b64encode(os.urandom(450_000)).decode()
    state = await store.load(SESSION)
    assert state is not None
    commit = turn_commit(state, "big", "a long answer", trace={"notes": big})
    await store.commit(commit)
    state = await store.load(SESSION)
    assert state is not None
    in_journey = turn_commit(state, "journey", "To which account, dave?")
    await store.commit(
        type(in_journey)(
            turn_id="journey",
            expected_version=state.version,
            state=in_journey.state.model_copy(
                update={"journey_paths": {"transfer": ("ask_destination",)}}
            ),
            new_events=in_journey.new_events,
            trace={"turn": "journey"},
        )
    )


def leftovers(stack: LocalStack) -> list[str]:
    """Everything in the table or bucket that belongs to dave."""
    items, keys = everything(stack)
    found = [
        f"{item['pk']['S']} {item['sk']['S']}"
        for item in items
        if "dave" in repr(item) or SESSION in repr(item) or "bot:d" in item["pk"]["S"]
    ]
    return found + [f"s3://{key}" for key in keys if SESSION in key]


@pytest.fixture
def world(local_stack: LocalStack) -> tuple[LocalStack, DynamoSessionStore, ManualClock]:
    clock = ManualClock()
    return local_stack, DynamoSessionStore(clock=clock), clock


async def test_one_call_erases_a_session_of_thousands_of_turns(world) -> None:
    stack, store, clock = world
    await store.create(SessionState(id="tg-erin", agent_id="bank", customer_id="erin"))
    await talk(store, "tg-erin", "e0", "erin stays", "erin")
    await seed_long_session(store, clock)
    assert await store.sessions_in_flight("bank")
    before = leftovers(stack)
    assert len(before) > 6 * TURNS and any(k.startswith("s3://") for k in before)

    report = await CustomerErasure(store).erase("telegram", "dave")

    assert report.complete and report.detail is None
    assert leftovers(stack) == []
    assert report.sessions_deleted == [SESSION]
    assert report.inbox_claims_deleted == TURNS
    assert report.items_deleted >= 5 * TURNS  # events, buttons, markers, traces
    assert report.objects_deleted >= 1
    assert await store.sessions_in_flight("bank") == []
    erin = await store.load("tg-erin")
    assert erin is not None and erin.events[0].text == "erin stays"


class Throttled:
    """The table's client, but every BatchWriteItem processes only its first 10 requests and
    hands the rest back as UnprocessedItems, as DynamoDB does under throttling."""

    def __init__(self, ddb: Any) -> None:
        self._ddb = ddb
        self.batches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ddb, name)

    def batch_write_item(self, RequestItems: dict[str, list[Any]]) -> dict[str, Any]:
        self.batches += 1
        ((table, requests),) = RequestItems.items()
        self._ddb.batch_write_item(RequestItems={table: requests[:10]})
        rest = requests[10:]
        return {"UnprocessedItems": {table: rest} if rest else {}}


async def test_items_dynamodb_leaves_unprocessed_are_sent_again(world) -> None:
    stack, store, clock = world
    await seed_long_session(store, clock, FEWER_TURNS)
    throttled = Throttled(store._table.ddb)
    store._table.ddb = throttled

    report = await CustomerErasure(store, sleep=lambda _: None).erase("telegram", "dave")

    assert report.complete
    assert leftovers(stack) == []
    assert throttled.batches > report.items_deleted / 25  # the rest was sent again


async def test_an_erasure_that_runs_out_of_time_says_so_and_the_next_call_finishes(
    world,
) -> None:
    stack, store, clock = world
    await seed_long_session(store, clock, FEWER_TURNS)
    ticks = iter(range(10**9))  # a clock that moves one second per check

    calls = []
    while True:
        erasure = CustomerErasure(store, time_budget=20, clock=lambda: float(next(ticks)))
        report = await erasure.erase("telegram", "dave")
        calls.append(report)
        if report.complete:
            break
        assert report.detail and "call again" in report.detail
        assert len(calls) < 100
    assert len(calls) > 1  # it did not fit one call
    assert leftovers(stack) == []
    # While it was unfinished, the session was still found through its index each time.
    assert sum(r.items_deleted for r in calls) >= 5 * FEWER_TURNS
    clock.advance(1)
    assert await store.load(SESSION) is None
