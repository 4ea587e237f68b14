"""The management API: X-Api-Key on every route, agents published with every problem listed,
sessions created and talked to (synchronously, or queued for the worker)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import LLMTransientError
from engine.sessions.history import EVENT_WINDOW
from engine.sessions.session import PendingInterrupt, SessionState
from examples.banking import bank
from infra.runtime import Runtime
from infra.turn_queue import QueuedMessage
from tests.functions.conftest import (
    API_KEY,
    CountingLLM,
    drain,
    everything_stored,
    invoke_management,
    load_session,
    receive_all,
)
from tests.functions.lambda_events import http_event
from tests.functions.platforms import FakePlatforms

BANK_YAML = Path(__file__).resolve().parents[2] / "examples" / "banking" / "agent.yaml"


def call(
    method: str,
    path: str,
    body: Any = None,
    *,
    key: str | None = API_KEY,
    content_type: str = "application/json",
    query: dict[str, str] | None = None,
) -> tuple[int, Any]:
    headers = {"content-type": content_type}
    if key is not None:
        headers["x-api-key"] = key
    raw = (
        body
        if isinstance(body, bytes)
        else (json.dumps(body).encode() if body is not None else b"")
    )
    response = invoke_management(http_event(method, path, body=raw, headers=headers, query=query))
    text = response.get("body") or ""
    return response["statusCode"], json.loads(text) if text else None


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/agents/bank"),
        ("POST", "/agents"),
        ("POST", "/sessions"),
        ("GET", "/sessions/s1"),
        ("GET", "/sessions/s1/events"),
        ("GET", "/sessions/s1/traces/t1"),
        ("POST", "/sessions/s1/messages"),
        ("POST", "/sessions/s1/interrupts/turn_x:0"),
        ("DELETE", "/customers/api/web-user-1"),
        ("GET", "/no/such/route"),
    ],
)
@pytest.mark.parametrize(
    "key", [None, "wrong-key", API_KEY[:-1]], ids=["missing", "wrong", "prefix"]
)
def test_every_route_refuses_a_caller_without_the_api_key(
    method: str, path: str, key: str | None, runtime: Runtime
) -> None:
    status, body = call(method, path, {"not": "even valid"}, key=key)
    assert status == 401
    assert body == {"error": "missing or wrong X-Api-Key header", "problems": []}


def test_no_configured_key_refuses_everything(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAYPOINT_MANAGEMENT_API_KEY")
    assert call("GET", "/agents/bank")[0] == 401


def test_publishing_an_invalid_agent_lists_every_problem(runtime: Runtime) -> None:
    document = {
        "agent": {"id": "broken", "name": "Broken"},
        "guidelines": [{"id": "g1", "condition": "The customer greets", "tools": ["nope"]}],
        "journeys": [
            {
                "id": "j1",
                "title": "J",
                "conditions": ["The customer wants j"],
                "states": [{"id": "a", "chat": "Ask"}],
                "transitions": [{"from": "root", "to": "missing"}],
            }
        ],
    }
    status, body = call("POST", "/agents", document)
    assert status == 422
    assert body["error"] == "invalid agent definition"
    assert len(body["problems"]) >= 2
    assert any("nope" in p for p in body["problems"])
    assert any("missing" in p for p in body["problems"])
    assert call("GET", "/agents/broken")[0] == 404  # nothing was published


def test_a_body_that_is_not_a_document_is_a_422(runtime: Runtime) -> None:
    status, body = call("POST", "/agents", b"{not json")
    assert status == 422 and body["problems"][0].startswith("body:1:2: not valid JSON")
    status, body = call("POST", "/agents", b"- a\n- list\n", content_type="application/yaml")
    assert status == 422 and "mapping" in body["problems"][0]


def test_an_agent_published_from_yaml_can_be_read_back(make_runtime: Any, stack: Any) -> None:
    make_runtime()
    status, published = call(
        "POST", "/agents", BANK_YAML.read_bytes(), content_type="application/yaml"
    )
    assert status == 201
    assert published["agent_id"] == "bank" and published["embedded"]["journeys"] > 0
    manifest = f"agents/bank/{published['version']}/manifest.json"
    stack.client("s3").head_object(Bucket=stack.bucket, Key=manifest)  # embeddings went first

    status, agent = call("GET", "/agents/bank")
    assert status == 200
    assert agent["version"] == published["version"]
    assert "authenticate" in agent["journeys"] and "transfer_money" in agent["tools"]
    assert agent["definition"]["agent"]["id"] == "bank"


def test_a_web_chat_session_gets_its_replies_synchronously(runtime: Runtime) -> None:
    status, session = call(
        "POST", "/sessions", {"customer_id": "web-user-1", "session_id": "web-1"}
    )
    assert status == 201
    assert (session["id"], session["agent_id"], session["events"]) == ("web-1", "bank", 0)

    status, turn = call("POST", "/sessions/web-1/messages", {"text": "hi", "event_id": "m1"})
    assert status == 200
    assert turn["replayed"] is False and turn["reply"]["text"]
    assert [e["source"] for e in turn["events"]] == ["customer", "agent"]

    # the client retries the same message (lost response): same reply, no second turn
    status, again = call("POST", "/sessions/web-1/messages", {"text": "hi", "event_id": "m1"})
    assert status == 200
    assert again["replayed"] is True and again["reply"]["text"] == turn["reply"]["text"]

    status, page = call("GET", "/sessions/web-1/events")
    assert status == 200 and len(page["events"]) == 2
    status, later = call("GET", "/sessions/web-1/events", query={"after": "0"})
    assert [e["offset"] for e in later["events"]] == [1]

    status, trace = call("GET", f"/sessions/web-1/traces/{turn['turn_id']}")
    assert status == 200 and trace["turn_id"] == turn["turn_id"] and trace["llm_calls"]

    status, state = call("GET", "/sessions/web-1")
    assert status == 200 and state["version"] == 1


def test_a_synchronous_turn_the_rate_limited_model_cannot_answer_is_a_503_recording_nothing(
    runtime: Runtime, llm: CountingLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WAYPOINT_ON_MODEL_RATE_LIMIT=defer (the default): the client is told to retry, with the
    model's Retry-After; the same request is answered once the model has room."""
    assert call("POST", "/sessions", {"customer_id": "web-user-1", "session_id": "web-1"})[0] == 201

    async def quota_used_up(prompt: str, schema: Any, *, model: str) -> Any:
        raise LLMTransientError("429 Rate limit reached", status=429, retry_after=2.5)

    model_with_room = llm.generate
    monkeypatch.setattr(llm, "generate", quota_used_up)
    message = json.dumps({"text": "hi", "event_id": "m1"}).encode()
    headers = {"content-type": "application/json", "x-api-key": API_KEY}
    refused = invoke_management(
        http_event("POST", "/sessions/web-1/messages", body=message, headers=headers)
    )

    assert refused["statusCode"] == 503
    assert refused["headers"]["retry-after"] == "3"
    assert "rate-limited" in json.loads(refused["body"])["error"]
    stored = load_session(runtime, "web-1")
    assert stored.events == () and stored.version == 0

    monkeypatch.setattr(llm, "generate", model_with_room)
    status, turn = call("POST", "/sessions/web-1/messages", {"text": "hi", "event_id": "m1"})
    assert status == 200 and turn["replayed"] is False
    assert [e["source"] for e in turn["events"]] == ["customer", "agent"]


def test_erasing_a_customer_removes_their_sessions_through_the_api(runtime: Runtime) -> None:
    for session_id in ("web-a", "web-b"):
        call("POST", "/sessions", {"customer_id": "erase-me", "session_id": session_id})
        status, _ = call(
            "POST", f"/sessions/{session_id}/messages", {"text": "hi", "event_id": session_id}
        )
        assert status == 200
    call("POST", "/sessions", {"customer_id": "keep-me", "session_id": "web-c"})

    status, report = call("DELETE", "/customers/api/erase-me")

    assert status == 200
    assert sorted(report["sessions_deleted"]) == ["web-a", "web-b"]
    assert report["items_deleted"] > 0
    assert call("GET", "/sessions/web-a")[0] == 404
    assert call("GET", "/sessions/web-b/events")[0] == 404
    assert call("GET", "/sessions/web-c")[0] == 200
    status, again = call("DELETE", "/customers/api/erase-me")
    assert status == 200 and again["sessions_deleted"] == [] and again["items_deleted"] == 0
    assert call("DELETE", "/customers/Not-A-Channel/x")[0] == 422


def test_an_erasure_that_does_not_fit_one_call_answers_202_until_it_is_done(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infra.aws import erasure

    call("POST", "/sessions", {"customer_id": "big-talker", "session_id": "web-big"})
    status, _ = call("POST", "/sessions/web-big/messages", {"text": "hi", "event_id": "big-1"})
    assert status == 200
    budget = erasure.DEFAULT_TIME_BUDGET_SECONDS
    monkeypatch.setattr(erasure, "DEFAULT_TIME_BUDGET_SECONDS", 0.0)  # no time at all

    status, report = call("DELETE", "/customers/api/big-talker")

    assert status == 202 and report["complete"] is False
    assert "call again" in report["detail"]
    assert call("GET", "/sessions/web-big")[0] == 200  # nothing half-gone: it is still found
    monkeypatch.setattr(erasure, "DEFAULT_TIME_BUDGET_SECONDS", budget)
    status, report = call("DELETE", "/customers/api/big-talker")
    assert status == 200 and report["complete"] is True
    assert report["sessions_deleted"] == ["web-big"]
    assert call("GET", "/sessions/web-big")[0] == 404


def test_the_events_of_a_long_session_are_read_page_by_page(runtime: Runtime) -> None:
    call("POST", "/sessions", {"customer_id": "talker", "session_id": "web-long"})
    for i in range(EVENT_WINDOW):  # twice the window in events
        status, _ = call(
            "POST", "/sessions/web-long/messages", {"text": f"m{i}", "event_id": f"e{i}"}
        )
        assert status == 200
    status, state = call("GET", "/sessions/web-long")
    assert state["events"] == 2 * EVENT_WINDOW  # every stored event, not the loaded window
    offsets, after = [], -1
    while True:
        status, page = call(
            "GET", "/sessions/web-long/events", query={"after": str(after), "limit": "25"}
        )
        assert status == 200
        if not page["events"]:
            break
        offsets += [e["offset"] for e in page["events"]]
        after = offsets[-1]
    assert offsets == list(range(2 * EVENT_WINDOW))
    assert call("GET", "/sessions/web-long/events", query={"limit": "0"})[0] == 422


def test_a_queued_message_is_answered_by_the_worker_without_any_delivery(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    call("POST", "/sessions", {"customer_id": "u", "session_id": "web-2"})
    status, queued = call(
        "POST", "/sessions/web-2/messages", {"text": "hi", "event_id": "q1"}, query={"async": "1"}
    )
    assert status == 202 and queued == {"session_id": "web-2", "event_id": "q1", "queued": True}
    (message,) = receive_all(stack)
    assert QueuedMessage.model_validate_json(message["Body"]).message.channel == "api"
    stack.client("sqs").change_message_visibility(
        QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )

    assert drain(stack) == [{"batchItemFailures": []}]
    assert platforms.requests == []  # api messages are read back, not pushed
    status, page = call("GET", "/sessions/web-2/events")
    assert [e["source"] for e in page["events"]] == ["customer", "agent"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/agents/ghost", None, 404),
        ("GET", "/sessions/ghost", None, 404),
        ("GET", "/sessions/ghost/events", None, 404),
        ("GET", "/sessions/ghost/traces/t", None, 404),
        ("POST", "/sessions/ghost/messages", {"text": "hi"}, 404),
        ("POST", "/sessions", {"customer_id": "u", "agent_id": "ghost"}, 404),
        ("POST", "/sessions", {"customer_id": "u", "session_id": "has space"}, 422),
        ("POST", "/sessions", {"agent_id": "bank"}, 422),
    ],
)
def test_errors_have_a_status_and_a_message_and_nothing_else(
    method: str, path: str, body: Any, status: int, runtime: Runtime
) -> None:
    got, error = call(method, path, body)
    assert got == status
    assert set(error) == {"error", "problems"} and error["error"]


def test_an_empty_message_is_a_422(runtime: Runtime) -> None:
    call("POST", "/sessions", {"customer_id": "u", "session_id": "web-3"})
    assert call("POST", "/sessions/web-3/messages", {"text": "  "})[0] == 422


def test_a_yaml_alias_bomb_is_a_400_naming_the_limit_and_publishes_nothing(
    runtime: Runtime, stack: Any
) -> None:
    from tests.engine.test_document_limits import billion_laughs

    bomb = billion_laughs().encode()
    status, body = call("POST", "/agents", bomb, content_type="application/yaml")
    assert status == 400
    assert "alias-expansion limit" in body["problems"][0]
    status, _ = call("GET", "/agents/laughs")
    assert status == 404


def test_an_agent_document_over_the_byte_limit_is_a_413_naming_it(runtime: Runtime) -> None:
    from engine.authoring.document_text import MAX_DOCUMENT_BYTES

    big = b'{"agent": {"id": "big", "name": "' + b"x" * MAX_DOCUMENT_BYTES + b'"}}'
    status, body = call("POST", "/agents", big)
    assert status == 413
    assert f"{MAX_DOCUMENT_BYTES}-byte limit" in body["problems"][0]


@pytest.mark.parametrize("agent_id", ["../evil", "a/b", "bank#x"])
def test_a_hostile_agent_id_is_a_400_naming_the_rule_and_nothing_is_written(
    runtime: Runtime, stack: Any, agent_id: str
) -> None:
    s3 = stack.client("s3")
    before = {o["Key"] for o in s3.list_objects_v2(Bucket=stack.bucket).get("Contents", [])}
    document = BANK_YAML.read_text().replace("id: bank", f"id: {json.dumps(agent_id)}", 1)
    status, body = call("POST", "/agents", document.encode(), content_type="application/yaml")
    assert status == 400, body
    assert "letters, digits" in body["problems"][0]
    after = {o["Key"] for o in s3.list_objects_v2(Bucket=stack.bucket).get("Contents", [])}
    assert after == before  # `bank#x` used to write its S3 manifest, then fail with a 500

    status, body = call("POST", "/sessions", {"customer_id": "c", "agent_id": agent_id})
    assert status == 400 and "letters, digits" in body["problems"][0]


def test_an_agent_id_in_the_path_is_checked_too(runtime: Runtime) -> None:
    status, body = call("GET", "/agents/bank%23x")
    assert status == 400 and "letters, digits" in body["problems"][0]


def test_publishing_a_snapshot_with_a_hostile_id_writes_nothing(
    runtime: Runtime, stack: Any
) -> None:
    from engine.agent_id import InvalidAgentId
    from examples.banking import load as load_bank

    s3 = stack.client("s3")
    before = {o["Key"] for o in s3.list_objects_v2(Bucket=stack.bucket).get("Contents", [])}
    evil = load_bank().model_copy(update={"id": "bank#x"})  # built, then tampered with
    with pytest.raises(InvalidAgentId):
        runtime.run(runtime.publish_agent(evil))
    after = {o["Key"] for o in s3.list_objects_v2(Bucket=stack.bucket).get("Contents", [])}
    assert after == before


# -- interrupts: a form's result delivered into its session ---------------------------------------

MOVERS = {
    "agent": {"id": "movers", "name": "Movers"},
    "tools": [
        {
            "name": "address_form",
            "description": "open the address form",
            "kind": "interrupter",
            "fills": "address",
        }
    ],
    "journeys": [
        {
            "id": "move",
            "title": "Change address",
            "conditions": ["The customer moved"],
            "states": [
                {"id": "form", "tool": "address_form"},
                {"id": "thanks", "chat": "Thank the customer for the new address"},
            ],
            "transitions": [
                {"from": "root", "to": "form"},
                {"from": "form", "to": "thanks"},
                {"from": "thanks", "to": "END"},
            ],
        }
    ],
}
FORM_CALL = "turn_0123456789abcdef01234567:0"


def waiting_for_the_form(
    runtime: Runtime,
    session_id: str,
    *,
    channel: str = "api",
    reply_to: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> None:
    """A session as the turn that sent the address form left it: at the form step, waiting."""
    # The deployment's registry (the banking tools) has no address_form: forced, since these
    # tests deliver the form's result themselves and never call the tool.
    assert call("POST", "/agents", MOVERS, query={"force": "true"})[0] == 201
    pending = PendingInterrupt(
        tool="address_form",
        call_id=FORM_CALL,
        kind="interrupter",
        journey_id="move",
        node_id="form",
        prompt="Ask the customer to fill in the address form",
        sender="u1",
        reply_to=reply_to,
    )
    runtime.run(
        runtime.sessions.create(
            SessionState(
                id=session_id,
                agent_id="movers",
                customer_id="u1",
                channel=channel,
                journey_paths={"move": ("form",)},
                pending_interrupt=pending,
                metadata=metadata or {},
            )
        )
    )


def test_a_form_result_resumes_the_journey_once_and_only_for_the_pending_call(
    runtime: Runtime,
) -> None:
    waiting_for_the_form(runtime, "mv-1")
    path = f"/sessions/mv-1/interrupts/{FORM_CALL}"

    # free text while the form is open: answered, the step still waits
    status, turn = call("POST", "/sessions/mv-1/messages", {"text": "is it done?"})
    assert status == 200 and turn["reply"]["text"]
    status, state = call("GET", "/sessions/mv-1")
    assert state["pending_interrupt"]["call_id"] == FORM_CALL
    assert state["journey_paths"]["move"] == ["form"]

    status, error = call("POST", "/sessions/mv-1/interrupts/turn_other:0", {"result": {"a": 1}})
    assert status == 409 and FORM_CALL in error["error"]

    status, turn = call("POST", path, {"result": {"street": "Main St 1", "city": "Springfield"}})
    assert status == 200, turn
    assert turn["replayed"] is False and turn["reply"]["text"]
    assert [e["source"] for e in turn["events"]] == ["customer", "agent"]
    session = load_session(runtime, "mv-1")
    assert session.pending_interrupt is None
    assert session.journey_paths["move"][:2] == ("form", "thanks")
    values = {c.name: (c.value, c.origin) for c in session.collected}
    assert values["street"] == ("Main St 1", "form result of address_form")
    assert values["city"] == ("Springfield", "form result of address_form")

    # the form service retries (lost response): the same turn, not a second resumption
    status, again = call("POST", path, {"result": {"street": "Main St 1", "city": "Springfield"}})
    assert status == 200 and again["replayed"] is True
    assert again["reply"]["text"] == turn["reply"]["text"]
    assert load_session(runtime, "mv-1").version == session.version


def test_an_interrupt_result_needs_a_known_session_a_result_and_the_api_key(
    runtime: Runtime,
) -> None:
    assert call("POST", f"/sessions/ghost/interrupts/{FORM_CALL}", {"result": {}})[0] == 404
    waiting_for_the_form(runtime, "mv-2")
    path = f"/sessions/mv-2/interrupts/{FORM_CALL}"
    assert call("POST", path, {"result": {"a": 1}}, key="wrong")[0] == 401
    assert call("POST", path, {"nothing": 1})[0] == 422
    assert call("POST", path, {"result": {"big": "x" * 20_000}})[0] == 413
    assert load_session(runtime, "mv-2").pending_interrupt is not None  # none of it counted


def test_a_queued_form_result_is_answered_by_the_worker_once(runtime: Runtime, stack: Any) -> None:
    waiting_for_the_form(runtime, "mv-3")
    path = f"/sessions/mv-3/interrupts/{FORM_CALL}"

    status, queued = call("POST", path, {"result": "Main St 1"}, query={"async": "1"})
    assert status == 202 and queued["event_id"] == f"interrupt:{FORM_CALL}"
    # delivered twice before the worker ran: the session's FIFO group and its dedup hold it once
    assert call("POST", path, {"result": "Main St 1"}, query={"async": "1"})[0] == 202
    assert drain(stack)[-1] == {"batchItemFailures": []}

    session = load_session(runtime, "mv-3")
    assert session.pending_interrupt is None
    assert session.collected_values()["address"] == "Main St 1"  # a single value fills `fills`
    replies = [e for e in session.events if e.source.value == "agent"]
    assert len(replies) == 1
    assert call("POST", path, {"result": "Main St 1"}, query={"async": "1"})[0] == 202
    assert drain(stack) in ([], [{"batchItemFailures": []}])
    assert load_session(runtime, "mv-3").version == session.version


def test_the_reply_to_a_form_result_goes_to_the_chat_the_form_was_sent_to(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    waiting_for_the_form(
        runtime,
        "telegram-move",
        channel="telegram",
        reply_to={"chat_id": 4242},
        metadata={"account_id": "123456"},
    )
    status, state = call("GET", "/sessions/telegram-move")
    assert state["pending_interrupt"]["reply_to"] is None  # the chat's address stays inside

    path = f"/sessions/telegram-move/interrupts/{FORM_CALL}"
    status, queued = call("POST", path, {"result": {"street": "Main St 1"}})

    assert status == 202 and queued["queued"] is True  # a chat's reply is the worker's to send
    assert drain(stack) == [{"batchItemFailures": []}]
    (sent,) = platforms.replies("telegram")
    assert sent.json()["chat_id"] == 4242 and sent.json()["text"]
    session = load_session(runtime, "telegram-move")
    assert session.pending_interrupt is None
    assert session.collected_values()["street"] == "Main St 1"


def test_the_password_is_in_no_stored_item_api_response_or_later_prompt(
    runtime: Runtime, stack: Any, llm: CountingLLM
) -> None:
    bank.reset_bank()
    password = "monkey"  # declared `secret` in examples/banking/agent.yaml
    call("POST", "/sessions", {"customer_id": "web-user-9", "session_id": "web-9"})
    said = ["Hi", "Transfer money", "seldo", password, "Checking", "To account ID 1234324", "500"]
    responses: list[Any] = []
    for i, text in enumerate(said):
        if text == password:
            first_prompt_of_turn = len(llm.prompts)
        status, turn = call("POST", "/sessions/web-9/messages", {"text": text, "event_id": f"m{i}"})
        assert status == 200
        responses.append(turn)
        if text == password:
            after_turn = len(llm.prompts)

    assert "logged in" in responses[3]["reply"]["text"]  # authenticate got it, in that turn
    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]
    responses.append(call("GET", "/sessions/web-9")[1])
    responses.append(call("GET", "/sessions/web-9/events")[1])
    responses.extend(
        call("GET", f"/sessions/web-9/traces/{t['turn_id']}")[1] for t in responses[:7]
    )
    assert password not in json.dumps(responses, ensure_ascii=False)
    stored = everything_stored(stack)
    assert "seldo" in stored and "1234324" in stored  # the scan sees the conversation…
    assert password not in stored  # …but not the password
    assert any(password in p for p in llm.prompts[first_prompt_of_turn:after_turn])
    assert password not in llm.prompts[after_turn - 1]  # that turn's reply prompt
    assert all(password not in p for p in llm.prompts[after_turn:])
