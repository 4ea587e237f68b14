"""Erasure's scan of the turn dead-letter queue (FIFO): the person's messages go, everyone else's
stay, in their groups' order, visible again at once — including the person's messages a group
hides behind someone else's (issue #33)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from infra.aws.dead_letters import DeadLetterScan, Verdict, judge_for
from infra.aws.local_stack import LocalStack
from infra.channels.base import NormalizedMessage
from infra.handoff_changes import QueuedPersonMessage
from infra.turn_queue import QueuedMessage

IDS = itertools.count(1)


def dead_letter(stack: LocalStack, session: str, body: str) -> str:
    """A message as the turn queue's redrive leaves it in the DLQ; its message id."""
    return str(
        stack.client("sqs").send_message(
            QueueUrl=stack.dead_letter_queue_url,
            MessageBody=body,
            MessageGroupId=session,
            MessageDeduplicationId=f"dedup-{next(IDS)}",
        )["MessageId"]
    )


def customer_message(channel: str, sender: str, text: str, session: str) -> str:
    message = NormalizedMessage(
        channel=channel,
        account_id="acct",
        event_id=f"e{next(IDS)}",
        conversation_key=f"{channel}:{session}",
        customer_id=sender,
        text=text,
        raw_type="message",
        received_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    return QueuedMessage(session_id=session, agent_id="bank", message=message).model_dump_json()


def person_message(session: str, text: str) -> str:
    job = QueuedPersonMessage(
        session_id=session, agent_id="bank", change_id=f"c{next(IDS)}", event_id="ev", text=text
    )
    return job.model_dump_json()


def everything_in(stack: LocalStack) -> list[tuple[str, str, str]]:
    """(group, message id, body) of every message now in the DLQ, each group in order; all
    received (the caller is done with the queue)."""
    sqs = stack.client("sqs")
    found = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=stack.dead_letter_queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["MessageGroupId"],
            VisibilityTimeout=300,
        ).get("Messages", [])
        if not batch:
            return found
        for m in batch:
            found.append((m["Attributes"]["MessageGroupId"], m["MessageId"], m["Body"]))
            sqs.delete_message(
                QueueUrl=stack.dead_letter_queue_url, ReceiptHandle=m["ReceiptHandle"]
            )


def no_deadline() -> None:
    return None


def scan(stack: LocalStack, check_time: Any = no_deadline) -> DeadLetterScan:
    return DeadLetterScan(stack.client("sqs"), stack.dead_letter_queue_url, check_time)


def test_her_dead_letters_go_even_behind_someone_elses_and_the_others_keep_their_order(
    local_stack: LocalStack,
) -> None:
    group, own, other = "generic-group", "generic-alice", "telegram-carol"
    bodies = {
        "bob first": customer_message("generic", "bob", "bob first", group),
        "her IBAN DE89370400440532013000": customer_message(
            "generic", "alice", "her IBAN DE89370400440532013000", group
        ),
        "bob again": customer_message("generic", "bob", "bob again", group),
        "her own session": customer_message("generic", "alice", "her own session", own),
        "a person wrote to her": person_message(own, "a person wrote to her"),
        "carol on telegram": customer_message("telegram", "alice", "carol on telegram", other),
        "carol again": customer_message("telegram", "carol", "carol again", other),
    }
    ids = {text: dead_letter(local_stack, session_of(body), body) for text, body in bodies.items()}

    deleted = scan(local_stack).purge(judge_for("generic", "alice", {own}))

    assert deleted == 3
    left = everything_in(local_stack)
    texts = [text_of(body) for _, _, body in left]
    assert not [t for t in texts if "her" in t]
    by_group = {g: [text_of(b) for gg, _, b in left if gg == g] for g in (group, own, other)}
    assert by_group == {
        group: ["bob first", "bob again"],  # moved to the tail, in order
        own: [],
        other: ["carol on telegram", "carol again"],  # another channel's alice: not hers
    }
    kept_ids = {mid for g, mid, _ in left if g == other}
    assert kept_ids == {ids["carol on telegram"], ids["carol again"]}  # held, never moved


def test_what_it_holds_is_visible_again_at_once_even_when_cut_short(
    local_stack: LocalStack,
) -> None:
    for n in range(3):
        dead_letter(local_stack, f"telegram-{n}", customer_message("telegram", "dan", "hi", "s"))
    checks = itertools.count()

    def one_receive_only() -> None:
        if next(checks) >= 1:
            raise TimeoutError("budget spent")

    with pytest.raises(TimeoutError):
        scan(local_stack, one_receive_only).purge(judge_for("generic", "alice", set()))

    assert len(everything_in(local_stack)) == 3  # none left in flight for a minute


def test_an_empty_queue_is_not_polled(local_stack: LocalStack, count_calls: Any) -> None:
    receives = count_calls(local_stack.client("sqs"), "ReceiveMessage")
    assert scan(local_stack).purge(judge_for("generic", "alice", set())) == 0
    assert receives == []


def test_a_message_it_cannot_read_is_kept_and_looked_behind() -> None:
    judge = judge_for("generic", "alice", set())
    assert judge("not json") is Verdict.KEPT_LOOKING_BEHIND
    assert judge(customer_message("slack", "alice", "x", "slack-1")) is Verdict.KEPT


def session_of(body: str) -> str:
    parsed = QueuedPersonMessage.parse(body)
    return parsed.session_id if parsed else QueuedMessage.model_validate_json(body).session_id


def text_of(body: str) -> str:
    parsed = QueuedPersonMessage.parse(body)
    return parsed.text if parsed else QueuedMessage.model_validate_json(body).message.text
