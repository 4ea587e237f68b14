"""The local stack is derived from template.yaml, and the template itself passes cfn-lint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from infra.aws import clients
from infra.aws.cfn_template import (
    BUCKET,
    QUEUE,
    SECRET,
    TABLE,
    declared_resources,
    load_template,
)
from infra.aws.dead_letters import DEAD_LETTER_QUEUE_URL_ENV
from infra.aws.dynamo_sessions import DynamoSessionStore
from infra.aws.erasure_key import ERASURE_KEY_SECRET_ENV, erasure_key
from infra.aws.local_resources import TemplateNotSupported
from infra.aws.local_stack import LocalStack
from tests.contracts.factories import new_session, turn_commit

REPO = Path(__file__).resolve().parents[2]


def test_short_tags_are_read_as_intrinsic_functions() -> None:
    queue = load_template()["Resources"]["TurnQueue"]["Properties"]
    assert queue["QueueName"] == {"Fn::Sub": "waypoint-${Stage}-turns.fifo"}
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["TurnDeadLetterQueue", "Arn"]
    }


def test_the_stack_creates_exactly_what_the_template_declares(local_stack: LocalStack) -> None:
    declared = declared_resources(local_stack.template, TABLE, BUCKET, QUEUE, SECRET)
    assert set(local_stack.resources) == set(declared)
    names = {lid: r.name for lid, r in local_stack.resources.items()}

    tables = local_stack.client("dynamodb").list_tables()["TableNames"]
    buckets = [b["Name"] for b in local_stack.client("s3").list_buckets()["Buckets"]]
    queues = local_stack.client("sqs").list_queues()["QueueUrls"]
    assert sorted(tables) == sorted(n for lid, n in names.items() if declared[lid]["Type"] == TABLE)
    assert sorted(buckets) == sorted(
        n for lid, n in names.items() if declared[lid]["Type"] == BUCKET
    )
    assert sorted(q.rsplit("/", 1)[1] for q in queues) == sorted(
        n for lid, n in names.items() if declared[lid]["Type"] == QUEUE
    )
    assert local_stack.table_name == "waypoint-local-state"  # Stage=local substituted
    secrets = local_stack.client("secretsmanager").list_secrets()["SecretList"]
    assert sorted(s["Name"] for s in secrets) == sorted(
        n for lid, n in names.items() if declared[lid]["Type"] == SECRET
    )


def test_the_table_and_queues_have_the_declared_settings(local_stack: LocalStack) -> None:
    ddb = local_stack.client("dynamodb")
    table = ddb.describe_table(TableName=local_stack.table_name)["Table"]
    assert [(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]] == [
        ("pk", "HASH"),
        ("sk", "RANGE"),
    ]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = ddb.describe_time_to_live(TableName=local_stack.table_name)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")

    sqs = local_stack.client("sqs")
    turns = sqs.get_queue_attributes(QueueUrl=local_stack.queue_url, AttributeNames=["All"])
    dlq = sqs.get_queue_attributes(
        QueueUrl=local_stack.dead_letter_queue_url, AttributeNames=["All"]
    )
    attributes = turns["Attributes"]
    assert attributes["FifoQueue"] == "true"
    assert attributes["ContentBasedDeduplication"] == "false"
    redrive = json.loads(attributes["RedrivePolicy"])
    declared = load_template()["Resources"]["TurnQueue"]["Properties"]["RedrivePolicy"]
    assert redrive == {
        "deadLetterTargetArn": dlq["Attributes"]["QueueArn"],
        "maxReceiveCount": declared["maxReceiveCount"],
    }


def test_the_functions_environment_comes_from_the_template_globals(local_stack: LocalStack) -> None:
    assert local_stack.env == {
        clients.TABLE_ENV: local_stack.table_name,
        clients.BUCKET_ENV: local_stack.bucket,
        clients.QUEUE_URL_ENV: local_stack.queue_url,
        ERASURE_KEY_SECRET_ENV: local_stack.resources["ErasureKey"].arn,
        DEAD_LETTER_QUEUE_URL_ENV: local_stack.dead_letter_queue_url,
    }
    assert all(os.environ[name] == value for name, value in local_stack.env.items())


def test_the_environment_is_restored_on_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(clients.TABLE_ENV, raising=False)
    with LocalStack():
        assert os.environ[clients.TABLE_ENV] == "waypoint-local-state"
    assert clients.TABLE_ENV not in os.environ


def test_an_unmapped_property_fails_loudly(tmp_path: Path) -> None:
    template = (
        (REPO / "template.yaml")
        .read_text()
        .replace(
            "      BillingMode: PAY_PER_REQUEST\n",
            "      BillingMode: PAY_PER_REQUEST\n      WarmThroughput:\n        ReadUnitsPerSecond: 5\n",
        )
    )
    path = tmp_path / "template.yaml"
    path.write_text(template)
    with pytest.raises(TemplateNotSupported, match="WarmThroughput"), LocalStack(template=path):
        pass


async def test_server_mode_serves_the_adapters_over_http() -> None:
    with LocalStack(server=True) as stack:
        assert stack.endpoint_url is not None
        assert os.environ[clients.ENDPOINT_URL_ENV] == stack.endpoint_url
        assert os.environ["MOTO_PORT"] == stack.endpoint_url.rsplit(":", 1)[1]
        store = DynamoSessionStore()
        state = await store.create(new_session())
        assert await store.commit(turn_commit(state, "t1", "over http")) is True
        loaded = await store.load("s1")
        assert loaded is not None and loaded.events[0].text == "over http"
    assert clients.ENDPOINT_URL_ENV not in os.environ


def test_each_stack_generates_its_own_erasure_key_and_a_restored_one_keeps_it(
    tmp_path: Path,
) -> None:
    """The key erased people are named by is generated with the stack, never a constant; the
    served stack keeps it with its data (a new key would forget the erasures it recorded)."""
    with LocalStack():
        one = erasure_key()
    with LocalStack():
        assert erasure_key() != one and len(erasure_key()) == 64
    with LocalStack(server=True, data_dir=tmp_path):
        kept = erasure_key()
    with LocalStack(server=True, data_dir=tmp_path) as restored:
        assert restored.restored and erasure_key() == kept


def test_each_server_stack_has_credentials_of_its_own_and_the_adapters_sign_with_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server refuses every other key id (infra.aws.moto_access): a second stack in one
    process must not be called with the first one's credentials, which boto3's shared session
    would otherwise have kept; the environment's own credentials come back afterwards."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "the-developers-own")
    seen = []
    for _ in range(2):
        with LocalStack(server=True) as stack:
            key_id = os.environ["AWS_ACCESS_KEY_ID"]
            assert key_id != "the-developers-own" and len(key_id) == 20
            seen.append(key_id)
            assert stack.table_name in stack.client("dynamodb").list_tables()["TableNames"]
    assert seen[0] != seen[1]
    assert os.environ["AWS_ACCESS_KEY_ID"] == "the-developers-own"


def test_a_waiting_long_poll_returns_empty_handed_when_woken_and_a_message_still_arrives() -> None:
    """`wake_long_polls` (called by the local poller when it stops) ends a long poll at once,
    with nothing, as a poll that timed out would; the next poll receives what is sent."""
    import threading
    import time

    from infra.aws.moto_fidelity import wake_long_polls

    with LocalStack(server=True) as stack:
        sqs = stack.client("sqs")
        received: list[list[dict[str, object]]] = []

        def poll() -> None:
            answer = sqs.receive_message(QueueUrl=stack.queue_url, WaitTimeSeconds=20)
            received.append(answer.get("Messages", []))

        waiting = threading.Thread(target=poll)
        waiting.start()
        # Woken again every 0.2 s (the poll may not have started when first told, on a loaded
        # machine), for at most 15 s: far before the 20 s it asked to wait.
        deadline = time.monotonic() + 15
        while waiting.is_alive() and time.monotonic() < deadline:
            wake_long_polls()
            waiting.join(timeout=0.2)
        assert not waiting.is_alive() and received == [[]]

        sqs.send_message(
            QueueUrl=stack.queue_url,
            MessageBody="{}",
            MessageGroupId="g",
            MessageDeduplicationId="d",
        )
        later = sqs.receive_message(QueueUrl=stack.queue_url, WaitTimeSeconds=5)
        assert [m["Body"] for m in later["Messages"]] == ["{}"]
