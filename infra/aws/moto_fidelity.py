"""Make moto behave like DynamoDB and SQS under concurrent load.

The local stack's threaded server (`waypoint serve`, `demo`, `chat`) installs these patches
(`install()`, process-wide, once): moto is a dev dependency, imported only here and only then.
Found by the load suite over moto 5.2.5's threaded server:

- DynamoDB `transact_write_items` backs up every table it touches with a deep copy — once per
  transaction item — and on a cancelled transaction puts the copy back in place of the table. Each
  commit costs O(items × table size) (a load run slows to seconds per turn and gigabytes of
  garbage), and a rollback silently discards whatever other threads wrote meanwhile (an inbox
  claim, another session's turn). Here: writes and transactions run under one lock (DynamoDB's
  transactions are isolated), and a cancelled transaction restores only the items it touched.
- SQS FIFO: when two messages of one group are back from an expired visibility timeout, moto can
  hand out the later one first (it checks the earlier one's group while the later one still counts
  as in flight). SQS never does: here every message whose visibility timeout is over stops counting
  as in flight before a receive looks at the groups.
- SQS operations mutate queue state from several server threads without a lock (sporadic 500s
  such as "Set changed size during iteration"); here they run under one lock, and long polling
  waits outside it.

And one addition: `wake_long_polls()` ends every long poll waiting now with what it has (nothing),
as a poll that times out would — the local poller calls it when it stops, so stopping a served
stack does not wait out a poll (up to a second, at every `waypoint chat` exit and test teardown).
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.sqs.models import SQSBackend

# Public: moto_persistence snapshots each service under the lock its changes take.
DYNAMODB_WRITE_LOCK = threading.RLock()
SQS_LOCK = threading.RLock()
_WRITES = ("put_item", "update_item", "delete_item")
_SQS_OPERATIONS = (
    "send_message",
    "send_message_batch",
    "delete_message",
    "delete_message_batch",
    "change_message_visibility",
    "change_message_visibility_batch",
    "get_queue_attributes",
)


class _CopyWithoutTables:
    """Stands in for the `copy` module inside `moto.dynamodb.models`: a table "backup" is the
    table itself (the per-item copies below do the backing up)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)


def _touched(backend: DynamoDBBackend, items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(table, hash key, range key, copy of the item or None) for each item a transaction
    writes, taken before it runs."""
    touched = []
    for entry in items:
        operation, spec = next(iter(entry.items()))
        try:
            table = backend.get_table(spec["TableName"])
            if operation == "Put":
                names = [table.hash_key_attr, table.range_key_attr]
                key = {name: spec["Item"][name] for name in names if name}
            else:
                key = spec["Key"]
            hash_key, range_key = backend.get_keys_value(table, key)
        except Exception:  # a malformed item: moto's own transaction code reports it
            continue
        item = table.get_item(hash_key, range_key)
        touched.append((table, hash_key, range_key, copy.deepcopy(item)))
    return touched


def _restore(touched: list[tuple[Any, ...]]) -> None:
    for table, hash_key, range_key, item in reversed(touched):
        if item is None:
            table.delete_item(hash_key, range_key)
        elif range_key is not None:
            table.items[hash_key][range_key] = item
        else:
            table.items[hash_key] = item


def _locked(lock: threading.RLock, operation: Any) -> Any:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return operation(self, *args, **kwargs)

    return run


_wakes = 0  # how many times the waiting long polls were told to return


def wake_long_polls() -> None:
    """End every long poll waiting now, empty-handed (its consumer polls again or stops)."""
    global _wakes
    with SQS_LOCK:
        _wakes += 1


def _fifo_receive(original: Any) -> Any:
    def receive_message(
        self: SQSBackend,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> Any:
        deadline = time.monotonic() + (wait_seconds_timeout or 0)
        woken = _wakes
        while True:
            with SQS_LOCK:
                queue = self.get_queue(queue_name)
                for message in [m for m in queue.pending_messages if m.visible]:
                    queue.pending_messages.discard(message)  # its visibility timeout is over
                result = original(
                    self, queue_name, count, 0, visibility_timeout, message_attribute_names
                )
            if result or time.monotonic() >= deadline or _wakes != woken:
                return result
            time.sleep(0.02)

    return receive_message


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Patch moto's DynamoDB and SQS backends for this process (server threads included).
    Idempotent; the patches stay (they only restore the services' documented semantics)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        for cls, replacements in (
            (SQSBackend, _sqs_patches()),
            (DynamoDBBackend, _dynamodb_patches()),
        ):
            for name, replacement in replacements.items():
                setattr(cls, name, replacement)
        dynamodb_models.copy = _CopyWithoutTables()  # type: ignore[assignment]
        _installed = True


def _sqs_patches() -> dict[str, Any]:
    patches = {name: _locked(SQS_LOCK, getattr(SQSBackend, name)) for name in _SQS_OPERATIONS}
    patches["receive_message"] = _fifo_receive(SQSBackend.receive_message)
    return patches


def _dynamodb_patches() -> dict[str, Any]:
    original_transact = DynamoDBBackend.transact_write_items

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        with DYNAMODB_WRITE_LOCK:
            touched = _touched(self, transact_items)
            try:
                original_transact(self, transact_items)
            except Exception:
                _restore(touched)
                raise

    patches = {
        name: _locked(DYNAMODB_WRITE_LOCK, getattr(DynamoDBBackend, name)) for name in _WRITES
    }
    patches["transact_write_items"] = transact_write_items
    return patches
