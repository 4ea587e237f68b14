"""The in-memory store keeps its own copy of a trace (a tree copy since #22, not deepcopy):
the caller mutating its trace after the commit, or a reader mutating what it read, never
changes what is stored; anything that is not a JSON tree still gets a full deep copy."""

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
