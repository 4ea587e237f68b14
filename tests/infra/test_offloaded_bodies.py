"""Session bodies offloaded to S3 never outlive their items (the bucket's lifecycle rules from
template.yaml, applied as S3 applies them), and erasure finds them without the customer index,
which expires with the items (issue #33)."""

from __future__ import annotations

import base64
import gzip
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.privacy.retention import DAY, Retention
from engine.sessions.session import SessionState
from infra.aws.cfn_template import load_template
from infra.aws.dynamo_sessions import DynamoSessionStore
from infra.aws.erasure import CustomerErasure
from infra.aws.local_stack import LocalStack
from infra.aws.offloaded_bodies import LEGACY, LIFETIMES
from infra.aws.s3_lifecycle import expires_at
from tests.contracts.customer_state_contract import ManualClock
from tests.infra.test_erasure import talk, ttl_sweep

RETENTION = Retention(session_idle=90 * DAY, events=60 * DAY, traces=7 * DAY)
NAME = "Alice Liddell"  # what her offloaded bodies say about her


def big(words: str) -> str:
    """`words` inside a body too large for a DynamoDB item even gzipped (offloaded to S3)."""
    return f"{words} {base64.b64encode(os.urandom(450_000)).decode()}"


def bodies(stack: LocalStack) -> dict[str, str]:
    """Every object of the bucket: key → its text (unzipped)."""
    s3 = stack.client("s3")
    found = {}
    for entry in s3.list_objects_v2(Bucket=stack.bucket).get("Contents", []):
        raw = s3.get_object(Bucket=stack.bucket, Key=entry["Key"])["Body"].read()
        found[entry["Key"]] = gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else ""
    return found


def naming(stack: LocalStack, *words: str) -> list[str]:
    return sorted(k for k, text in bodies(stack).items() if any(w in k + text for w in words))


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LocalStack, DynamoSessionStore, ManualClock]]:
    """A stack deployed with these retention days (the template's parameters: its TTLs and its
    bucket's lifecycle rules), and a store on a clock that starts at S3's (real) time."""
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    parameters = {
        "Stage": "local",
        "SessionIdleDays": str(RETENTION.session_idle // DAY),
        "EventRetentionDays": str(RETENTION.events // DAY),
        "TraceRetentionDays": str(RETENTION.traces // DAY),
    }
    with LocalStack(parameters=parameters) as stack:
        clock = ManualClock(datetime.now(UTC))
        yield stack, DynamoSessionStore(clock=clock, retention=RETENTION), clock


async def alices_session(store: DynamoSessionStore) -> None:
    """A session whose state, one event and one trace are all offloaded, each naming her."""
    await store.create(
        SessionState(
            id="tg-alice",
            agent_id="bank",
            customer_id="alice",
            channel="telegram",
            metadata={"notes": big(NAME)},
        )
    )
    await talk(store, "tg-alice", "a0", big(f"I am {NAME}"), "alice", trace={"p": big(NAME)})


async def test_the_templates_rules_expire_each_body_with_its_item_never_before(world) -> None:
    stack, store, clock = world
    await alices_session(store)
    written = clock.now()
    assert len(naming(stack, NAME)) == 3  # state, event, trace: each offloaded

    def left_after(days: float) -> list[str]:
        moment = written + timedelta(days=days)
        stack.apply_lifecycle_rules(moment)
        return sorted(k.split("/")[0] for k in naming(stack, NAME))

    # S3 expires an object after its days, rounded up to midnight UTC: never before its item.
    assert left_after(7 - 0.01) == ["sessions-events", "sessions-idle", "sessions-traces"]
    clock.advance(7 * DAY)
    assert await store.trace("tg-alice", "a0") is None  # the trace item has expired
    assert left_after(8) == ["sessions-events", "sessions-idle"]  # and within a day, its body
    assert left_after(61) == ["sessions-idle"]  # events: 60 days
    assert left_after(91) == []  # the state: 90 days after its last write
    assert bodies(stack) == {}  # the owner markers went with them


async def test_a_body_written_before_issue_33_expires_after_the_idle_days(world) -> None:
    """Bodies under the old layout (`sessions/{session}/…`) had no lifetime; the rule on
    `sessions/` gives them the longest of the items' (their items are gone by then)."""
    stack, _store, _clock = world
    s3 = stack.client("s3")
    s3.put_object(Bucket=stack.bucket, Key="sessions/tg-old/traces/t1.json.gz", Body=b"x")
    written = datetime.now(UTC)

    assert stack.apply_lifecycle_rules(written + timedelta(days=89)) == []
    assert stack.apply_lifecycle_rules(written + timedelta(days=91)) == [
        "sessions/tg-old/traces/t1.json.gz"
    ]


def test_each_object_is_under_one_lifecycle_rule_only() -> None:
    """No rule's prefix starts another's: an object's lifetime is its own rule's, whether S3
    honours the shorter of overlapping rules or CloudFormation refuses them."""
    bucket = load_template()["Resources"]["EmbeddingsBucket"]["Properties"]
    prefixes = [rule["Prefix"] for rule in bucket["LifecycleConfiguration"]["Rules"]]
    assert sorted(prefixes) == sorted([LEGACY, *LIFETIMES])
    assert [(a, b) for a in prefixes for b in prefixes if a != b and b.startswith(a)] == []


def test_s3_counts_days_from_the_objects_creation_rounded_up_to_midnight_utc() -> None:
    created = datetime(2026, 1, 15, 10, 30, tzinfo=UTC)  # S3's own example
    assert expires_at(created, 3) == datetime(2026, 1, 19, tzinfo=UTC)


async def test_erasure_finds_her_bodies_after_the_index_expired_with_the_items(world) -> None:
    """The window the rules leave: her items expired and DynamoDB swept them (the customer
    index among them), her objects wait for the next midnight. Erasure still finds them."""
    stack, store, clock = world
    await alices_session(store)
    await store.create(
        SessionState(id="tg-bob", agent_id="bank", customer_id="bob", channel="telegram")
    )
    await talk(store, "tg-bob", "b0", big("bob's big message"), "bob")
    clock.advance(90 * DAY + 1)
    assert ttl_sweep(stack, clock.now()) > 0
    assert naming(stack, NAME)  # the adversary: her bodies are still there, no item names them

    report = await CustomerErasure(store).erase("telegram", "alice")

    assert naming(stack, NAME, "alice") == []
    assert report.sessions_deleted == ["tg-alice"]
    assert naming(stack, "bob's big message")  # nobody else's


async def test_erasure_finds_a_live_session_whose_index_entry_expired(world) -> None:
    """Her session is older than the idle retention (every turn kept it alive) but its index
    entry was written when it was created: the marker of its offloaded bodies finds it."""
    stack, store, clock = world
    await alices_session(store)
    for day in range(1, 4):
        clock.advance(40 * DAY)
        await talk(store, "tg-alice", f"a{day}", f"still here on day {40 * day}", "alice")
    ttl_sweep(stack, clock.now())  # her index entry (90 days after it was written) is gone
    assert await store.load("tg-alice") is not None

    report = await CustomerErasure(store).erase("telegram", "alice")

    assert report.sessions_deleted == ["tg-alice"] and await store.load("tg-alice") is None
    assert naming(stack, NAME, "alice") == []


async def test_a_redacted_opener_leaves_no_marker_and_the_group_keeps_its_bodies(world) -> None:
    stack, store, _clock = world
    await alices_session(store)
    await talk(store, "tg-alice", "b0", big("bob joins"), "bob")  # a group now
    markers: Any = [k for k in bodies(stack) if "/person=" in k]
    assert markers

    report = await CustomerErasure(store).erase("telegram", "alice")

    assert report.sessions_redacted == ["tg-alice"]
    assert [k for k in bodies(stack) if "/person=" in k] == []
    assert naming(stack, "bob joins")  # Bob's message is still readable
    state = await store.load("tg-alice")
    assert state is not None and "bob joins" in (state.events[-2].text or "")
