"""What `sam local invoke` would do, without Docker: every handler named in template.yaml is
invoked with each of its sample events (events/<handler module>/*.json) against the moto stack.

Signatures in the webhook samples are placeholders; they are re-signed here with the test secrets
and the current time, exactly as each platform signs (`infra.channels.signing`)."""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest

from examples.banking import load as load_bank
from infra.aws.cfn_template import load_template
from infra.aws.lambda_routing import LocalLambdaContext
from infra.channels.signing import sign_generic, sign_meta, sign_slack, sign_twilio
from infra.runtime import Runtime
from tests.channels.signed import (
    GENERIC_SECRET,
    SLACK_SECRET,
    TG_SECRET,
    TWILIO_TOKEN,
    WA_APP_SECRET,
    WA_VERIFY_TOKEN,
)
from tests.functions.conftest import API_KEY
from tests.functions.lambda_events import event_body
from tests.functions.platforms import FakePlatforms
from tests.functions.signed_events import now

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "events"


def template_handlers() -> dict[str, str]:
    """Logical id → handler ("functions.webhook.handler") of every function in the template."""
    resources = load_template()["Resources"]
    return {
        logical_id: resource["Properties"]["Handler"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def sample_events(handler: str) -> list[Path]:
    """The samples of a handler: events/<module name>/*.json."""
    return sorted((EVENTS / handler.split(".")[-2]).glob("*.json"))


CASES = [
    pytest.param(logical_id, handler, path, id=f"{logical_id}-{path.stem}")
    for logical_id, handler in template_handlers().items()
    for path in sample_events(handler)
]


def test_every_function_in_the_template_has_a_sample_event() -> None:
    handlers = template_handlers()
    assert set(handlers) == {
        "WebhookFunction",
        "WorkerFunction",
        "ManagementFunction",
        "ToolFunction",
        "HandoffSweepFunction",
    }
    for logical_id, handler in handlers.items():
        assert sample_events(handler), f"{logical_id}: add events/{handler.split('.')[-2]}/*.json"


def sign(event: dict[str, Any]) -> dict[str, Any]:
    """Fill the placeholders of a sample: secrets, timestamps and signatures."""
    event = copy.deepcopy(event)
    headers: dict[str, str] = event.get("headers", {})
    if "x-api-key" in headers:
        headers["x-api-key"] = API_KEY
    path = event.get("rawPath", "")
    if not path.startswith("/webhooks/"):
        return event
    body = event_body(event)
    ts = str(now())
    channel = path.rsplit("/", 1)[-1]
    if channel == "telegram":
        headers["x-telegram-bot-api-secret-token"] = TG_SECRET
    elif channel == "slack":
        headers["x-slack-request-timestamp"] = ts
        headers["x-slack-signature"] = sign_slack(SLACK_SECRET, body, ts)
    elif channel == "whatsapp" and event["requestContext"]["http"]["method"] == "GET":
        event["rawQueryString"] = event["rawQueryString"].replace(
            "%3CWAYPOINT_WHATSAPP_VERIFY_TOKEN%3E", WA_VERIFY_TOKEN
        )
    elif channel == "whatsapp":
        headers["x-hub-signature-256"] = sign_meta(WA_APP_SECRET, body)
    elif channel == "twilio":  # signed for the URL Twilio called: the API's own host here
        url = f"https://{headers['host']}{path}"
        headers["x-twilio-signature"] = sign_twilio(TWILIO_TOKEN, url, parse_qsl(body.decode()))
    elif channel == "generic":
        headers["x-waypoint-timestamp"] = ts
        headers["x-waypoint-signature"] = sign_generic(GENERIC_SECRET, body, ts)
    return event


def _webhook_ok(result: dict[str, Any], platforms: FakePlatforms) -> None:
    assert result["statusCode"] == 200, result


def _worker_ok(result: dict[str, Any], platforms: FakePlatforms) -> None:
    assert result == {"batchItemFailures": []}
    assert len(platforms.replies("telegram")) == 1


def _management_ok(result: dict[str, Any], platforms: FakePlatforms) -> None:
    assert result["statusCode"] in (200, 201), result
    assert json.loads(result["body"])


def _tool_ok(result: dict[str, Any], platforms: FakePlatforms) -> None:
    assert result["error"] is None
    assert result["data"] == {"symbol": "AAPL", "price": "187.20", "currency": "USD"}


def _sweep_ok(result: dict[str, Any], platforms: FakePlatforms) -> None:
    assert result == {"open": 0, "ticketed": 0, "notices_queued": 0}  # nothing handed off


EXPECTED: dict[str, Callable[[dict[str, Any], FakePlatforms], None]] = {
    "webhook": _webhook_ok,
    "worker": _worker_ok,
    "management": _management_ok,
    "tool_task": _tool_ok,
    "handoff_sweep": _sweep_ok,
}


@pytest.mark.parametrize(("logical_id", "handler", "path"), CASES)
def test_each_handler_answers_its_sample_event(
    logical_id: str,
    handler: str,
    path: Path,
    make_runtime: Callable[..., Runtime],
    platforms: FakePlatforms,
) -> None:
    runtime = make_runtime(public_base_url=None, callback_hosts=("chat.example.com",))
    runtime.run(runtime.publish_agent(load_bank()))
    module_name, function_name = handler.rsplit(".", 1)
    function = getattr(importlib.import_module(module_name), function_name)

    event = sign(json.loads(path.read_text()))
    result = function(event, LocalLambdaContext(function_name=f"waypoint-local-{logical_id}"))

    EXPECTED[module_name.split(".")[-1]](result, platforms)
    if path.stem == "whatsapp_handshake":
        assert result["body"] == "1158201444"
