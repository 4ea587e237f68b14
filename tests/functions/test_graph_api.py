"""GET /agents/{agent_id}/graph: the published (or a stored) agent's journeys drawn as SVG or
Mermaid, one journey marked with a turn's walk; behind the API key; every unknown name a 404
naming it (functions/graph_api.py)."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from examples.banking import load as load_bank
from infra.graphs import agent_mermaid, agent_svg, journey_svg, walk_taken
from infra.runtime import Runtime
from tests.functions.conftest import API_KEY, invoke_management
from tests.functions.lambda_events import http_event

SVG = "{http://www.w3.org/2000/svg}"


def get_graph(
    agent_id: str, *, key: str | None = API_KEY, **query: str
) -> tuple[int, dict[str, str], str]:
    headers = {"x-api-key": key} if key is not None else {}
    response: dict[str, Any] = invoke_management(
        http_event("GET", f"/agents/{agent_id}/graph", headers=headers, query=query)
    )
    body = response.get("body") or ""
    if response.get("isBase64Encoded"):  # Mangum's way for image/*: API Gateway decodes it
        body = base64.b64decode(body).decode("utf-8")
    return response["statusCode"], response.get("headers", {}), body


def test_the_published_agent_is_served_as_svg_by_default(runtime: Runtime) -> None:
    status, headers, body = get_graph("bank")
    assert status == 200
    assert headers["content-type"] == "image/svg+xml"
    assert "default-src 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert body == agent_svg(load_bank())


def test_mermaid_is_served_as_text(runtime: Runtime) -> None:
    status, headers, body = get_graph("bank", format="mermaid")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert body == agent_mermaid(load_bank())


def test_one_journey_is_served_with_the_turn_marked(runtime: Runtime) -> None:
    status, _, body = get_graph(
        "bank",
        journey="transfer",
        current="enough",
        proposed="check, enough,insufficient",
        kept="check,enough",
    )
    assert status == 200
    expected = journey_svg(
        load_bank(),
        "transfer",
        current="enough",
        proposed=("check", "enough", "insufficient"),
        kept=("check", "enough"),
    )
    assert body == expected
    current = [
        g.get("data-step")
        for g in ET.fromstring(body).iter(f"{SVG}g")
        if "wp-current" in g.get("class", "").split()
    ]
    assert current == ["enough"]


def test_a_stored_version_is_drawn_not_only_the_published_one(runtime: Runtime) -> None:
    first = load_bank()
    data = first.model_dump()
    data["journeys"] = [j for j in data["journeys"] if j["id"] != "stock"]
    data["relationships"] = []
    second = type(first).model_validate(data).with_content_version()
    runtime.run(runtime.publish_agent(second))

    _, _, now = get_graph("bank", format="mermaid")
    _, _, before = get_graph("bank", format="mermaid", version=first.version)
    assert "Stock price lookup" not in now
    assert "Stock price lookup" in before


@pytest.mark.parametrize(
    ("agent_id", "query", "named"),
    [
        ("nobody", {}, "nobody"),
        ("bank", {"version": "0000000000000000"}, "0000000000000000"),
        ("bank", {"journey": "loans"}, "agent 'bank' has no journey 'loans'"),
        ("bank", {"journey": "transfer", "current": "ask_pin"}, "no step 'ask_pin'"),
        ("bank", {"journey": "transfer", "kept": "check,vault"}, "no step 'vault'"),
    ],
)
def test_an_unknown_agent_version_journey_or_step_is_a_404_naming_it(
    runtime: Runtime, agent_id: str, query: dict[str, str], named: str
) -> None:
    status, headers, body = get_graph(agent_id, **query)
    assert status == 404, body
    assert headers["content-type"] == "application/json"
    assert named in body


@pytest.mark.parametrize(
    "query",
    [{"format": "png"}, {"current": "check"}, {"proposed": "a,b"}, {"kept": ",".join(["x"] * 201)}],
)
def test_a_request_that_cannot_be_drawn_is_refused_with_what_to_fix(
    runtime: Runtime, query: dict[str, str]
) -> None:
    if "kept" in query:
        query = {**query, "journey": "transfer"}
    status, _, body = get_graph("bank", **query)
    assert status == 422, body


@pytest.mark.parametrize("key", [None, "wrong-key", API_KEY[:-1]])
def test_the_graph_needs_the_api_key(runtime: Runtime, key: str | None) -> None:
    status, _, body = get_graph("bank", key=key)
    assert status == 401
    assert "svg" not in body and "Transfer" not in body


def test_an_invalid_agent_id_is_refused_naming_the_rule(runtime: Runtime) -> None:
    status, _, body = get_graph("-" + "x" * 120)
    assert status == 400 and "invalid agent id" in body, body


def test_the_api_index_lists_the_graph_route(runtime: Runtime) -> None:
    response = invoke_management(http_event("GET", "/", headers={"x-api-key": API_KEY}))
    assert "GET /agents/{agent_id}/graph" in response["body"]


def test_a_traced_turn_is_drawn_on_its_journey(runtime: Runtime) -> None:
    """What the studio's turn inspector does: a real turn's journey record, through `walk_taken`,
    marks the step the session now stands at and the walk that got it there."""
    call = invoke_management
    key = {"x-api-key": API_KEY, "content-type": "application/json"}
    body = json.dumps({"customer_id": "graph-user", "session_id": "graph-1"}).encode()
    assert call(http_event("POST", "/sessions", body=body, headers=key))["statusCode"] == 201
    message = json.dumps({"text": "I want to log in", "event_id": "g1"}).encode()
    turn = json.loads(
        call(http_event("POST", "/sessions/graph-1/messages", body=message, headers=key))["body"]
    )
    trace = json.loads(
        call(http_event("GET", f"/sessions/graph-1/traces/{turn['turn_id']}", headers=key))["body"]
    )
    (record,) = [r for r in trace["journeys"] if r["journey_id"] == "authenticate"]
    root = load_bank().journey("authenticate").root_id
    kept = walk_taken(record["previous_path"], record["new_path"], root)
    assert kept == (root, "ask_username") and record["node_id"] == "ask_username"

    status, _, svg = get_graph(
        "bank", journey="authenticate", current=record["node_id"], kept=",".join(kept)
    )
    assert status == 200
    marked = {
        (g.get("data-step") or f"{g.get('data-source')}->{g.get('data-target')}"): g.get("class")
        for g in ET.fromstring(svg).iter(f"{SVG}g")
        if "wp-kept" in g.get("class", "").split() or "wp-current" in g.get("class", "").split()
    }
    assert marked == {
        root: "wp-node wp-start wp-kept",
        "ask_username": "wp-node wp-chat wp-current wp-kept",
        f"{root}->ask_username": "wp-edge wp-kept",
    }
