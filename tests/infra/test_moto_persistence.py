"""The local stack's data directory: every acknowledged change is on disk before its response,
in-flight messages come back at once, one server per directory, agent versions survive.

A "restart" here is a second stack on the same directory: moto's backends are reset when it
starts, so all it has is what the first one wrote to disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from engine.model import AgentSnapshot
from examples.banking import TOOLS_MODULE
from examples.banking import load as load_bank
from infra.aws.local_stack import LocalStack
from infra.aws.moto_persistence import LocalStateError, MotoStateFiles
from infra.runtime import current_runtime
from waypoint.local_server import LocalServer

KEY = {"pk": {"S": "SESSION#s1"}, "sk": {"S": "META"}}


def _send(stack: LocalStack, n: int) -> None:
    stack.client("sqs").send_message(
        QueueUrl=stack.queue_url,
        MessageBody=f"message {n}",
        MessageGroupId=f"session-{n}",
        MessageDeduplicationId=f"event-{n}",
    )


def test_in_flight_messages_come_back_at_once_after_a_restart(tmp_path: Path) -> None:
    with LocalStack(server=True, data_dir=tmp_path) as stack:
        _send(stack, 1)
        _send(stack, 2)
        sqs = stack.client("sqs")
        (taken,) = sqs.receive_message(
            QueueUrl=stack.queue_url, MaxNumberOfMessages=1, VisibilityTimeout=3600
        )["Messages"]
        # The worker holding it dies with the process (stop() writes nothing of its own).

    with LocalStack(server=True, data_dir=tmp_path) as stack:
        assert stack.restored
        messages = stack.client("sqs").receive_message(
            QueueUrl=stack.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        )["Messages"]
    counts = {m["Body"]: m["Attributes"]["ApproximateReceiveCount"] for m in messages}
    assert set(counts) == {"message 1", "message 2"}  # the taken one without its hour's wait
    assert counts[taken["Body"]] == "2"


def test_a_change_that_could_not_be_written_to_disk_is_not_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalStack(server=True, data_dir=tmp_path) as stack:
        ddb = stack.client("dynamodb")
        ddb.put_item(TableName=stack.table_name, Item={**KEY, "n": {"N": "1"}})

        def disk_full(self: MotoStateFiles, service: str) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(MotoStateFiles, "save", disk_full)
        # The adapters' client would retry the 500; this one reports the first answer.
        client = boto3.client(
            "dynamodb",
            endpoint_url=stack.endpoint_url,
            region_name=stack.region,
            config=Config(retries={"total_max_attempts": 1}),
        )
        with pytest.raises(ClientError) as refused:
            client.put_item(TableName=stack.table_name, Item={**KEY, "n": {"N": "2"}})
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
        monkeypatch.undo()

    with LocalStack(server=True, data_dir=tmp_path) as stack:
        item = stack.client("dynamodb").get_item(TableName=stack.table_name, Key=KEY)["Item"]
    assert item["n"] == {"N": "1"}  # the refused write is not there; the acknowledged one is


def _modes(directory: Path) -> dict[str, int]:
    return {
        str(path.relative_to(directory.parent)): path.stat().st_mode & 0o777
        for path in [directory, *sorted(directory.rglob("*"))]
    }


def test_the_data_directory_and_its_files_are_readable_by_their_owner_only(
    tmp_path: Path,
) -> None:
    """The snapshots hold every conversation: no other local user may list or read them."""
    data = tmp_path / "data"
    with LocalStack(server=True, data_dir=data) as stack:
        _send(stack, 1)
        stack.client("dynamodb").put_item(TableName=stack.table_name, Item=KEY)
    modes = _modes(data)
    assert {"data/moto/dynamodb.pickle", "data/moto/sqs.pickle", "data/lock"} <= set(modes)
    for name, mode in modes.items():
        assert mode == (0o700 if (tmp_path / name).is_dir() else 0o600), (name, oct(mode))


def test_a_data_directory_an_older_version_left_open_is_closed_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LocalStack(server=True, data_dir=data) as stack:
        _send(stack, 1)
    for path in [data, *data.rglob("*")]:  # as an older `waypoint serve` created them
        path.chmod(0o755 if path.is_dir() else 0o644)
    with LocalStack(server=True, data_dir=data) as stack:
        assert stack.restored
    for name, mode in _modes(data).items():
        assert mode & 0o077 == 0, (name, oct(mode))


def test_two_servers_cannot_share_a_data_directory(tmp_path: Path) -> None:
    with LocalStack(server=True, data_dir=tmp_path):
        second = LocalStack(server=True, data_dir=tmp_path)
        with pytest.raises(LocalStateError, match="in use by another"):
            second.start()
        second.stop()


def test_a_snapshot_from_elsewhere_is_refused_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "moto").mkdir()
    (tmp_path / "moto" / "dynamodb.pickle").write_bytes(b"not a snapshot")
    stack = LocalStack(server=True, data_dir=tmp_path)
    with pytest.raises(LocalStateError, match="--ephemeral"):
        stack.start()
    stack.stop()


def _newer(agent: AgentSnapshot) -> AgentSnapshot:
    return agent.model_copy(update={"description": "a newer version", "version": ""})


def test_a_version_published_to_the_running_stack_stays_published_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    bank = load_bank()
    with LocalServer(bank, tools_module=TOOLS_MODULE, data_dir=tmp_path / "data"):
        runtime = current_runtime()
        newer = runtime.run(runtime.publish_agent(_newer(bank)))

    with LocalServer(bank, tools_module=TOOLS_MODULE, data_dir=tmp_path / "data"):
        runtime = current_runtime()
        published: Any = runtime.run(runtime.agents.published_version(bank.id))
        versions = runtime.run(runtime.agents.versions(bank.id))
    assert published == newer.version
    assert len(versions) == 2


def test_a_reply_being_sent_when_the_server_stopped_is_sent_at_once_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by tests/reliability/test_restart.py: a reply whose send was under way when
    `waypoint serve` was killed stayed SENDING under the dead process's 60 s lease; the restarted
    poller retried its record every few seconds, each retry found the lease live, and the queue's
    receives ran out — the reply was dead-lettered, never sent. After a restart every such lease
    is released (the process holding it is gone) and the next delivery takes the record."""
    from infra.outbox import LeaseOutcome, OutboxStatus

    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    bank = load_bank()
    with LocalServer(bank, tools_module=TOOLS_MODULE, data_dir=tmp_path / "data"):
        runtime = current_runtime()
        outbox = runtime.outbox
        held = runtime.run(outbox.take("s-1", "turn-1", "generic", owner="dead", lease_seconds=60))
        sent = runtime.run(outbox.take("s-2", "turn-2", "generic", owner="old", lease_seconds=60))
        runtime.run(outbox.mark_sent("s-2", "turn-2", ["m-1"]))
        assert held.outcome is LeaseOutcome.TAKEN and sent.outcome is LeaseOutcome.TAKEN
        busy = runtime.run(outbox.take("s-1", "turn-1", "generic", owner="new", lease_seconds=60))
        assert busy.outcome is LeaseOutcome.BUSY  # live lease: not taken while it lives

    with LocalServer(bank, tools_module=TOOLS_MODULE, data_dir=tmp_path / "data"):
        runtime = current_runtime()
        outbox = runtime.outbox
        entry = runtime.run(outbox.get("s-1", "turn-1"))
        assert entry is not None and entry.status is OutboxStatus.PENDING
        again = runtime.run(outbox.take("s-1", "turn-1", "generic", owner="new", lease_seconds=60))
        assert again.outcome is LeaseOutcome.TAKEN
        done = runtime.run(outbox.get("s-2", "turn-2"))
        assert done is not None and done.status is OutboxStatus.SENT  # a sent reply stays sent
