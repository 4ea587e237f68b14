"""Property-based fuzzing of the two HTTP apps (hypothesis): the webhook app and the management
API, as ASGI apps over the moto stack. Whatever arrives — any method, path, headers, query and
body; correctly signed arbitrary JSON; arbitrary customer text in a real turn — the answer is never
a 5xx, nothing unsigned is ever accepted, and the management API answers nothing without its key.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.sessions.session import EventSource
from functions import management, webhook
from infra.channels.signing import generic_headers, meta_headers, slack_headers, telegram_headers
from infra.channels.text import clean_text
from tests.channels.signed import GENERIC_SECRET, SLACK_SECRET, TG_SECRET, WA_APP_SECRET
from tests.functions.conftest import API_KEY
from tests.functions.signed_events import now
from tests.reliability.conftest import SharedStack

pytestmark = pytest.mark.long(20)  # about that many seconds: scheduled first (tests/conftest.py)

CHANNELS = ("telegram", "slack", "whatsapp", "twilio", "generic")
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- strategies ---------------------------------------------------------------------------------

_HEADER_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80
)  # what an HTTP client can put in a header value
_HEADER_NAMES = st.sampled_from(
    [
        "content-type",
        "content-length",
        "x-telegram-bot-api-secret-token",
        "x-slack-signature",
        "x-slack-request-timestamp",
        "x-slack-retry-num",
        "x-hub-signature-256",
        "x-twilio-signature",
        "x-waypoint-signature",
        "x-waypoint-timestamp",
        "x-api-key",
        "authorization",
        "transfer-encoding",
    ]
) | st.text(alphabet=string.ascii_lowercase + "-", min_size=1, max_size=20)
_CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/x-www-form-urlencoded",
        "text/plain",
        "multipart/form-data; boundary=x",
        "application/yaml",
        "",
    ]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)
_BODIES = (
    st.binary(max_size=2_000)
    | _JSON.map(lambda value: json.dumps(value).encode())
    | st.text(max_size=500).map(str.encode)
)
_SEGMENT = st.text(max_size=60).map(lambda s: quote(s, safe="")) | st.sampled_from(
    [
        "..",
        "%2e%2e",
        "%00",
        "a%23b",
        "%23",
        "x" * 3000,
        "bank",
        "api-x",
        "%F0%9F%92%B8",
        "%ED%A0%80",
    ]
)


_ANY_METHOD = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"])
_QUERY = st.dictionaries(
    st.sampled_from(["async", "after", "version", "hub.mode", "hub.verify_token", "hub.challenge"]),
    st.text(max_size=20),
    max_size=3,
)


@st.composite
def _requests(
    draw: st.DrawFn, paths: st.SearchStrategy[str], methods: st.SearchStrategy[str] = _ANY_METHOD
) -> dict[str, Any]:
    headers = draw(st.dictionaries(_HEADER_NAMES, _HEADER_TEXT, max_size=6))
    headers.pop("transfer-encoding", None)  # let the client frame the body
    headers.pop("content-length", None)
    headers["content-type"] = draw(_CONTENT_TYPES)
    return {
        "method": draw(methods),
        "url": draw(paths),
        "headers": headers,
        "content": draw(_BODIES),
        "params": draw(_QUERY),
    }


# -- clients ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def webhooks(shared: SharedStack) -> Iterator[TestClient]:
    with TestClient(webhook.app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def api(shared: SharedStack) -> Iterator[TestClient]:
    with TestClient(management.app, raise_server_exceptions=False) as client:
        yield client


def inbox_claims(shared: SharedStack) -> int:
    items = shared.stack.client("dynamodb").scan(TableName=shared.stack.table_name)["Items"]
    return sum(1 for item in items if item["pk"]["S"].startswith("INBOX#"))


# -- the webhook app ----------------------------------------------------------------------------

WEBHOOK_PATHS = (
    st.sampled_from(CHANNELS).map(lambda c: f"/webhooks/{c}")
    | _SEGMENT.map(lambda s: f"/webhooks/{s}")
    | _SEGMENT.map(lambda s: f"/{s}")
)


@FUZZ
@given(request=_requests(WEBHOOK_PATHS))
def test_the_webhook_app_never_fails_and_never_accepts_an_unsigned_message(
    request: dict[str, Any], webhooks: TestClient, shared: SharedStack
) -> None:
    claims = inbox_claims(shared)

    response = webhooks.request(**request)

    assert response.status_code < 500, response.text
    assert inbox_claims(shared) == claims  # nothing got past verification


def _signed(channel: str, body: bytes) -> dict[str, str]:
    if channel == "telegram":
        return telegram_headers(TG_SECRET)
    if channel == "slack":
        return slack_headers(SLACK_SECRET, body, now())
    if channel == "whatsapp":
        return meta_headers(WA_APP_SECRET, body)
    return generic_headers(GENERIC_SECRET, body, now())


_GENUINE_SHAPES = st.fixed_dictionaries(
    {},
    optional={
        "update_id": st.integers() | st.text(max_size=5),
        "message": _JSON,
        "callback_query": _JSON,
        "type": st.sampled_from(["event_callback", "url_verification", "block_actions"]) | _JSON,
        "event": st.fixed_dictionaries(
            {},
            optional={"type": _JSON, "text": _JSON, "user": _JSON, "channel": _JSON, "ts": _JSON},
        ),
        "event_id": _JSON,
        "team_id": _JSON,
        "object": st.just("whatsapp_business_account") | _JSON,
        "entry": st.lists(st.dictionaries(st.sampled_from(["id", "changes"]), _JSON), max_size=2),
        "conversation_id": _JSON,
        "customer_id": _JSON,
        "text": _JSON,
        "choice": _JSON,
        "callback_url": st.sampled_from(
            ["https://client.test/replies", "file:///etc/passwd", "http://169.254.169.254/latest"]
        )
        | _JSON,
    },
)


@FUZZ
@given(channel=st.sampled_from(["telegram", "slack", "whatsapp", "generic"]), data=_GENUINE_SHAPES)
def test_correctly_signed_arbitrary_json_is_accepted_or_refused_never_a_server_error(
    channel: str, data: dict[str, Any], webhooks: TestClient
) -> None:
    body = json.dumps(data).encode()

    response = webhooks.post(f"/webhooks/{channel}", content=body, headers=_signed(channel, body))

    assert response.status_code in (200, 400, 413), response.text


# -- the management API -------------------------------------------------------------------------

_IDS = _SEGMENT
API_METHODS = st.sampled_from(["GET", "POST"]) | st.sampled_from(["PUT", "DELETE", "OPTIONS"])
API_PATHS = st.one_of(
    # /docs is the one public path: a static page without data (tests/cli/test_local_server.py)
    st.sampled_from(["/agents", "/sessions", "/", "/openapi.json"]),
    _IDS.map(lambda s: f"/agents/{s}"),
    _IDS.map(lambda s: f"/sessions/{s}"),
    _IDS.map(lambda s: f"/sessions/{s}/events"),
    _IDS.map(lambda s: f"/sessions/{s}/messages"),
    st.tuples(_IDS, _IDS).map(lambda p: f"/sessions/{p[0]}/traces/{p[1]}"),
)


@FUZZ
@given(request=_requests(API_PATHS, API_METHODS))
def test_the_management_api_refuses_everything_without_its_key(
    request: dict[str, Any], api: TestClient
) -> None:
    request["headers"].pop("x-api-key", None)
    if request["headers"].get("authorization") is not None:
        request["headers"]["authorization"] = f"Bearer {API_KEY}"  # the key, in the wrong place
    request["params"]["x-api-key"] = API_KEY  # nor in the query string

    response = api.request(**request)

    assert response.status_code == 401
    assert response.json() == {"error": "missing or wrong X-Api-Key header", "problems": []}


@FUZZ
@given(
    request=_requests(API_PATHS, API_METHODS),
    key=st.sampled_from(["", "x", API_KEY[:-1], API_KEY + " "]),
)
def test_a_wrong_management_key_is_refused(
    request: dict[str, Any], key: str, api: TestClient
) -> None:
    request["headers"]["x-api-key"] = key

    assert api.request(**request).status_code == 401


_NEW_SESSION = st.fixed_dictionaries(
    {},
    optional={
        "customer_id": _JSON,
        "agent_id": st.sampled_from(["bank", "nobody"]) | _IDS,
        "session_id": _JSON | _IDS,
        "metadata": _JSON,
    },
)
_NEW_MESSAGE = st.fixed_dictionaries(
    {}, optional={"text": _JSON, "choice": _JSON, "event_id": _JSON}
)


@settings(FUZZ, max_examples=200)
@given(request=_requests(API_PATHS, API_METHODS), json_body=_NEW_SESSION | _NEW_MESSAGE | _JSON)
def test_the_management_api_with_its_key_never_answers_a_server_error(
    request: dict[str, Any], json_body: Any, api: TestClient
) -> None:
    request["headers"]["x-api-key"] = API_KEY
    if request["method"] == "POST" and request["headers"]["content-type"] == "application/json":
        request["content"] = json.dumps(json_body).encode()

    response = api.request(**request)

    assert response.status_code < 500, (request, response.text)
    if response.status_code >= 400:
        assert set(response.json()) == {"error", "problems"}


@pytest.fixture(scope="module")
def chat(api: TestClient) -> str:
    created = api.post(
        "/sessions",
        json={"customer_id": "fuzz-customer", "session_id": "api-fuzz-chat"},
        headers={"x-api-key": API_KEY},
    )
    assert created.status_code == 201, created.text
    return "api-fuzz-chat"


@settings(FUZZ, max_examples=40)
@given(
    text=st.text(max_size=300),
    choice=st.none() | st.text(min_size=1, max_size=30),
    event_id=st.none() | st.text(alphabet=string.ascii_letters, min_size=1, max_size=8),
)
def test_any_customer_text_gets_a_reply_and_a_retried_event_id_the_same_one(
    text: str,
    choice: str | None,
    event_id: str | None,
    api: TestClient,
    chat: str,
    shared: SharedStack,
) -> None:
    body = {"text": text, "choice": choice, "event_id": event_id}
    headers = {"x-api-key": API_KEY}

    first = api.post(f"/sessions/{chat}/messages", json=body, headers=headers)

    if not clean_text(text) and choice is None:
        assert first.status_code == 422
        return
    assert first.status_code == 200, first.text
    if event_id is None:
        assert first.json()["reply"]["text"]
        return
    again = api.post(f"/sessions/{chat}/messages", json=body, headers=headers)
    assert again.status_code == 200
    assert again.json()["turn_id"] == first.json()["turn_id"]
    state = shared.runtime.run(shared.runtime.sessions.load(chat))
    assert state is not None
    ids = [e.data.get("channel_event_id") for e in state.events if e.source is EventSource.CUSTOMER]
    assert len(ids) == len(set(ids))  # a retried event id was stored once
