"""The studio's routes of the management API: an agent's sessions listed from the session index
(a Query, kept at commit, gone with an erased customer) and a session's turns, page by page."""

from __future__ import annotations

from typing import Any

import pytest

from engine.sessions.session import SessionState
from infra.runtime import Runtime
from tests.functions.conftest import load_session
from tests.functions.test_management import call


def _talk(session_id: str, customer: str, *texts: str) -> list[dict[str, Any]]:
    status, _ = call("POST", "/sessions", {"customer_id": customer, "session_id": session_id})
    assert status == 201
    turns = []
    for i, text in enumerate(texts):
        status, turn = call(
            "POST",
            f"/sessions/{session_id}/messages",
            {"text": text, "event_id": f"{session_id}-{i}"},
        )
        assert status == 200, turn
        turns.append(turn)
    return turns


def _all_sessions(limit: int) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = {"agent": "bank", "limit": str(limit), **({"cursor": cursor} if cursor else {})}
        status, page = call("GET", "/sessions", query=query)
        assert status == 200, page
        listed.extend(page["sessions"])
        cursor = page["cursor"]
        if cursor is None:
            return listed


def test_the_session_list_shows_each_session_as_its_last_commit_left_it(runtime: Runtime) -> None:
    _talk("web-list-a", "customer-ann-77", "hi")
    _talk("web-list-b", "customer-bob-77", "hi", "I want to transfer money")
    call("POST", "/sessions", {"customer_id": "cy", "session_id": "web-list-c"})

    listed = {s["session_id"]: s for s in _all_sessions(limit=50)}

    assert set(listed) == {"web-list-a", "web-list-b", "web-list-c"}
    b = listed["web-list-b"]
    state: SessionState = load_session(runtime, "web-list-b")
    assert b["channel"] == "api" and b["agent_id"] == "bank"
    assert b["events"] == state.next_offset() == 4
    assert b["active_journeys"] == state.active_journey_ids
    assert b["mode"] == "auto"
    assert b["status"] == ("in journey" if state.active_journey_ids else "open")
    assert b["last_activity"] is not None and listed["web-list-c"]["last_activity"] is None
    # newest activity first; a session nothing happened in yet comes last
    assert list(listed)[-1] == "web-list-c"
    assert "customer-" not in str(listed)  # no customer ids in the index


def test_the_session_list_pages_through_every_session_once(runtime: Runtime) -> None:
    for i in range(7):
        call("POST", "/sessions", {"customer_id": f"c{i}", "session_id": f"web-page-{i}"})

    listed = [s["session_id"] for s in _all_sessions(limit=3)]

    assert sorted(listed) == [f"web-page-{i}" for i in range(7)]


def test_an_erased_customers_sessions_leave_the_list(runtime: Runtime) -> None:
    _talk("web-erase-a", "erase-me", "hi")
    _talk("web-erase-b", "keep-me", "hi")

    assert call("DELETE", "/customers/api/erase-me")[0] == 200

    assert [s["session_id"] for s in _all_sessions(limit=10)] == ["web-erase-b"]


@pytest.mark.parametrize("cursor", ["../etc", "a" * 101, "x y"])
def test_a_forged_cursor_is_refused_with_what_to_do(runtime: Runtime, cursor: str) -> None:
    status, body = call("GET", "/sessions", query={"agent": "bank", "cursor": cursor})
    assert status in (400, 422)
    assert body["error"]


def test_listing_needs_the_api_key(runtime: Runtime) -> None:
    assert call("GET", "/sessions", key="wrong")[0] == 401
    assert call("GET", "/sessions/web-1/turns", key=None)[0] == 401


def test_a_sessions_turns_list_every_turn_with_its_time_and_open_their_traces(
    runtime: Runtime,
) -> None:
    turns = _talk("web-turns", "tess", "hi", "what is my balance?", "thanks")

    listed: list[dict[str, Any]] = []
    after = -1
    while True:
        status, page = call(
            "GET", "/sessions/web-turns/turns", query={"after": str(after), "limit": "2"}
        )
        assert status == 200, page
        listed.extend(page["turns"])
        if page["next_after"] is None:
            break
        after = page["next_after"]

    assert [t["turn_id"] for t in listed] == [t["turn_id"] for t in turns]
    assert all(t["at"] for t in listed)
    for turn in listed:
        status, trace = call("GET", f"/sessions/web-turns/traces/{turn['turn_id']}")
        assert status == 200 and trace["turn_id"] == turn["turn_id"]
    assert call("GET", "/sessions/no-such-session/turns")[0] == 404
