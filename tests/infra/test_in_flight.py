"""The sessions-in-flight index (infra/aws/in_flight.py) and the rollback of the published pointer,
on moto: written in the turn's own transaction, cleared by a tombstone, expired by TTL, raced."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from engine.errors import AgentNotFound, SessionConflict
from engine.ports import TurnCommit
from engine.sessions.session import SessionState
from infra.aws.dynamo_agents import DynamoAgentStore
from infra.aws.dynamo_sessions import MAX_EVENTS_PER_COMMIT, DynamoSessionStore
from infra.aws.in_flight import IN_FLIGHT_TTL_SECONDS, SHARDS, shard_of, shard_pk
from infra.aws.local_stack import LocalStack
from tests.contracts.customer_state_contract import ManualClock
from tests.contracts.factories import make_agent, new_session, turn_commit


def in_transfer(state: SessionState, step: str | None = "s1") -> SessionState:
    """`state` with the transfer journey at `step` (None: suspended for a prerequisite)."""
    if step is None:
        return state.model_copy(update={"suspended_journeys": ("transfer",), "agent_version": "v1"})
    return state.model_copy(
        update={"journey_paths": {"transfer": ("s0", step)}, "agent_version": "v1"}
    )


def done(state: SessionState) -> SessionState:
    return state.model_copy(
        update={"journey_paths": {"transfer": ("s0", "s1", None)}, "suspended_journeys": ()}
    )


def commit_with(base: SessionState, turn_id: str, new: SessionState, *texts: str) -> TurnCommit:
    commit = turn_commit(base, turn_id, *texts)
    return dataclasses.replace(
        commit,
        state=new.model_copy(
            update={"version": commit.state.version, "events": commit.state.events}
        ),
        in_flight_before=bool(base.active_journey_ids or base.suspended_journeys),
    )


def index_items(stack: LocalStack) -> list[dict[str, Any]]:
    ddb = stack.client("dynamodb")
    items = []
    for shard in range(SHARDS):
        items += ddb.query(
            TableName=stack.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": shard_pk("bank", shard)}},
        )["Items"]
    return items


async def test_a_session_is_indexed_while_in_a_journey_and_tombstoned_when_it_leaves(
    local_stack: LocalStack,
) -> None:
    store = DynamoSessionStore()
    quiet = await store.create(new_session("quiet"))
    await store.commit(commit_with(quiet, "q1", quiet, "hello"))
    assert index_items(local_stack) == []  # never in a journey: nothing written

    s = await store.create(new_session("s1"))
    await store.commit(commit_with(s, "t1", in_transfer(s), "where to?"))
    (position,) = await store.sessions_in_flight("bank")
    assert position.model_dump() == {
        "session_id": "s1",
        "agent_version": "v1",
        "journeys": {"transfer": "s1"},
    }
    (item,) = index_items(local_stack)
    assert item["pk"]["S"] == shard_pk("bank", shard_of("s1"))

    loaded = await store.load("s1")
    assert loaded is not None
    await store.commit(commit_with(loaded, "t2", done(loaded), "done"))
    assert await store.sessions_in_flight("bank") == []
    (tombstone,) = index_items(local_stack)
    assert tombstone["journeys"]["S"] == "{}"


async def test_a_suspended_journey_counts_as_in_flight_without_a_step(
    local_stack: LocalStack,
) -> None:
    store = DynamoSessionStore()
    s = await store.create(new_session("s1"))
    await store.commit(commit_with(s, "t1", in_transfer(s, None), "log in first"))
    (position,) = await store.sessions_in_flight("bank")
    assert position.journeys == {"transfer": None}


async def test_an_abandoned_entry_expires(local_stack: LocalStack) -> None:
    clock = ManualClock()
    store = DynamoSessionStore(clock=clock)
    s = await store.create(new_session("s1"))
    await store.commit(commit_with(s, "t1", in_transfer(s), "where to?"))
    clock.advance(IN_FLIGHT_TTL_SECONDS + 1)
    assert await store.sessions_in_flight("bank") == []


async def test_the_largest_commit_still_fits_one_transaction_with_its_index_entry(
    local_stack: LocalStack,
) -> None:
    store = DynamoSessionStore()
    s = await store.create(new_session("s1"))
    texts = [f"m{i}" for i in range(MAX_EVENTS_PER_COMMIT)]
    assert await store.commit(commit_with(s, "t1", in_transfer(s), *texts))
    assert len(await store.sessions_in_flight("bank")) == 1


async def test_a_rolled_back_commit_leaves_no_index_entry(local_stack: LocalStack) -> None:
    store = DynamoSessionStore()
    s = await store.create(new_session("s1"))
    await store.commit(commit_with(s, "t1", s, "hi"))  # version 1 now: a commit at 0 conflicts
    with pytest.raises(SessionConflict, match="another turn committed first"):
        await store.commit(commit_with(s, "t2", in_transfer(s), "where to?"))
    assert index_items(local_stack) == []  # one transaction: the entry fell with the turn


# --------------------------------------------------------------------------------------------------
# Rollback


async def test_rollback_goes_to_the_previous_version_then_to_a_named_one(
    local_stack: LocalStack,
) -> None:
    store = DynamoAgentStore()
    await store.publish(make_agent(version="v1"))
    await store.publish(make_agent(version="v2", name="Bank 2"))

    assert await store.rollback("bank") == ("v2", "v1")
    assert await store.published_version("bank") == "v1"
    assert await store.rollback("bank") == ("v1", "v2")  # the previous one is v2 again
    assert await store.rollback("bank", "v1") == ("v2", "v1")


async def test_rollback_refuses_what_is_not_there_naming_what_is(local_stack: LocalStack) -> None:
    store = DynamoAgentStore()
    with pytest.raises(AgentNotFound, match="no published agent 'bank'"):
        await store.rollback("bank")
    await store.publish(make_agent(version="v1"))
    with pytest.raises(AgentNotFound, match="no earlier published version"):
        await store.rollback("bank")
    with pytest.raises(AgentNotFound, match=r"no version 'v9' \(stored versions: v1\)"):
        await store.rollback("bank", "v9")
    assert await store.published_version("bank") == "v1"


async def test_a_rollback_that_loses_the_pointer_race_retries(local_stack: LocalStack) -> None:
    store = DynamoAgentStore()
    await store.publish(make_agent(version="v1"))
    await store.publish(make_agent(version="v2", name="Bank 2"))
    ddb = store._table.ddb
    original = ddb.put_item
    raced: list[bool] = []

    def put_after_a_rival(**kwargs: Any) -> Any:
        if not raced:  # a publisher moves the pointer between our read and our write
            raced.append(True)
            local_stack.client("dynamodb").update_item(
                TableName=local_stack.table_name,
                Key={"pk": {"S": "AGENT#bank"}, "sk": {"S": "PUBLISHED"}},
                UpdateExpression="SET revision = :r",
                ExpressionAttributeValues={":r": {"N": "7"}},
            )
        return original(**kwargs)

    ddb.put_item = put_after_a_rival
    try:
        assert await store.rollback("bank") == ("v2", "v1")
    finally:
        del ddb.put_item
    pointer = local_stack.client("dynamodb").get_item(
        TableName=local_stack.table_name,
        Key={"pk": {"S": "AGENT#bank"}, "sk": {"S": "PUBLISHED"}},
    )["Item"]
    assert pointer["revision"]["N"] == "8" and pointer["version"]["S"] == "v1"
