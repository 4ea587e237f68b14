"""The local server's reply inbox (what `waypoint serve` / `demo` POST generic replies to) keeps
one copy of each reply: a worker that could not confirm a delivery (a timeout after the front end
had it) sends it again with the same id."""

from __future__ import annotations

import pytest

from waypoint.local_server import ReplyInbox


def test_a_repeated_reply_id_is_dropped_and_others_are_kept_in_order() -> None:
    inbox = ReplyInbox(secret="s")
    first = {"id": "ev1", "conversation_id": "c", "text": "one"}
    second = {"id": "ev2", "conversation_id": "c", "text": "two"}

    assert inbox.put(first) is True
    assert inbox.put(dict(first)) is False  # the worker's retry of the same reply
    assert inbox.put(second) is True
    assert inbox.put({"conversation_id": "c", "text": "no id: kept"}) is True

    assert [inbox.wait("c", 1)["text"] for _ in range(3)] == ["one", "two", "no id: kept"]
    with pytest.raises(TimeoutError, match="no reply"):
        inbox.wait("c", 0.05)
