"""The management API's OpenAPI document states what the app answers — every error status with
its `{error, problems}` body, the agent document `POST /agents` takes, the pattern of every id in
a path — and the app holds to it (schemathesis checks the whole of it over real HTTP:
tests/reliability/test_api_schema.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.agent_id import AGENT_ID_PATTERN
from functions import management
from infra.runtime import Runtime
from infra.turn_queue import SESSION_ID_PATTERN
from tests.functions.conftest import API_KEY, invoke_management
from tests.functions.lambda_events import http_event
from tests.functions.test_management import call

ERROR_BODY = {"$ref": "#/components/schemas/ErrorBody"}


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = management.app.openapi()
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def test_every_operation_documents_its_errors_with_the_error_body() -> None:
    for method, path, operation in operations():
        responses = operation["responses"]
        for status in ("401", "422"):  # the key check; an invalid request
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == ERROR_BODY, (method, path, status)
        for status, response in responses.items():
            refused_publish = (method, path, status) == ("POST", "/agents", "409")
            if status.startswith(("4", "5")) and not refused_publish:
                assert response["content"]["application/json"]["schema"] == ERROR_BODY
    assert "HTTPValidationError" not in json.dumps(management.app.openapi())
    statuses = {(m, p): set(o["responses"]) for m, p, o in operations()}
    assert {"400", "409", "413"} <= statuses["POST", "/agents"]
    assert "404" in statuses["GET", "/sessions/{session_id}"]
    assert "409" in statuses["POST", "/sessions/{session_id}/interrupts/{call_id}"]
    assert "409" in statuses["POST", "/sessions/{session_id}/handoff/take"]


def test_a_refused_publish_documents_the_check_it_carries() -> None:
    (refused,) = [
        o["responses"]["409"] for m, p, o in operations() if (m, p) == ("POST", "/agents")
    ]
    schema = refused["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/PublishRefusedBody"}
    body = management.app.openapi()["components"]["schemas"]["PublishRefusedBody"]
    assert {"error", "problems", "check"} <= set(body["properties"])


def test_publishing_documents_the_agent_document_as_json_or_yaml() -> None:
    document = management.app.openapi()
    for path in ("/agents", "/agents/check"):
        body = document["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        json_body = body["content"]["application/json"]
        assert json_body["schema"] == {"$ref": "#/components/schemas/AgentDocument"}
        assert body["content"]["application/yaml"]["schema"]["type"] == "string"
    agent_document = document["components"]["schemas"]["AgentDocument"]
    assert agent_document["required"] == ["agent"]
    assert "journeys" in agent_document["properties"]
    # every schema the agent document refers to is there
    refs = {
        ref.rsplit("/", 1)[-1]
        for ref in _refs(document["components"]["schemas"])
        if ref.startswith("#/components/schemas/")
    }
    assert refs <= set(document["components"]["schemas"])


def test_every_id_in_a_path_has_its_pattern() -> None:
    expected = {"agent_id": AGENT_ID_PATTERN, "session_id": SESSION_ID_PATTERN}
    seen = set()
    for method, path, operation in operations():
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "path":
                continue
            seen.add(parameter["name"])
            pattern = parameter["schema"].get("pattern")
            assert pattern, (method, path, parameter["name"])
            if parameter["name"] in expected:
                assert pattern == expected[parameter["name"]]
    assert seen == {"agent_id", "session_id", "turn_id", "call_id", "channel", "customer_id"}


def test_an_id_breaking_its_pattern_is_refused_before_the_route_runs(runtime: Runtime) -> None:
    status, body = call("GET", "/sessions/a b")
    assert status == 422 and body["problems"][0].startswith("path.session_id:")
    status, body = call("GET", "/agents/bank%23x")  # the agent id rule keeps its 400
    assert status == 400 and "letters, digits" in body["problems"][0]
    status, body = call("GET", "/sessions", query={"agent": "../evil"})
    assert status == 400 and "letters, digits" in body["problems"][0]
    status, body = call("POST", "/sessions", {"customer_id": "c", "session_id": "a/b"})
    assert status == 422 and body["problems"][0].startswith("body.session_id:")
    # an agent id where the operation takes none is an unknown parameter, not a bad agent id
    status, body = call("GET", "/sessions/s1", query={"agent_id": "bank"})
    assert status == 422 and body["problems"][0].startswith("query.agent_id: unknown")


def test_a_query_parameter_the_operation_does_not_declare_is_refused(runtime: Runtime) -> None:
    """A misspelt `?async=1` must not silently run the turn now instead of queueing it."""
    status, created = call("POST", "/sessions", {"customer_id": "c1"})
    assert status == 201
    session = created["id"]
    status, body = call(
        "POST", f"/sessions/{session}/messages", {"text": "hi"}, query={"asnyc": "1"}
    )
    assert status == 422
    assert body["problems"] == ["query.asnyc: unknown query parameter (this operation takes async)"]
    assert call("GET", f"/sessions/{session}/events")[1]["events"] == []  # no turn ran
    status, _ = call("POST", f"/sessions/{session}/messages", {"text": "hi"}, query={"async": "1"})
    assert status == 202


def test_a_wrong_method_names_every_method_the_path_allows(runtime: Runtime) -> None:
    response = invoke_management(
        http_event("PUT", "/sessions", body=b"{}", headers={"x-api-key": API_KEY})
    )
    assert response["statusCode"] == 405
    headers = {k.lower(): v for k, v in response["headers"].items()}
    assert headers["allow"] == "GET, POST"  # two routes serve /sessions
    assert json.loads(response["body"]) == {"error": "Method Not Allowed", "problems": []}


@pytest.mark.parametrize("take_over", [0, 1, "yes", "true", None])
def test_take_over_is_a_json_boolean_not_anything_truthy(
    runtime: Runtime, take_over: object
) -> None:
    status, body = call(
        "POST", "/sessions/s1/handoff/take", {"person": "lee", "take_over": take_over}
    )
    assert status == 422 and body["problems"][0].startswith("body.take_over:")


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def test_every_reference_in_the_document_names_a_schema_it_holds() -> None:
    document = management.app.openapi()
    refs = {ref.rsplit("/", 1)[-1] for ref in _refs(document)}
    assert {"ErrorBody", "PublishRefusedBody", "QueuedView", "ErasureView"} <= refs
    assert refs <= set(document["components"]["schemas"])


def test_a_model_named_only_in_responses_is_documented_as_fastapi_documents_it() -> None:
    """`documented_response` writes what FastAPI's `{"model": ...}` writes, without building the
    model a validator per route: the same reference, and the same schemas in the components."""
    from fastapi import FastAPI

    from functions.management_errors import (
        ErrorBody,
        PublishRefusedBody,
        documented_components,
        documented_response,
    )

    by_fastapi, ours = FastAPI(), FastAPI()

    async def endpoint() -> None: ...

    for app, responses in (
        (
            by_fastapi,
            {
                401: {"model": ErrorBody, "description": "no key"},
                409: {"model": PublishRefusedBody, "description": "refused"},
            },
        ),
        (
            ours,
            {
                401: documented_response(ErrorBody, "no key"),
                409: documented_response(PublishRefusedBody, "refused"),
            },
        ),
    ):
        app.add_api_route("/x", endpoint, methods=["POST"], responses=responses)
    expected = by_fastapi.openapi()
    documented = ours.openapi()
    assert documented["paths"] == expected["paths"]
    components = documented_components()
    assert {"ErrorBody", "PublishRefusedBody", "PublishCheck"} <= set(components)
    for name, schema in expected["components"]["schemas"].items():
        assert components[name] == schema, name


def test_the_api_starts_without_the_parts_only_some_requests_use() -> None:
    """Cold start (`python -m bench`'s management import row): the agent model and its builders,
    the handoff rules, reading values, the outbox, the engine's turn — each loads with the first
    request that needs it, not with the app."""
    later = [
        "engine.model",
        "engine.agent_config",
        "engine.authoring.agent_builder",
        "engine.validation.agent",
        "engine.values.grounding",
        "engine.handoff",
        "engine.turn",
        "infra.outbox",
        "yaml",
        "numpy",
    ]
    code = f"import sys, functions.management\nprint([m for m in {later!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.strip() == "[]"
