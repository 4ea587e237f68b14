"""The webhook Lambda: a genuine request is queued exactly once however often the platform sends
it, and answered exactly once; anything not genuine is refused with its status and leaves no
trace (no inbox claim, no queued message)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from infra.channels.signing import sign_slack
from infra.runtime import Runtime
from infra.turn_queue import QueuedMessage, session_id_for
from tests.channels.payloads import (
    generic_message,
    slack_block_actions,
    slack_event,
    slack_form,
    tg_text_update,
    twilio_sms,
    wa_change,
    wa_notification,
    wa_text,
)
from tests.channels.signed import PUBLIC_BASE_URL, SLACK_SECRET
from tests.functions import signed_events as signed
from tests.functions.conftest import (
    assert_no_secret_in,
    drain,
    inbox_items,
    invoke_webhook,
    queue_depth,
    receive_all,
)
from tests.functions.lambda_events import event_body, http_event, with_body
from tests.functions.platforms import CALLBACK_URL, FakePlatforms, Sent


@dataclass(frozen=True)
class Case:
    channel: str
    request: Callable[[], dict[str, Any]]
    retry: Callable[[], dict[str, Any]]  # what the platform sends again
    check: Callable[[Sent], None]  # the reply went to the right conversation


def _telegram_reply(sent: Sent) -> None:
    assert sent.path.endswith("/sendMessage") and sent.json()["chat_id"] == 1111111


def _slack_reply(sent: Sent) -> None:
    assert sent.path.endswith("/chat.postMessage") and sent.json()["channel"] == "C111"


def _whatsapp_reply(sent: Sent) -> None:
    assert sent.path.endswith("/messages") and sent.json()["to"] == "972544401243"


def _twilio_reply(sent: Sent) -> None:
    assert sent.path.endswith("/Messages.json") and sent.form()["To"] == "+14155550199"


def _generic_reply(sent: Sent) -> None:
    assert sent.json()["conversation_id"] == "conv-1" and sent.json()["in_reply_to"] == "evt-1"


GENERIC_BODY = {
    "event_id": "evt-1",
    "conversation_id": "conv-1",
    "customer_id": "cust-1",
    "text": "hi",
    "callback_url": CALLBACK_URL,
}
WA_BODY = wa_notification(wa_change([wa_text("hi", wamid="wamid.HI1")]))

CASES = [
    Case(
        "telegram",
        lambda: signed.telegram(tg_text_update("hi", update_id=501)),
        lambda: signed.telegram(tg_text_update("hi", update_id=501)),
        _telegram_reply,
    ),
    Case(
        "slack",
        lambda: signed.slack(slack_event("<@W111> hi", event_type="message", channel_type="im")),
        # Slack re-sends the same event, re-signed, with X-Slack-Retry-Num
        lambda: signed.slack(
            slack_event("<@W111> hi", event_type="message", channel_type="im"), retry=1
        ),
        _slack_reply,
    ),
    Case(
        "whatsapp",
        lambda: signed.whatsapp(WA_BODY),
        lambda: signed.whatsapp(WA_BODY),
        _whatsapp_reply,
    ),
    Case(
        "twilio",
        lambda: signed.twilio(twilio_sms("hi")),
        lambda: signed.twilio(twilio_sms("hi")),
        _twilio_reply,
    ),
    Case(
        "generic",
        lambda: signed.generic(GENERIC_BODY),
        lambda: signed.generic(GENERIC_BODY),
        _generic_reply,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.channel for c in CASES])
def test_a_signed_request_is_answered_exactly_once_even_when_the_platform_retries(
    case: Case, runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    first = invoke_webhook(case.request())
    retried = invoke_webhook(case.retry())

    assert first["statusCode"] == 200
    assert (retried["statusCode"], retried.get("body")) == (200, first.get("body"))
    assert queue_depth(stack) == 1
    assert len(inbox_items(stack)) == 1

    assert drain(stack) == [{"batchItemFailures": []}]
    replies = platforms.replies()
    assert len(replies) == 1
    case.check(replies[0])

    # Days later the platform redelivers it once more: acknowledged, nothing queued or sent.
    assert invoke_webhook(case.retry())["statusCode"] == 200
    assert queue_depth(stack) == 0
    assert drain(stack) == []
    assert len(platforms.replies()) == 1


def test_the_queued_message_is_grouped_by_session_and_deduplicated_by_event(
    runtime: Runtime, stack: Any
) -> None:
    invoke_webhook(signed.telegram(tg_text_update("hi", update_id=7, chat_id=42, user_id=42)))
    invoke_webhook(signed.telegram(tg_text_update("again", update_id=8, chat_id=42, user_id=42)))

    messages = receive_all(stack)
    queued = [QueuedMessage.model_validate_json(m["Body"]) for m in messages]
    session = session_id_for("bank", "telegram", "tg:700100200:42")
    assert [q.session_id for q in queued] == [session, session]
    assert {m["Attributes"]["MessageGroupId"] for m in messages} == {session}
    assert [m["Attributes"]["MessageDeduplicationId"] for m in messages] == [
        q.dedup_id for q in queued
    ]
    assert [q.message.text for q in queued] == ["hi", "again"]
    stored = runtime.run(runtime.sessions.load(session))
    assert stored is not None
    assert (stored.agent_id, stored.customer_id, stored.channel) == ("bank", "42", "telegram")


def test_a_slack_button_click_is_queued_with_its_choice(runtime: Runtime, stack: Any) -> None:
    body = slack_form(slack_block_actions("billing", label="Billing"))
    response = invoke_webhook(signed.slack(body, content_type="application/x-www-form-urlencoded"))
    assert response["statusCode"] == 200
    (message,) = receive_all(stack)
    queued = QueuedMessage.model_validate_json(message["Body"])
    assert (queued.message.choice, queued.message.text) == ("billing", "Billing")


@pytest.mark.parametrize(
    ("event", "challenge"),
    [
        (lambda: signed.whatsapp_handshake(challenge="8311"), "8311"),
        (lambda: signed.slack({"type": "url_verification", "challenge": "3eZbrw1a"}), "3eZbrw1a"),
    ],
    ids=["whatsapp-get", "slack-url-verification"],
)
def test_handshakes_echo_the_challenge_and_queue_nothing(
    event: Callable[[], dict[str, Any]], challenge: str, runtime: Runtime, stack: Any
) -> None:
    response = invoke_webhook(event())
    assert (response["statusCode"], response["body"]) == (200, challenge)
    assert queue_depth(stack) == 0 and inbox_items(stack) == []


def _stale_slack() -> dict[str, Any]:
    return signed.slack(slack_event("hi"), timestamp=signed.now() - 301)


def _tampered_slack() -> dict[str, Any]:
    event = signed.slack(slack_event("hi"))
    return with_body(event, event_body(event).replace(b"hi", b"HI"))


def _without_signature(event: dict[str, Any], header: str) -> dict[str, Any]:
    event["headers"].pop(header)
    return event


def _oversized() -> dict[str, Any]:
    update = tg_text_update("x" * (300 * 1024))
    return signed.telegram(update)


def _declared_oversized() -> dict[str, Any]:
    event = signed.telegram(tg_text_update("hi"))
    event["headers"]["content-length"] = str(10 * 1024 * 1024)
    return event


REJECTED = {
    "telegram-wrong-secret": (lambda: signed.telegram(tg_text_update(), secret="not-it"), 401),
    "telegram-no-secret": (
        lambda: _without_signature(
            signed.telegram(tg_text_update()), "x-telegram-bot-api-secret-token"
        ),
        401,
    ),
    "slack-forged": (lambda: signed.slack(slack_event("hi"), secret="f" * 32), 401),
    "slack-stale-replay": (_stale_slack, 401),
    "slack-tampered-body": (_tampered_slack, 401),
    "whatsapp-forged": (lambda: signed.whatsapp(WA_BODY, secret="0" * 32), 401),
    "whatsapp-no-signature": (
        lambda: _without_signature(signed.whatsapp(WA_BODY), "x-hub-signature-256"),
        401,
    ),
    "whatsapp-wrong-verify-token": (lambda: signed.whatsapp_handshake(token="guess"), 403),
    "twilio-signed-for-another-url": (
        lambda: signed.twilio(twilio_sms(), signed_url="https://evil.example/webhooks/twilio"),
        401,
    ),
    "generic-stale-replay": (
        lambda: signed.generic(GENERIC_BODY, timestamp=signed.now() - 3600),
        401,
    ),
    "generic-forged": (lambda: signed.generic(GENERIC_BODY, secret="nope"), 401),
    "unknown-channel": (
        lambda: http_event("POST", "/webhooks/fax", body=b"{}", route="POST /webhooks/{channel}"),
        404,
    ),
    "oversized-body": (_oversized, 413),
    "declared-oversized-body": (_declared_oversized, 413),
    "slack-wrong-content-type": (
        lambda: signed.slack(b"<xml/>", content_type="text/xml"),
        415,
    ),
    "get-on-a-post-only-channel": (
        lambda: http_event("GET", "/webhooks/telegram", route="GET /webhooks/{channel}"),
        405,
    ),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_a_request_that_is_not_genuine_is_refused_and_leaves_no_trace(
    name: str, runtime: Runtime, stack: Any
) -> None:
    build, status = REJECTED[name]
    response = invoke_webhook(build())

    assert response["statusCode"] == status
    error = json.loads(response["body"])["error"]
    assert error and "Traceback" not in error
    assert_no_secret_in(response["body"])
    assert inbox_items(stack) == []
    assert queue_depth(stack) == 0


def test_a_slack_retry_signed_with_a_recomputed_signature_is_still_a_duplicate(
    runtime: Runtime, stack: Any
) -> None:
    body = json.dumps(slack_event("hi", event_type="message", channel_type="im")).encode()
    first = signed.slack(body)
    invoke_webhook(first)
    ts = signed.now()
    retry = signed.slack(body, timestamp=ts, retry=2)
    assert retry["headers"]["x-slack-signature"] == sign_slack(SLACK_SECRET, body, ts)
    assert invoke_webhook(retry)["statusCode"] == 200
    assert queue_depth(stack) == 1


class _BrokenQueue:
    def send_message(self, **_: Any) -> Any:
        raise ConnectionError("SQS is down")


def test_when_enqueueing_fails_the_claim_is_released_and_the_platform_is_asked_to_retry(
    runtime: Runtime, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = signed.telegram(tg_text_update("hi", update_id=900))
    working_queue = runtime.sqs
    monkeypatch.setitem(runtime.__dict__, "sqs", _BrokenQueue())

    failed = invoke_webhook(request)
    assert failed["statusCode"] == 503
    assert "SQS is down" not in failed["body"]
    assert inbox_items(stack) == []  # released: the retry is not mistaken for a duplicate

    monkeypatch.setitem(runtime.__dict__, "sqs", working_queue)
    assert invoke_webhook(request)["statusCode"] == 200
    assert queue_depth(stack) == 1


def test_twilio_is_acknowledged_with_empty_twiml(runtime: Runtime) -> None:
    response = invoke_webhook(signed.twilio(twilio_sms("hi")))
    assert response["statusCode"] == 200
    assert response["headers"]["content-type"].startswith("text/xml")
    assert response["body"].endswith("<Response/>")


def test_twilio_signed_for_the_request_url_passes_without_a_public_base_url(
    make_runtime: Callable[..., Runtime], stack: Any
) -> None:
    make_runtime(public_base_url=None)
    own_url = "https://abcdef1234.execute-api.us-east-1.amazonaws.com/webhooks/twilio"
    assert PUBLIC_BASE_URL not in own_url
    response = invoke_webhook(signed.twilio(twilio_sms("hi"), signed_url=own_url))
    assert response["statusCode"] == 200
    assert queue_depth(stack) == 1


@pytest.mark.parametrize(
    "callback_url",
    ["http://[host]/", "http://169.254.169.254/latest/meta-data/", "http://2130706433/"],
)
def test_a_callback_url_that_cannot_be_used_is_a_400_saying_why(
    runtime: Runtime, stack: Any, callback_url: str
) -> None:
    response = invoke_webhook(signed.generic(generic_message(callback_url=callback_url)))
    assert response["statusCode"] == 400  # was a 500 for http://[host]/
    assert "callback_url" in json.loads(response["body"])["error"]
    assert queue_depth(stack) == 0 and inbox_items(stack) == []


EIGHT_DAYS = 8 * 24 * 3600  # past the replay window (7 days) and the inbox's memory (8 days)


@pytest.mark.parametrize("channel", ["telegram", "whatsapp"])
def test_a_genuinely_signed_message_replayed_after_the_inbox_forgot_it_is_not_answered(
    channel: str, runtime: Runtime, stack: Any
) -> None:
    sent = int(time.time()) - EIGHT_DAYS
    if channel == "telegram":
        request = signed.telegram(tg_text_update("send 500 to Bob", update_id=77, date=sent))
    else:
        change = wa_change(messages=[wa_text("send 500 to Bob", wamid="wamid.R1", timestamp=sent)])
        request = signed.whatsapp(wa_notification(change))

    response = invoke_webhook(request)

    # 200: the platform must not retry it for days; nothing is claimed, queued or answered.
    assert response["statusCode"] == 200
    assert queue_depth(stack) == 0 and inbox_items(stack) == []


def test_a_fresh_message_of_the_same_sender_is_still_answered(runtime: Runtime, stack: Any) -> None:
    response = invoke_webhook(signed.telegram(tg_text_update("hi", update_id=78)))
    assert response["statusCode"] == 200 and queue_depth(stack) == 1


def test_the_replay_window_is_shorter_than_the_inbox_memory() -> None:
    from functions.webhook import INBOX_TTL_SECONDS
    from infra.channels.ingress import MAX_MESSAGE_AGE

    # A replay younger than the window is still a duplicate in the inbox; an older one is refused.
    assert MAX_MESSAGE_AGE.total_seconds() < INBOX_TTL_SECONDS


# --------------------------------------------------------------------------------------------------
# The app itself: Starlette's refusals in FastAPI's shapes, an unexpected failure without detail,
# and a cold start that does not import FastAPI (functions/webhook.py says why)


def test_a_path_off_the_route_is_a_json_404_and_a_wrong_method_a_json_405(runtime: Runtime) -> None:
    missing = invoke_webhook(http_event("POST", "/hooks/telegram", body=b"{}"))
    assert missing["statusCode"] == 404
    assert json.loads(event_body(missing)) == {"detail": "Not Found"}
    assert missing["headers"]["content-type"] == "application/json"

    wrong = invoke_webhook(http_event("PUT", "/webhooks/telegram", body=b"{}"))
    assert wrong["statusCode"] == 405
    assert json.loads(event_body(wrong)) == {"detail": "Method Not Allowed"}
    assert set(wrong["headers"]["allow"].replace(" ", "").split(",")) == {"GET", "HEAD", "POST"}


def test_an_unexpected_failure_is_a_500_that_tells_nothing(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functions import webhook

    def explode(*_: Any) -> Any:
        raise RuntimeError("secret detail: token sk-live-123")

    monkeypatch.setattr(webhook, "lookup_channel", explode)
    failed = invoke_webhook(signed.telegram(tg_text_update("hi", update_id=901)))
    assert failed["statusCode"] == 500
    assert json.loads(event_body(failed)) == {"error": "internal error"}
    assert "sk-live" not in failed["body"]


def test_the_webhook_does_not_import_fastapi() -> None:
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, functions.webhook; print('fastapi' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert imported.stdout.strip() == "False"
