"""Erasing one customer leaves nothing of them in the table or the bucket — and nothing of anyone
else is lost. Retention: expired items read as absent and a session can start afresh over them."""

from __future__ import annotations

import base64
import itertools
import os
from datetime import datetime
from typing import Any

import pytest

from engine.privacy.erasure import legacy_person_digest
from engine.sessions.session import Event, EventKind, EventSource, SessionState
from infra.aws.clients import client
from infra.aws.dynamo_inbox import DynamoInboxStore
from infra.aws.dynamo_sessions import DynamoSessionStore
from infra.aws.dynamo_variables import DynamoVariableStore
from infra.aws.erasure import CustomerErasure
from infra.aws.local_stack import LocalStack
from infra.aws.retention import DAY, InvalidRetention, Retention
from tests.contracts.customer_state_contract import ManualClock
from tests.contracts.factories import turn_commit

pytestmark = pytest.mark.long(40)  # about that many seconds: scheduled first (tests/conftest.py)

SECRET_WORDS = "my passport number is X12345678"


def said(offset: int, text: str, turn: str, sender: str, channel: str = "telegram") -> Event:
    return Event(
        id=f"ev-{turn}-{offset}",
        offset=offset,
        kind=EventKind.MESSAGE,
        source=EventSource.CUSTOMER,
        created_at=ManualClock().now(),
        turn_id=turn,
        text=text,
        data={"channel_event_id": f"{channel}:bot:{turn}", "sender": sender},
    )


async def talk(
    store: DynamoSessionStore,
    session_id: str,
    turn: str,
    text: str,
    sender: str,
    trace: dict[str, Any] | None = None,
) -> None:
    state = await store.load(session_id)
    assert state is not None
    commit = turn_commit(state, turn, f"reply to {turn}")
    channel = state.channel
    mine = said(state.next_offset(), text, turn, sender, channel)
    reply = commit.new_events[0].model_copy(update={"offset": mine.offset + 1})
    new_state = commit.state.model_copy(update={"events": (*state.events, mine, reply)})
    await store.commit(
        type(commit)(
            turn_id=turn,
            expected_version=state.version,
            state=new_state,
            new_events=(mine, reply),
            trace=trace or {"turn": turn, "heard": text},
        )
    )


def everything(stack: LocalStack) -> tuple[list[dict[str, Any]], list[str]]:
    """Every item in the table and every object key in the bucket."""
    ddb = client("dynamodb")
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": os.environ["WAYPOINT_TABLE"]}
    while True:
        page = ddb.scan(**kwargs)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    objects = client("s3").list_objects_v2(Bucket=os.environ["WAYPOINT_BUCKET"]).get("Contents", [])
    return items, [o["Key"] for o in objects]


def mentions(stack: LocalStack, *needles: str) -> list[str]:
    """Items and objects holding any needle, decoded (gzip bodies and S3 objects included)."""
    import gzip

    found = []
    items, keys = everything(stack)
    for item in items:
        text = repr(item)
        if "body_gz" in item:
            text += gzip.decompress(item["body_gz"]["B"]).decode()
        if any(n in text for n in needles):
            found.append(f"{item['pk']['S']} {item['sk']['S']}")
    s3 = client("s3")
    for key in keys:
        body = s3.get_object(Bucket=os.environ["WAYPOINT_BUCKET"], Key=key)["Body"].read()
        text = key + gzip.decompress(body).decode(errors="replace")
        if any(n in text for n in needles):
            found.append(f"s3://{key}")
    return found


def ttl_sweep(stack: LocalStack, now: datetime) -> int:
    """What DynamoDB's TTL does (moto never does it): delete the items expired by `now`."""
    ddb = stack.client("dynamodb")
    swept = 0
    for page in ddb.get_paginator("scan").paginate(TableName=stack.table_name):
        for item in page["Items"]:
            if "expires_at" in item and int(item["expires_at"]["N"]) <= now.timestamp():
                key = {"pk": item["pk"], "sk": item["sk"]}
                ddb.delete_item(TableName=stack.table_name, Key=key)
                swept += 1
    return swept


@pytest.fixture
def world(local_stack: LocalStack):
    clock = ManualClock()
    return local_stack, DynamoSessionStore(clock=clock), clock


async def test_erasing_a_customer_leaves_nothing_of_them_and_keeps_everyone_else(world) -> None:
    stack, store, clock = world
    inbox, variables = DynamoInboxStore(clock=clock), DynamoVariableStore()
    # Alice's own conversation, long enough to have left the window, with a body big enough to
    # be offloaded to S3 and inbox claims for her messages.
    big = base64.b64encode(os.urandom(450_000)).decode()
    alice = SessionState(
        id="tg-alice", agent_id="bank", customer_id="alice", channel="telegram",
        metadata={"notes": big},
    )  # fmt: skip
    await store.create(alice)
    for i in range(40):
        await talk(store, "tg-alice", f"a{i}", f"{SECRET_WORDS} ({i})", "alice")
        await inbox.claim("telegram", f"bot:a{i}", 3600, owner="w", lease_seconds=30)
    await variables.set_variable("bank", "telegram", "alice", "tier", "gold")
    # Bob's conversation, and a group where both Bob (its customer) and Alice write.
    await store.create(
        SessionState(id="tg-bob", agent_id="bank", customer_id="bob", channel="telegram")
    )
    await talk(store, "tg-bob", "b0", "hello from bob", "bob")
    await store.create(
        SessionState(id="tg-group", agent_id="bank", customer_id="bob", channel="telegram")
    )
    await talk(store, "tg-group", "g0", "bob in the group", "bob")
    await talk(store, "tg-group", "g1", SECRET_WORDS, "alice")
    await talk(store, "tg-group", "g2", "bob again", "bob")
    group = await store.load("tg-group")
    assert group is not None
    await store.replace_state(
        group.model_copy(update={"principals": {"alice": {"passport": "X12345678"}}}),
        expected_version=group.version,
    )
    assert mentions(stack, "X12345678", "alice")  # the adversary: there was plenty to find

    report = await CustomerErasure(store).erase("telegram", "alice")

    assert mentions(stack, "X12345678", "alice") == []
    assert report.sessions_deleted == ["tg-alice"]
    assert report.sessions_redacted == ["tg-group"]
    assert report.objects_deleted >= 1 and report.inbox_claims_deleted == 40
    assert await store.load("tg-alice") is None
    assert await variables.get_variables("bank", "telegram", "alice") == {}
    # Bob keeps his session and the group, whose order is intact around the erased message.
    assert [e.text for e in (await store.load("tg-bob")).events] == [
        "hello from bob",
        "reply to b0",
    ]
    history = await store.events("tg-group")
    assert [e.text for e in history] == [
        "bob in the group", "reply to g0", None, None, "bob again", "reply to g2",
    ]  # fmt: skip
    assert history[2].data == {"erased": True}
    assert await store.trace("tg-group", "g1") is None
    assert await store.trace("tg-group", "g0") == {"turn": "g0", "heard": "bob in the group"}
    # Erasing again finds nothing more: idempotent.
    again = await CustomerErasure(store).erase("telegram", "alice")
    assert again.sessions_deleted == again.sessions_redacted == [] and again.items_deleted == 0


async def test_a_redaction_cut_short_by_its_time_budget_leaves_nothing_of_them_once_finished(
    world,
) -> None:
    """The failure window: a call stops between finding what is theirs and overwriting their
    messages. Whatever was found through their messages (S3 bodies, inbox claims, the traces
    quoting them) must still be found by the next call."""
    stack, store, clock = world
    inbox = DynamoInboxStore(clock=clock)
    big = base64.b64encode(os.urandom(450_000)).decode()  # offloaded to S3
    await store.create(
        SessionState(id="tg-group", agent_id="bank", customer_id="bob", channel="telegram")
    )
    await talk(store, "tg-group", "g0", "bob opens the group", "bob")
    for i in range(8):
        words = f"{SECRET_WORDS} {big if i == 0 else i}"
        await talk(store, "tg-group", f"a{i}", words, "alice")
        await inbox.claim("telegram", f"bot:a{i}", 3600, owner="w", lease_seconds=30)
        quoting = {"prompt": f"alice: {SECRET_WORDS}\nbob: noted ({i})"}
        await talk(store, "tg-group", f"b{i}", f"noted ({i})", "bob", trace=quoting)
    assert mentions(stack, "X12345678", big[:64])

    ticks = iter(range(10**9))  # a clock that moves one second per check
    calls = []
    while True:
        # A call that finds nothing left still reads the index, lists her S3 markers (three
        # prefixes) and the group's bodies (three), and deletes her index entry.
        erasure = CustomerErasure(store, time_budget=12, clock=lambda: float(next(ticks)))
        report = await erasure.erase("telegram", "alice")
        calls.append(report)
        if report.complete:
            break
        assert len(calls) < 200
    assert len(calls) > 2  # cut short more than once

    assert mentions(stack, "X12345678", big[:64], "alice") == []
    assert not any([await inbox.is_claimed("telegram", f"bot:a{i}") for i in range(8)])
    assert await store.trace("tg-group", "g0") == {"turn": "g0", "heard": "bob opens the group"}
    history = await store.events("tg-group")
    assert history is not None
    assert [e.text for e in history if e.text and e.text.startswith("noted")] == [
        f"noted ({i})" for i in range(8)
    ]


async def test_a_redaction_stopped_at_any_point_is_finished_by_the_next_call(world) -> None:
    """A flaky cloud: the first call stops after its first, second, third … step (Lambda timed
    out, or the time budget ran out), wherever that falls; the next call finishes. Her message's
    body is offloaded to S3, so a call that deleted it before overwriting the message must not
    leave the next one unable to read the session."""
    stack, store, _ = world
    big = base64.b64encode(os.urandom(450_000)).decode()  # offloaded to S3
    steps = 0
    while True:
        steps += 1
        session_id, person = f"grp-{steps}", f"alice-{steps}"
        await store.create(
            SessionState(id=session_id, agent_id="bank", customer_id="bob", channel="telegram")
        )
        await talk(store, session_id, "g0", "bob opens the group", "bob")
        await talk(store, session_id, f"a{steps}", f"{SECRET_WORDS} {big}", person)
        await talk(store, session_id, f"b{steps}", "noted", "bob")
        clock = itertools.count().__next__  # one second per check of the budget
        first = await CustomerErasure(store, time_budget=steps, clock=clock).erase(
            "telegram", person
        )
        await CustomerErasure(store).erase("telegram", person)  # the next call
        assert mentions(stack, person, big[:64]) == [], f"stopped after step {steps}"
        if first.complete:
            break
    assert steps > 3


async def test_a_turn_racing_the_erasure_cannot_write_the_participant_back(world) -> None:
    stack, store, _ = world
    await store.create(
        SessionState(id="grp", agent_id="bank", customer_id="bob", channel="telegram")
    )
    await talk(store, "grp", "g1", SECRET_WORDS, "alice")
    before = await store.load("grp")
    assert before is not None
    await store.replace_state(
        before.model_copy(update={"principals": {"alice": {"id": "X12345678"}}}),
        expected_version=before.version,
    )
    stale = await store.load("grp")  # a turn loaded this, then the erasure ran
    await CustomerErasure(store).erase("telegram", "alice")
    from engine.errors import SessionConflict

    with pytest.raises(SessionConflict):
        await store.commit(turn_commit(stale, "late", "late reply"))
    assert mentions(stack, "X12345678") == []


async def test_expired_items_read_as_absent_and_a_session_starts_afresh(local_stack) -> None:
    clock = ManualClock()
    retention = Retention(session_idle=10 * DAY, events=5 * DAY, traces=1 * DAY)
    store = DynamoSessionStore(clock=clock, retention=retention)
    await store.create(SessionState(id="s1", agent_id="bank", customer_id="c1"))
    await talk(store, "s1", "t0", "first", "c1")
    clock.advance(2 * DAY)
    assert await store.trace("s1", "t0") is None  # traces: 1 day
    await talk(store, "s1", "t1", "second", "c1")
    clock.advance(4 * DAY)  # t0's events are 6 days old: expired, t1's are not
    loaded = await store.load("s1")
    assert loaded is not None and [e.text for e in loaded.events] == ["second", "reply to t1"]
    await talk(store, "s1", "t2", "third", "c1")  # a live session goes on without them
    clock.advance(11 * DAY)  # idle past its TTL: the session is gone
    assert await store.load("s1") is None
    assert await store.ensure(SessionState(id="s1", agent_id="bank", customer_id="c1"))
    fresh = await store.load("s1")
    assert fresh is not None and fresh.version == 0 and fresh.events == ()
    await talk(store, "s1", "t0", "new life", "c1")  # same offsets and turn id as the old ones
    loaded = await store.load("s1")
    assert loaded is not None and [e.text for e in loaded.events] == ["new life", "reply to t0"]


def test_events_and_traces_may_not_outlive_their_session() -> None:
    with pytest.raises(InvalidRetention, match="EventRetentionDays"):
        Retention(session_idle=30 * DAY, events=60 * DAY)
    with pytest.raises(InvalidRetention, match="TraceRetentionDays"):
        Retention(session_idle=30 * DAY, events=30 * DAY, traces=60 * DAY)
    with pytest.raises(InvalidRetention, match="TraceRetentionDays"):
        Retention(session_idle=30 * DAY, events=30 * DAY, traces=None)  # forever
    with pytest.raises(InvalidRetention, match="whole number of days"):
        os.environ["WAYPOINT_TRACE_RETENTION_DAYS"] = "a week"
        try:
            Retention.from_env()
        finally:
            del os.environ["WAYPOINT_TRACE_RETENTION_DAYS"]
    assert Retention.forever().events is None


async def test_a_group_the_erased_customer_opened_stays_for_the_others(world) -> None:
    stack, store, _ = world
    await store.create(
        SessionState(id="grp", agent_id="bank", customer_id="alice", channel="slack")
    )
    await talk(store, "grp", "g0", SECRET_WORDS, "alice")
    await talk(store, "grp", "g1", "bob here", "bob")
    await DynamoVariableStore().set_variable("bank", "slack", "alice", "tier", "gold")

    report = await CustomerErasure(store).erase("slack", "alice")

    assert report.sessions_deleted == [] and report.sessions_redacted == ["grp"]
    assert mentions(stack, "X12345678", "alice") == []
    state = await store.load("grp")
    assert state is not None and state.customer_id == "erased"
    assert [e.text for e in state.events] == [None, None, "bob here", "reply to g1"]
    # Bob's turn came after her opening message: its prompts quoted it, so its trace goes too.
    assert await store.trace("grp", "g1") is None


async def test_an_erased_session_in_a_journey_leaves_the_in_flight_index(world) -> None:
    """A publish counts sessions in flight from their index entries; an erased session must not
    be counted (nor keep an entry naming it) until the entry's TTL."""
    _stack, store, _clock = world
    await store.create(
        SessionState(id="tg-carol", agent_id="bank", customer_id="carol", channel="telegram")
    )
    await talk(store, "tg-carol", "c0", "I want to transfer money", "carol")
    state = await store.load("tg-carol")
    assert state is not None
    await store.commit(
        type(turn_commit(state, "c1", "To which account?"))(
            turn_id="c1",
            expected_version=state.version,
            state=state.model_copy(
                update={
                    "journey_paths": {"transfer": ("ask_destination",)},
                    "active_journey_ids": ("transfer",),
                    "version": state.version + 1,
                }
            ),
            new_events=(),
            trace={"turn": "c1"},
        )
    )
    assert [p.session_id for p in await store.sessions_in_flight("bank")] == ["tg-carol"]

    await CustomerErasure(store).erase("telegram", "carol")

    assert await store.sessions_in_flight("bank") == []


async def test_erasing_a_person_deletes_their_channels_profile_and_the_legacy_one_of_their_id(
    world,
) -> None:
    """Profiles are per (channel, id): erasing Telegram's 4242 leaves Slack's 4242 alone. A
    value stored before the channel was part of the key cannot be told apart: it goes too."""
    _stack, store, _ = world
    variables = DynamoVariableStore()
    for channel in ("telegram", "slack"):
        await store.create(
            SessionState(id=f"{channel}-4242", agent_id="bank", customer_id="4242", channel=channel)
        )
        await talk(store, f"{channel}-4242", f"{channel}0", "hello", "4242")
    await variables.set_variable("bank", "telegram", "4242", "tier", "gold")
    await variables.set_variable("bank", "slack", "4242", "tier", "silver")
    client("dynamodb").put_item(
        TableName=os.environ["WAYPOINT_TABLE"],
        Item={"pk": {"S": "VARS#bank#4242"}, "sk": {"S": "VAR#pet"}, "value": {"S": '"Rex"'}},
    )

    report = await CustomerErasure(store).erase("telegram", "4242")

    assert report.sessions_deleted == ["telegram-4242"]
    assert await variables.get_variables("bank", "telegram", "4242") == {}
    assert await variables.get_variables("bank", "slack", "4242") == {"tier": "silver"}
    assert await store.load("slack-4242") is not None


async def test_the_tombstone_is_named_by_a_keyed_digest_no_list_of_numbers_reverses(world) -> None:
    """The adversary has the table and a block of phone numbers: hashing each (channel, number)
    as the tombstone used to be named finds nothing; the store, holding the key, still does."""
    stack, store, clock = world
    phone = "+15550001234"
    await store.create(
        SessionState(id="sms-1", agent_id="bank", customer_id=phone, channel="twilio")
    )
    await talk(store, "sms-1", "t0", "hello", phone)

    await CustomerErasure(store).erase("twilio", phone)

    items, _ = everything(stack)
    (tombstone,) = [i["pk"]["S"] for i in items if i["pk"]["S"].startswith("ERASED#")]
    guesses = [f"+155500{n:05d}" for n in range(10_000)]
    unkeyed = {f"ERASED#{legacy_person_digest('twilio', g)}" for g in guesses}
    assert tombstone not in unkeyed
    assert tombstone == f"ERASED#{store.person_digest('twilio', phone)}"
    assert await store.erased_at("twilio", phone) == clock.now()


async def test_a_tombstone_written_before_digests_were_keyed_is_still_found(world) -> None:
    _stack, store, clock = world
    client("dynamodb").put_item(
        TableName=os.environ["WAYPOINT_TABLE"],
        Item={
            "pk": {"S": f"ERASED#{legacy_person_digest('telegram', 'alice')}"},
            "sk": {"S": "ERASED"},
            "erased_at": {"S": clock.now().isoformat()},
            "expires_at": {"N": str(int(clock.now().timestamp()) + 30 * DAY)},
        },
    )
    assert await store.erased_at("telegram", "alice") == clock.now()
    assert await store.erased_at("telegram", "bob") is None
    clock.advance(31 * DAY)  # they expire as they always did: the fallback ends with them
    assert await store.erased_at("telegram", "alice") is None


async def test_a_session_in_use_longer_than_the_idle_retention_is_still_found(world) -> None:
    """Its customer's index entry is written again by every turn, so it expires with the
    session, not a year after the session was created (DynamoDB's TTL sweeping it)."""
    stack, store, clock = world
    await store.create(
        SessionState(id="tg-alice", agent_id="bank", customer_id="alice", channel="telegram")
    )
    for day in range(4):
        await talk(store, "tg-alice", f"a{day}", f"{SECRET_WORDS} (day {200 * day})", "alice")
        clock.advance(200 * DAY)
    ttl_sweep(stack, clock.now())
    assert await store.load("tg-alice") is not None  # in use: alive

    report = await CustomerErasure(store).erase("telegram", "alice")

    assert report.sessions_deleted == ["tg-alice"]
    assert mentions(stack, "X12345678", "alice") == []
