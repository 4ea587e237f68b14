"""The management API: X-Api-Key on every route, agents published with every problem listed,
sessions created and talked to (synchronously, or queued for the worker)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from examples.banking import bank
from infra.runtime import QueuedMessage, Runtime
from tests.functions.conftest import (
    API_KEY,
    CountingLLM,
    drain,
    everything_stored,
    invoke_management,
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
    assert status == 422 and body["problems"][0].startswith("body: not valid JSON")
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
