"""DynamoDB-specific behavior beyond the shared contracts: item layout, large bodies, the warm
snapshot cache, publish races and how cancelled transactions are classified."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from engine.errors import SessionConflict
from engine.sessions.session import EventSource
from infra.aws.dynamo_agents import DynamoAgentStore
from infra.aws.dynamo_inbox import DynamoInboxStore
from infra.aws.dynamo_sessions import (
    MAX_EVENTS_PER_COMMIT,
    DynamoSessionStore,
    SessionIntegrityError,
    TurnTooLarge,
)
from infra.aws.dynamo_table import ItemBodies, ItemTooLarge
from infra.aws.dynamo_variables import DynamoVariableStore
from infra.aws.local_stack import LocalStack
from tests.contracts.customer_state_contract import ManualClock
from tests.contracts.factories import make_agent, message, new_session, turn_commit

CountCalls = Callable[[Any, str], list[dict[str, Any]]]


def items_of(stack: LocalStack, pk: str) -> dict[str, dict[str, Any]]:
    """sk → raw item, for one partition."""
    response = stack.client("dynamodb").query(
        TableName=stack.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
    )
    return {item["sk"]["S"]: item for item in response["Items"]}


def incompressible(n_bytes: int) -> str:
    return base64.b64encode(os.urandom(n_bytes)).decode()


def cancelled(*codes: str, old_version: int | None = None) -> ClientError:
    reasons: list[dict[str, Any]] = [{"Code": code} for code in codes]
    if old_version is not None:
        reasons[0]["Item"] = {"version": {"N": str(old_version)}}
    return ClientError(
        {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": reasons},
        "TransactWriteItems",
    )


# --------------------------------------------------------------------------------------------------
# Sessions


async def test_a_turn_writes_the_documented_items(local_stack: LocalStack) -> None:
    store = DynamoSessionStore()
    state = await store.create(new_session(events=(message(0, "hello"),)))
    await store.commit(turn_commit(state, "t1", "hi!", "how can I help?"))

    items = items_of(local_stack, "SESSION#s1")
    assert sorted(items) == [
        "EVENT#0000000000",
        "EVENT#0000000001",
        "EVENT#0000000002",
        "META",
        "TRACE#t1",
        "TURN#t1",
    ]
    meta = items["META"]
    assert meta["version"] == {"N": "1"} and meta["next_offset"] == {"N": "3"}
    assert "events" not in meta["body"]["S"]  # events live in their own items only


async def test_ensure_creates_once_and_never_reads_the_session_back(
    local_stack: LocalStack,
) -> None:
    class NoS3:  # the webhook has no S3 permission: any S3 call would be AccessDenied in AWS
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"ensure() called s3.{name}")

    seeded = DynamoSessionStore()
    await seeded.create(new_session(metadata={"notes": incompressible(450_000)}))
    assert "body_s3" in items_of(local_stack, "SESSION#s1")["META"]  # its body lives in S3

    webhook = DynamoSessionStore(s3=NoS3())
    assert await webhook.ensure(new_session()) is False  # exists: nothing read, nothing changed
    assert await webhook.ensure(new_session("s2")) is True
    assert await webhook.ensure(new_session("s2")) is False
    assert (await seeded.load("s2")) == new_session("s2")
    assert (await seeded.load("s1")).metadata["notes"]  # type: ignore[union-attr]


async def test_a_large_state_is_gzipped_and_loads_back(local_stack: LocalStack) -> None:
    store = DynamoSessionStore()
    state = await store.create(new_session(metadata={"notes": "lorem ipsum " * 20_000}))
    assert "body_gz" in items_of(local_stack, "SESSION#s1")["META"]
    assert await store.load("s1") == state


async def test_a_trace_too_big_for_an_item_goes_to_s3(local_stack: LocalStack) -> None:
    store = DynamoSessionStore()
    state = await store.create(new_session())
    trace = {"prompt": incompressible(600_000)}
    await store.commit(turn_commit(state, "t1", "x", trace=trace))

    pointer = items_of(local_stack, "SESSION#s1")["TRACE#t1"]["body_s3"]["S"]
    assert pointer == f"s3://{local_stack.bucket}/sessions/s1/traces/t1.json.gz"
    assert await store.trace("s1", "t1") == trace


async def test_without_a_bucket_an_oversized_body_is_a_clear_error(
    local_stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAYPOINT_BUCKET")
    store = DynamoSessionStore()
    state = await store.create(new_session())
    with pytest.raises(ItemTooLarge, match="set WAYPOINT_BUCKET"):
        await store.commit(turn_commit(state, "t1", "x", trace={"p": incompressible(600_000)}))


def test_item_bodies_pick_inline_gzip_or_s3_by_size(local_stack: LocalStack) -> None:
    bodies = ItemBodies(local_stack.bucket)
    small, repetitive, random = "{}", '"' + "ab" * 40_000 + '"', '"' + incompressible(500_000) + '"'
    assert set(bodies.encode(small, "k1")) == {"body"}
    assert set(bodies.encode(repetitive, "k2")) == {"body_gz"}
    assert set(bodies.encode(random, "k3")) == {"body_s3"}
    for text, key in ((small, "k1"), (repetitive, "k2"), (random, "k3")):
        assert bodies.decode(bodies.encode(text, key)) == text


async def test_trace_ttl_hides_expired_traces(local_stack: LocalStack) -> None:
    clock = ManualClock()
    store = DynamoSessionStore(clock=clock, trace_ttl_seconds=60)
    state = await store.create(new_session())
    await store.commit(turn_commit(state, "t1", "x", trace={"a": 1}))
    assert await store.trace("s1", "t1") == {"a": 1}
    clock.advance(61)
    assert await store.trace("s1", "t1") is None


async def test_a_commit_larger_than_one_transaction_is_refused(local_stack: LocalStack) -> None:
    store = DynamoSessionStore()
    state = await store.create(new_session())
    texts = [f"m{i}" for i in range(MAX_EVENTS_PER_COMMIT + 1)]
    with pytest.raises(TurnTooLarge, match="split"):
        await store.commit(turn_commit(state, "t1", *texts))


async def test_missing_event_items_are_reported_not_silently_skipped(
    local_stack: LocalStack,
) -> None:
    store = DynamoSessionStore()
    await store.create(new_session(events=(message(0, "a"), message(1, "b"))))
    local_stack.client("dynamodb").delete_item(
        TableName=local_stack.table_name,
        Key={"pk": {"S": "SESSION#s1"}, "sk": {"S": "EVENT#0000000001"}},
    )
    with pytest.raises(SessionIntegrityError, match="EVENT#"):
        await store.load("s1")


async def test_load_ignores_events_of_a_turn_committed_after_the_meta_was_read(
    local_stack: LocalStack,
) -> None:
    # Emulates the read race: an EVENT item beyond the meta's next_offset must not leak in.
    store = DynamoSessionStore()
    await store.create(new_session(events=(message(0, "a"),)))
    late = message(1, "from a later turn", source=EventSource.AGENT)
    local_stack.client("dynamodb").put_item(
        TableName=local_stack.table_name,
        Item={
            "pk": {"S": "SESSION#s1"},
            "sk": {"S": "EVENT#0000000001"},
            "body": {"S": late.model_dump_json()},
        },
    )
    loaded = await store.load("s1")
    assert loaded is not None and [e.text for e in loaded.events] == ["a"]


class TestCancelledTransactions:
    """Reasons are positional: [meta update, turn marker, trace, events…]."""

    @pytest.fixture
    def store(self, local_stack: LocalStack) -> DynamoSessionStore:
        return DynamoSessionStore()

    def test_an_existing_turn_marker_means_replay(self, store: DynamoSessionStore) -> None:
        commit = turn_commit(new_session(), "t1", "x")
        error = cancelled("ConditionalCheckFailed", "ConditionalCheckFailed", "None", "None")
        assert store._explain_cancellation(error, commit) is False

    def test_a_failed_version_check_is_a_conflict_naming_the_stored_version(
        self, store: DynamoSessionStore
    ) -> None:
        commit = turn_commit(new_session(), "t1", "x")
        error = cancelled("ConditionalCheckFailed", "None", "None", "None", old_version=3)
        with pytest.raises(SessionConflict, match="stored version is 3"):
            store._explain_cancellation(error, commit)

    def test_a_concurrent_transaction_is_a_conflict(self, store: DynamoSessionStore) -> None:
        commit = turn_commit(new_session(), "t1", "x")
        error = cancelled("TransactionConflict", "None", "None", "None")
        with pytest.raises(SessionConflict):
            store._explain_cancellation(error, commit)

    def test_other_cancellations_are_not_disguised_as_conflicts(
        self, store: DynamoSessionStore
    ) -> None:
        commit = turn_commit(new_session(), "t1", "x")
        error = cancelled("None", "None", "ValidationError", "None")
        with pytest.raises(ClientError):
            store._explain_cancellation(error, commit)


# --------------------------------------------------------------------------------------------------
# Agents


async def test_a_snapshot_is_read_once_per_warm_container(
    local_stack: LocalStack, count_calls: CountCalls
) -> None:
    await DynamoAgentStore().publish(make_agent(version="v1"))
    reads = count_calls(local_stack.client("dynamodb"), "GetItem")

    await DynamoAgentStore().get("bank")  # cold: pointer + version item
    assert [r["Key"]["sk"]["S"] for r in reads] == ["PUBLISHED", "VERSION#v1"]
    reads.clear()
    await DynamoAgentStore().get("bank")  # a later invocation in the same container
    assert [r["Key"]["sk"]["S"] for r in reads] == ["PUBLISHED"]


async def test_the_pointer_records_revision_and_previous_version(local_stack: LocalStack) -> None:
    store = DynamoAgentStore()
    await store.publish(make_agent(version="v1"))
    await store.publish(make_agent(version="v2", name="Bank 2"))
    pointer = items_of(local_stack, "AGENT#bank")["PUBLISHED"]
    assert pointer["version"]["S"] == "v2"
    assert pointer["revision"]["N"] == "2"
    assert pointer["previous_version"]["S"] == "v1"
    assert await store.versions("bank") == ["v1", "v2"]


async def test_a_publish_that_loses_the_pointer_race_retries(local_stack: LocalStack) -> None:
    store = DynamoAgentStore()
    await store.publish(make_agent(version="v1"))
    original = store._table.transact
    raced: list[bool] = []

    def transact_after_a_rival(items: list[dict[str, Any]]) -> None:
        if not raced:  # a rival publisher moves the pointer between our read and our write
            raced.append(True)
            local_stack.client("dynamodb").update_item(
                TableName=local_stack.table_name,
                Key={"pk": {"S": "AGENT#bank"}, "sk": {"S": "PUBLISHED"}},
                UpdateExpression="SET revision = :r",
                ExpressionAttributeValues={":r": {"N": "7"}},
            )
        original(items)

    store._table.transact = transact_after_a_rival  # type: ignore[method-assign]
    assert await store.publish(make_agent(version="v2", name="Bank 2")) == "v2"
    pointer = items_of(local_stack, "AGENT#bank")["PUBLISHED"]
    assert pointer["revision"]["N"] == "8" and pointer["version"]["S"] == "v2"


# --------------------------------------------------------------------------------------------------
# Inbox and variables


async def test_an_inbox_claim_carries_a_ttl_attribute(local_stack: LocalStack) -> None:
    clock = ManualClock()
    await DynamoInboxStore(clock=clock).claim("web", "e1", 3600, owner="a", lease_seconds=30)
    item = items_of(local_stack, "INBOX#web#e1")["INBOX"]
    assert int(item["expires_at"]["N"]) == int(clock.now().timestamp()) + 3600


async def test_key_parts_cannot_contain_the_separator(local_stack: LocalStack) -> None:
    with pytest.raises(ValueError, match="'#'"):
        await DynamoInboxStore().claim("a#b", "e1", 60, owner="a", lease_seconds=30)
    with pytest.raises(ValueError, match="'#'"):
        await DynamoVariableStore().set_variable("ba#nk", "c1", "x", 1)
