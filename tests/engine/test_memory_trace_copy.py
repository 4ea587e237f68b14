"""The in-memory store hands out copies of its traces (a tree copy since #22, not deepcopy): a
reader mutating what it read never changes what is stored; anything that is not a JSON tree still
gets a full deep copy. Since #34 (sixth pass) it keeps a committed trace as given: the store owns
a commit's trace dicts (`engine.ports.TurnCommit`), and copying 5,000 held-back ids per turn on
the way in cost as much as the rest of the commit."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from engine.memory.sessions import _copy_tree


def test_a_trace_tree_is_copied_all_the_way_down() -> None:
    trace = {"stages": [{"name": "recall", "ms": 1.5, "notes": ["a", None, True, 3]}], "id": "t"}
    copied = _copy_tree(trace)
    assert copied == copy.deepcopy(trace)
    trace["stages"][0]["notes"].append("later")  # type: ignore[index]
    trace["stages"][0]["name"] = "changed"  # type: ignore[index]
    assert copied["stages"][0] == {"name": "recall", "ms": 1.5, "notes": ["a", None, True, 3]}


def test_values_outside_a_json_tree_are_deep_copied() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    nested = {"set": {1, 2}, "tuple": ([1], 2), "when": when}
    copied = _copy_tree({"extra": nested})
    assert copied == {"extra": nested}
    nested["set"].add(3)  # type: ignore[attr-defined]
    nested["tuple"][0].append(9)  # type: ignore[index]
    assert copied["extra"]["set"] == {1, 2}
    assert copied["extra"]["tuple"] == ([1], 2)


async def test_the_store_keeps_a_committed_trace_and_hands_out_copies() -> None:
    """The store owns a commit's trace (`TurnCommit`): kept as given, never copied on the hot
    path; every read is a copy of its own, so a reader changing what it read changes nothing."""
    from engine.memory.sessions import InMemorySessionStore
    from tests.contracts.factories import new_session, turn_commit

    store = InMemorySessionStore()
    state = await store.create(new_session("s-trace"))
    trace = {"turn_id": "t1", "held_back_guideline_ids": ["g1", "g2"], "stages": [{"ms": 1.0}]}
    expected = copy.deepcopy(trace)
    assert await store.commit(turn_commit(state, "t1", "hello", trace=trace))
    first = await store.trace("s-trace", "t1")
    assert first == expected
    assert first is not trace
    first["held_back_guideline_ids"].append("g3")
    first["stages"][0]["ms"] = 9.0
    again = await store.trace("s-trace", "t1")
    assert again == expected
    assert again is not first
