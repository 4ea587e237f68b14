"""Publishing changed agents mid-conversation, on the moto stack through the real functions: the
management API (publish, sessions, synchronous turns) and the webhook → SQS → worker path.

At each point of the banking flow a changed version is published (steps renamed, removed or
reordered; journeys removed; tools renamed). Publishing is refused while it would strand the
session, naming the count; forced, the session keeps its pinned version until a safe point (or
moves by a declared migration): no crash, no lost message, a clear reply each time."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from engine.authoring import dump_agent
from engine.model import AgentSnapshot
from examples.banking import bank
from functions import tool_task
from infra.aws.lambda_routing import DEFAULT_TOOL_FUNCTION, LambdaRouter, create_tool_state_machine
from infra.runtime import Runtime
from tests.engine.agent_versions import (
    changed_bank,
    greeting_changed,
    migrate,
    rename_step,
    rename_tool,
    reorder_transfer_questions,
    secrets_undeclared,
    without_journey,
)
from tests.functions.conftest import (
    API_KEY,
    CountingLLM,
    drain,
    everything_stored,
    invoke_management,
    load_session,
    telegram_says,
)
from tests.functions.lambda_events import http_event

SEED = ["Hi", "Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324", "500"]
DONE = "Done! I transferred 500.00 USD to account 1234324. Your new balance is $500.00."
V1 = "450f8869958987f3"  # the banking example's content version


def api(method: str, path: str, body: Any = None, **query: str) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
    headers = {"content-type": "application/json", "x-api-key": API_KEY}
    response = invoke_management(
        http_event(method, path, body=raw, headers=headers, query=query or None)
    )
    text = response.get("body") or ""
    return response["statusCode"], json.loads(text) if text else None


def publish(agent: AgentSnapshot, **query: str) -> tuple[int, Any]:
    return api("POST", "/agents", json.dumps(dump_agent(agent)).encode(), **query)


class Chat:
    """One web-chat session through `POST /sessions/{id}/messages` (synchronous turns)."""

    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.n = 0
        self.replies: list[str] = []
        status, body = api(
            "POST", "/sessions", {"customer_id": "c-" + session_id, "session_id": session_id}
        )
        assert status == 201, body

    def say(self, text: str) -> str:
        self.n += 1
        status, turn = api(
            "POST",
            f"/sessions/{self.id}/messages",
            {"text": text, "event_id": f"{self.id}-{self.n}"},
        )
        assert status == 200, turn  # no crash: the turn committed and answered
        reply = turn["reply"]["text"]
        assert reply, f"an empty reply to {text!r}"
        self.replies.append(reply)
        return str(reply)

    def view(self) -> dict[str, Any]:
        status, session = api("GET", f"/sessions/{self.id}")
        assert status == 200
        return dict(session)

    def trace(self) -> dict[str, Any]:
        status, events = api("GET", f"/sessions/{self.id}/events")
        turn_id = events["events"][-1]["turn_id"]
        status, trace = api("GET", f"/sessions/{self.id}/traces/{turn_id}")
        assert status == 200
        return dict(trace)


@pytest.fixture(autouse=True)
def fresh_bank() -> None:
    bank.reset_bank()


CHANGES: dict[str, Callable[..., Any]] = {
    "transfer-removed": without_journey("transfer"),
    "login-removed": without_journey("authenticate"),
    "amount-step-renamed": rename_step("transfer", "ask_amount", "ask_sum"),
    "password-step-renamed": rename_step("authenticate", "ask_password", "ask_secret"),
    "transfer-steps-reordered": reorder_transfer_questions,
}


@pytest.mark.parametrize("at", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_publish_mid_conversation_is_refused_then_forced_and_the_session_finishes_pinned(
    runtime: Runtime, change: str, at: int
) -> None:
    chat = Chat(f"web-{change}-{at}")
    for text in SEED[:at]:
        chat.say(text)
    v2 = changed_bank(CHANGES[change])

    status, refused = publish(v2)
    if change == "transfer-removed" or (change == "login-removed" and at <= 3):
        assert status == 409  # the session is in (or waiting for) the removed journey
    stranded = [p for p in refused["problems"] if "1 session is" in p] if status == 409 else []
    if status == 409:  # the change touches where this session is
        assert stranded, refused
        assert api("GET", "/agents/bank")[1]["version"] == V1  # nothing flipped
        status, forced = publish(v2, force="true")
        assert status == 201 and forced["forced"], forced
    else:  # the change is elsewhere in the graph: nothing to strand
        assert status == 201, refused
    assert chat.view()["pinned"] and chat.view()["agent_version"] == V1

    for text in SEED[at:]:
        chat.say(text)
        assert chat.trace()["agent_version"] == V1

    assert chat.replies[-1] == DONE
    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]
    assert len(set(chat.replies)) == len(chat.replies)  # nothing asked twice, nothing dropped
    assert not chat.view()["pinned"]

    chat.say("Hi")  # the safe point: the next turn runs on the published version
    assert chat.view()["agent_version"] == v2.version
    assert chat.trace()["version_choice"] == "published"


def test_a_declared_migration_publishes_without_force_and_moves_the_session(
    runtime: Runtime,
) -> None:
    chat = Chat("web-migrated")
    for text in SEED[:6]:
        chat.say(text)  # at the transfer's amount question

    renamed = changed_bank(rename_step("transfer", "ask_amount", "ask_sum"))
    status, refused = publish(renamed)
    assert status == 409
    assert refused["problems"] == [
        "journey 'transfer' step 'ask_amount' is removed or renamed while 1 session is at it; "
        "declare a migration (migrations: [{journey: transfer, steps: {ask_amount: NEW_STEP}}]) "
        "to move them"
    ]
    migrated = changed_bank(
        rename_step("transfer", "ask_amount", "ask_sum"),
        migrate("transfer", {"ask_amount": "ask_sum"}),
    )
    status, published = publish(migrated)
    assert status == 201, published
    assert published["check"]["diff"]["journeys_changed"][0]["steps_renamed"] == {
        "ask_amount": "ask_sum"
    }

    assert chat.say("500") == DONE
    trace = chat.trace()
    assert trace["version_choice"] == "migrated" and trace["agent_version"] == migrated.version


def test_a_password_typed_after_a_publish_dropped_its_secret_is_in_no_api_response_or_item(
    runtime: Runtime, stack: Any, llm: CountingLLM
) -> None:
    """The session is at the password question; the published version migrates it to a login
    whose password is no longer declared secret. The password typed next still answers the
    step that asked for a secret: the management API's responses, every stored item and every
    prompt after that turn's reading of it hold it masked."""
    chat = Chat("web-secret-migrated")
    for text in SEED[:3]:
        chat.say(text)  # the transfer waits for the login, at ask_password
    status, published = publish(
        changed_bank(secrets_undeclared, migrate("authenticate", {}), migrate("transfer", {}))
    )
    assert status == 201, published
    first_of_turn = len(llm.prompts)

    assert "logged in" in chat.say("monkey")
    reply_prompt, after_turn = llm.prompts[-1], len(llm.prompts)
    for text in SEED[4:]:
        chat.say(text)

    assert chat.replies[-1] == DONE
    status, page = api("GET", f"/sessions/{chat.id}/events")
    turns = sorted({e["turn_id"] for e in page["events"] if e.get("turn_id")})
    responses = [
        page,
        chat.view(),
        *(api("GET", f"/sessions/{chat.id}/traces/{t}")[1] for t in turns),
    ]
    assert "monkey" not in json.dumps(responses, ensure_ascii=False) + " ".join(chat.replies)
    assert "monkey" not in everything_stored(stack)
    assert any("monkey" in p for p in llm.prompts[first_of_turn:after_turn])  # read, that turn
    assert "monkey" not in reply_prompt
    assert all("monkey" not in p for p in llm.prompts[after_turn:])


def test_publish_counts_the_sessions_at_each_step_and_forgets_those_that_finished(
    runtime: Runtime,
) -> None:
    at_amount = [Chat(f"web-amount-{i}") for i in range(2)]
    for chat in at_amount:
        for text in SEED[:6]:
            chat.say(text)
    waiting = Chat("web-waiting")
    for text in SEED[:2]:
        waiting.say(text)  # the transfer is suspended while the customer logs in
    v2 = changed_bank(without_journey("transfer"))

    status, refused = publish(v2)

    assert status == 409
    assert refused["check"]["sessions_in_flight"] == 3
    assert "journey 'transfer' is removed while 3 sessions are in it" in refused["problems"]

    for chat in at_amount:
        assert chat.say("500").startswith("Done! I transferred 500.00 USD")  # both finish
    bank.reset_bank()  # the same demo account paid both: fund it again for the third
    for text in SEED[2:]:
        waiting.say(text)
    assert waiting.replies[-1] == DONE
    status, published = publish(v2)
    assert status == 201, published  # nobody is in the transfer any more
    assert published["check"]["sessions_in_flight"] == 0


def test_a_renamed_tool_is_refused_unless_deployed_and_a_forced_one_never_completes_the_step(
    runtime: Runtime,
) -> None:
    renamed = changed_bank(rename_tool("transfer_money", "send_money"))

    status, refused = publish(renamed)

    assert status == 409
    assert refused["problems"][0].startswith(
        "tool 'send_money' is not in the deployed tool registry (it serves: authenticate, "
    )
    status, _ = publish(renamed, force="true")
    assert status == 201
    chat = Chat("web-new-on-v2")
    for text in SEED[1:]:
        chat.say(text)
    assert not chat.replies[-1].startswith("Done!")
    assert bank.BANK.transfers == []
    assert "transfer" not in load_session(runtime, chat.id).completed_journeys


def test_rollback_flips_the_pointer_back_and_names_the_stored_versions(runtime: Runtime) -> None:
    v2 = changed_bank(greeting_changed)
    assert publish(v2)[0] == 201

    status, rolled = api("POST", "/agents/bank/rollback")

    assert (status, rolled) == (
        200,
        {"agent_id": "bank", "from_version": v2.version, "to_version": V1},
    )
    assert api("GET", "/agents/bank")[1]["version"] == V1
    status, again = api("POST", "/agents/bank/rollback", {"version": v2.version})
    assert (status, again["to_version"]) == (200, v2.version)
    status, missing = api("POST", "/agents/bank/rollback", {"version": "nosuchversion"})
    assert status == 404 and V1 in missing["error"] and v2.version in missing["error"]
    assert api("POST", "/agents/nobody/rollback")[0] == 404


def test_the_issue_case_through_the_queue_no_retry_no_dead_letter_and_a_reply(
    runtime: Runtime, stack: Any, platforms: Any
) -> None:
    """Telegram → webhook → SQS → worker: the transfer waits for the login, the transfer
    journey is removed by a forced publish, the login completes — the reply is delivered."""
    for update_id, text in enumerate(SEED[:3], start=1):
        telegram_says(77, text, update_id)
        assert drain(stack) == [{"batchItemFailures": []}]
    assert publish(changed_bank(without_journey("transfer")), force="true")[0] == 201

    for update_id, text in enumerate(SEED[3:], start=4):
        telegram_says(77, text, update_id)
        assert drain(stack) == [{"batchItemFailures": []}]  # committed at the first attempt

    replies = [r.json()["text"] for r in platforms.replies()]
    assert len(replies) == len(SEED)  # every message answered once
    assert replies[-1] == DONE  # the session finished on its pinned version


def test_publish_asks_the_deployed_tool_function_and_refuses_when_it_cannot_answer(
    runtime: Runtime, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In AWS the registry is the tool Lambda's own: one `{"describe": "tools"}` Invoke. A tool
    function that fails to answer refuses the publish (503) rather than skipping the check."""
    create_tool_state_machine(
        stack.client("stepfunctions"), stack.client("lambda"), iam=stack.client("iam")
    )
    monkeypatch.setenv("WAYPOINT_TOOL_FUNCTION", DEFAULT_TOOL_FUNCTION)
    renamed = changed_bank(rename_tool("transfer_money", "send_money"))

    with LambdaRouter({DEFAULT_TOOL_FUNCTION: tool_task.handler}) as router:
        status, refused = publish(renamed)
        assert publish(changed_bank(greeting_changed))[0] == 201
    assert status == 409 and "tool 'send_money'" in refused["problems"][0]
    assert [i.event for i in router.invocations_of(DEFAULT_TOOL_FUNCTION)] == [
        {"describe": "tools"}
    ] * 2

    def broken(event: Any, context: Any) -> Any:
        raise RuntimeError("WAYPOINT_TOOLS_MODULE is not set")

    with LambdaRouter({DEFAULT_TOOL_FUNCTION: broken}):
        status, failed = publish(changed_bank(greeting_changed, migrate("transfer", {})))
    assert status == 503 and "did not describe its tools" in failed["error"]
    assert api("GET", "/agents/bank")[1]["version"] == changed_bank(greeting_changed).version


def test_the_check_endpoint_reports_without_writing(runtime: Runtime) -> None:
    chat = Chat("web-checked")
    for text in SEED[:6]:
        chat.say(text)
    v2 = changed_bank(without_journey("transfer"))

    status, body = api("POST", "/agents/check", dump_agent(v2))

    assert status == 200 and body["refused"] and body["version"] == v2.version
    assert body["check"]["diff"]["journeys_removed"] == ["transfer"]
    assert body["check"]["risks"][0]["sessions"] == 1
    assert api("GET", "/agents/bank")[1]["version"] == V1
    assert api("GET", "/agents/bank", version=v2.version)[0] == 404  # not even stored
