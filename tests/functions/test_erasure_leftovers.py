"""What outlived an erasure or a retention before issue #33, after real turns (webhook, queue,
worker, management API, moto): a 600 KB tool view naming the customer offloaded to S3, the
dead-letter copy of their message, their tombstone, a profile shared with the same id on another
channel."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, tool
from examples.banking import tools as bank_tools
from infra.runtime import Runtime
from infra.turn_queue import QueuedMessage, session_id_for
from tests.channels.payloads import generic_message
from tests.functions import signed_events as signed
from tests.functions.conftest import drain, everything_stored, invoke_webhook, telegram_says
from tests.functions.platforms import CALLBACK_URL
from tests.functions.test_management import call
from tests.infra.test_erasure import ttl_sweep

CHAT = 5151  # the Telegram chat (and user) id of the customer
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")
NAME = "Alice Liddell"


@tool(name="lookup_stock_price", description="Look up the current price of a stock")
def price_with_a_chart(symbol: str) -> ToolResult:
    # ~1.2 MB that does not compress, naming her: more than an item even gzipped (S3)
    chart = {"prepared for": NAME, "points": os.urandom(600_000).hex()}
    return ToolResult(data={"symbol": symbol, "price": "187.20"}, view=chart)


def ask_for_a_price(runtime: Runtime, stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two turns over the worker: the stock journey asks which company, then runs its tools;
    the price tool's view is offloaded to S3."""
    others = [t for t in bank_tools.TOOLS if t.tool_spec.name != "lookup_stock_price"]
    tools = InProcessDispatcher(ToolRegistry([*others, price_with_a_chart]))
    monkeypatch.setitem(runtime.__dict__, "tools", tools)
    for update_id, text in ((1, "I would like to know a stock price"), (2, "apple")):
        assert telegram_says(CHAT, text, update_id)["statusCode"] == 200
        assert drain(stack) == [{"batchItemFailures": []}]
    assert NAME in everything_stored(stack)  # the adversary: there is a view naming her


def test_a_600_kb_tool_view_naming_the_customer_goes_with_its_items(
    runtime: Runtime, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask_for_a_price(runtime, stack, monkeypatch)
    a_year_on = datetime.now(UTC) + timedelta(days=366)  # past every default retention

    ttl_sweep(stack, a_year_on)  # DynamoDB's TTL: the items go (the customer index with them)
    stack.apply_lifecycle_rules(a_year_on)  # S3's lifecycle (template.yaml's rules)

    stored = everything_stored(stack)
    assert NAME not in stored and str(CHAT) not in stored and SESSION not in stored


def test_erasure_finds_the_offloaded_view_once_the_items_and_their_index_are_gone(
    runtime: Runtime, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the items' expiry and S3's next lifecycle run (up to a day, and S3 removes
    expired objects asynchronously), only the objects are left: erasure still finds them."""
    ask_for_a_price(runtime, stack, monkeypatch)
    ttl_sweep(stack, datetime.now(UTC) + timedelta(days=365, seconds=60))
    assert NAME in everything_stored(stack)

    status, report = call("DELETE", f"/customers/telegram/{CHAT}")

    assert status == 200 and report["sessions_deleted"] == [SESSION]
    stored = everything_stored(stack)
    assert NAME not in stored and SESSION not in stored


def test_the_tombstone_names_no_one_a_list_of_ids_could_find(
    runtime: Runtime, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adversary holds a copy of the table and every Telegram id of a block: hashing each
    the way tombstones used to be named matches nothing stored."""
    assert telegram_says(CHAT, "hello", 1)["statusCode"] == 200
    drain(stack)

    assert call("DELETE", f"/customers/telegram/{CHAT}")[0] == 200

    stored = everything_stored(stack)
    assert "ERASED#" in stored  # the erasure is remembered
    unkeyed = (hashlib.sha256(f"telegram\0{n}".encode()).hexdigest()[:32] for n in range(10_000))
    assert not [d for d in unkeyed if d in stored]
    assert runtime.run(runtime.sessions.erased_at("telegram", str(CHAT))) is not None


def test_erasing_a_person_keeps_the_profile_of_the_same_id_on_another_channel(
    runtime: Runtime, stack: Any
) -> None:
    assert telegram_says(CHAT, "hello", 1)["statusCode"] == 200
    drain(stack)
    assert call("POST", "/sessions", {"customer_id": str(CHAT), "session_id": "web-5151"})[0] == 201
    variables = runtime.variables
    runtime.run(variables.set_variable("bank", "telegram", str(CHAT), "tier", "gold"))
    runtime.run(variables.set_variable("bank", "api", str(CHAT), "tier", "silver"))

    assert call("DELETE", f"/customers/telegram/{CHAT}")[0] == 200

    assert runtime.run(variables.get_variables("bank", "telegram", str(CHAT))) == {}
    assert runtime.run(variables.get_variables("bank", "api", str(CHAT))) == {"tier": "silver"}
    assert call("GET", "/sessions/web-5151")[0] == 200


MAX_RECEIVE_COUNT = 8  # template.yaml's TurnQueue RedrivePolicy
CONVERSATION = "family-account"
GROUP = session_id_for("bank", "generic", f"generic:{CONVERSATION}")
IBAN = "DE89370400440532013000"


def in_group(person: str, text: str, event_id: str) -> None:
    body = generic_message(
        text,
        event_id=event_id,
        conversation_id=CONVERSATION,
        customer_id=person,
        callback_url=CALLBACK_URL,
    )
    assert invoke_webhook(signed.generic(body))["statusCode"] == 200


def dead_letters(stack: Any) -> list[tuple[str, str]]:
    """(group, text) of every message in the turn DLQ, each group in order (all received)."""
    sqs = stack.client("sqs")
    found = []
    while batch := sqs.receive_message(
        QueueUrl=stack.dead_letter_queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["MessageGroupId"],
        VisibilityTimeout=300,
    ).get("Messages", []):
        for m in batch:
            text = QueuedMessage.model_validate_json(m["Body"]).message.text
            found.append((m["Attributes"]["MessageGroupId"], text))
    return found


def test_the_dead_letters_of_an_erased_person_go_and_everyone_elses_stay_in_order(
    runtime: Runtime, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every turn fails (a bug in production): after maxReceiveCount receives SQS moves the
    messages to the dead-letter queue, where they wait 14 days for a redrive. Bob's message
    heads the group; Alice's waits behind it."""

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected: every turn fails")

    monkeypatch.setattr(runtime.engine, "handle", failing)
    in_group("bob-7", "Hi, bob here", "evt-1")
    in_group("alice-9", f"my IBAN is {IBAN}", "evt-2")
    in_group("bob-7", "bob again", "evt-3")
    assert telegram_says(CHAT, "someone on telegram", 1)["statusCode"] == 200
    for _ in range(MAX_RECEIVE_COUNT):
        drain(stack)
    assert drain(stack) == []  # all moved to the dead-letter queue on this receive

    status, _report = call("DELETE", "/customers/generic/alice-9")

    assert status == 200
    left = dead_letters(stack)
    assert [text for _, text in left if IBAN in text] == []
    assert [t for g, t in left if g == GROUP] == ["Hi, bob here", "bob again"]
    assert [t for g, t in left if g == SESSION] == ["someone on telegram"]


def test_a_dead_letter_the_scan_could_not_see_is_dropped_when_redriven(
    runtime: Runtime, stack: Any, platforms: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the purge cannot reach: an operator holds her dead letter (received, in flight)
    while she is erased, then redrives it. The worker drops it as written before her erasure
    (the tombstone outlives the DLQ's 14 days): nothing of it is stored, nothing is answered."""
    answer = runtime.engine.handle

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected: every turn fails")

    monkeypatch.setattr(runtime.engine, "handle", failing)
    assert telegram_says(CHAT, f"my IBAN is {IBAN}", 1)["statusCode"] == 200
    for _ in range(MAX_RECEIVE_COUNT + 1):
        drain(stack)
    sqs = stack.client("sqs")
    (held,) = sqs.receive_message(
        QueueUrl=stack.dead_letter_queue_url, AttributeNames=["All"], VisibilityTimeout=300
    )["Messages"]  # the operator's console has it

    status, report = call("DELETE", f"/customers/telegram/{CHAT}")
    assert status == 200 and report["dead_letters_deleted"] == 0  # it could not be seen

    monkeypatch.setattr(runtime.engine, "handle", answer)  # the bug is fixed; redrive
    sqs.send_message(
        QueueUrl=stack.queue_url,
        MessageBody=held["Body"],
        MessageGroupId=held["Attributes"]["MessageGroupId"],
        MessageDeduplicationId=held["Attributes"]["MessageDeduplicationId"],
    )
    sqs.delete_message(QueueUrl=stack.dead_letter_queue_url, ReceiptHandle=held["ReceiptHandle"])
    platforms.requests.clear()

    assert drain(stack) == [{"batchItemFailures": []}]
    assert IBAN not in everything_stored(stack)
    assert [r for r in platforms.requests if r.is_reply] == []
