"""`waypoint serve` killed with SIGKILL mid-burst and started again on the same data directory:
every message it acknowledged is answered exactly once, and the conversations — a login among
them — carry on where they were. With `--ephemeral` it forgets everything, as before.

Real processes over real HTTP: the CLI's `serve`, the front end receiving signed callbacks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.served_process import FrontEnd, ServedProcess

BURST = 24  # conversations, one message each
KILL_AFTER = 8  # acknowledged messages before the kill
SENDERS = 4
# A loaded 2-core machine: a turn takes ~0.2–2 s here, a start up to a minute.
ANSWERED_WITHIN = 300.0

pytestmark = [pytest.mark.timeout(900), pytest.mark.long(75)]  # long: tests/conftest.py


@pytest.fixture
def front_end() -> Iterator[FrontEnd]:
    server = FrontEnd()
    yield server
    server.close()


def _say(served: ServedProcess, front_end: FrontEnd, conversation: str, event_id: str, text: str):
    assert served.send(conversation, event_id, text, front_end.url) == 200
    front_end.wait_for([event_id], timeout=ANSWERED_WITHIN, describe=served.describe)
    (reply,) = front_end.answers_to(event_id)
    return str(reply["text"])


def _log_in(served: ServedProcess, front_end: FrontEnd, conversation: str) -> None:
    assert "username" in _say(
        served, front_end, conversation, f"{conversation}-1", "I want to log in"
    )
    assert "password" in _say(served, front_end, conversation, f"{conversation}-2", "seldo")
    assert "logged in" in _say(served, front_end, conversation, f"{conversation}-3", "monkey")


def _burst_until_killed(served: ServedProcess, front_end: FrontEnd) -> dict[str, int]:
    """Send BURST messages from SENDERS threads; SIGKILL the server once KILL_AFTER of them were
    acknowledged with 200. Returns event id → HTTP status (0: the connection died)."""
    statuses: dict[str, int] = {}
    lock = threading.Lock()
    acknowledged = threading.Event()
    pending = [f"burst-{n}" for n in range(BURST)]

    def sender() -> None:
        while True:
            with lock:
                if not pending:
                    return
                conversation = pending.pop(0)
            status = served.send(conversation, f"{conversation}-1", "Hi", front_end.url)
            with lock:
                statuses[f"{conversation}-1"] = status
                if sum(s == 200 for s in statuses.values()) >= KILL_AFTER:
                    acknowledged.set()

    threads = [threading.Thread(target=sender) for _ in range(SENDERS)]
    for thread in threads:
        thread.start()
    assert acknowledged.wait(ANSWERED_WITHIN), f"fewer than {KILL_AFTER} acknowledged: {statuses}"
    served.kill()
    for thread in threads:
        thread.join(timeout=120)
    return statuses


def _wait_until_the_queue_is_empty(served: ServedProcess, timeout: float) -> None:
    sqs = served.aws_client("sqs")
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    deadline = time.monotonic() + timeout
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        attributes = sqs.get_queue_attributes(
            QueueUrl=served.exported()["WAYPOINT_QUEUE_URL"], AttributeNames=names
        )["Attributes"]
        if sum(int(attributes.get(n, 0)) for n in names) == 0:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= 1.0:
                return
        else:
            quiet_since = None
        time.sleep(0.2)
    raise TimeoutError(f"the turn queue was not empty after {timeout:.0f} s")


def test_a_served_stack_killed_mid_burst_answers_every_acknowledged_message_once_after_restart(
    tmp_path: Path, front_end: FrontEnd
) -> None:
    cache = tmp_path / "cache"
    # First run: the default data directory, ./.waypoint of the working directory.
    served = ServedProcess([], cwd=tmp_path, cache_dir=cache)
    try:
        _log_in(served, front_end, "login")
        statuses = _burst_until_killed(served, front_end)
    finally:
        served.kill()
    assert (tmp_path / ".waypoint" / "moto" / "sqs.pickle").exists()
    acknowledged = sorted(e for e, status in statuses.items() if status == 200)
    unanswered_at_kill = [e for e in acknowledged if not front_end.answers_to(e)]

    # Second run: the same directory, named with --data.
    served = ServedProcess(["--data", str(tmp_path / ".waypoint")], cwd=tmp_path, cache_dir=cache)
    try:
        served.wait_for_output("restored from")
        front_end.wait_for(acknowledged, timeout=ANSWERED_WITHIN, describe=served.describe)

        # The login survived: the balance journey goes straight to the account question.
        asked = _say(served, front_end, "login", "login-4", "What is the balance of my account?")
        assert "username" not in asked.lower() and "password" not in asked.lower(), asked
        assert "1000.00" in _say(served, front_end, "login", "login-5", "Checking")

        _wait_until_the_queue_is_empty(served, timeout=ANSWERED_WITHIN)
    finally:
        served.stop()

    assert unanswered_at_kill, "the kill came after every reply: nothing was left to recover"
    for event_id in acknowledged:
        assert len(front_end.answers_to(event_id)) == 1, event_id
    for event_id in statuses:  # the ones cut off mid-request: answered at most once
        assert len(front_end.answers_to(event_id)) <= 1, event_id
    assert front_end.bad_signatures == 0


def test_an_ephemeral_served_stack_forgets_everything_on_restart(
    tmp_path: Path, front_end: FrontEnd
) -> None:
    cache = tmp_path / "cache"
    served = ServedProcess(["--ephemeral"], cwd=tmp_path, cache_dir=cache)
    try:
        served.wait_for_output("in memory (--ephemeral)")
        _log_in(served, front_end, "login")
    finally:
        served.kill()

    served = ServedProcess(["--ephemeral"], cwd=tmp_path, cache_dir=cache)
    try:
        asked = _say(served, front_end, "login", "login-4", "What is the balance of my account?")
    finally:
        served.stop()
    assert "username" in asked  # a new session: log in first
    assert not (tmp_path / ".waypoint").exists()
