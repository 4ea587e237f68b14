"""The security checks every channel applies (shared/notes/channels.md §10.4), one test each,
run against every channel: method, size, content type, missing / forged / tampered signature,
malformed bodies. Every rejection is a typed error with its status and no secret in its text."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from infra.channels.base import Channel, ChannelRequest
from infra.channels.errors import (
    MalformedRequest,
    MethodNotAllowed,
    PayloadTooLarge,
    SignatureRejected,
    UnsupportedMediaType,
    WebhookRejected,
)
from tests.channels.payloads import (
    generic_message,
    slack_event,
    tg_text_update,
    twilio_sms,
    wa_change,
    wa_notification,
    wa_text,
)
from tests.channels.signed import (
    ALL_SECRETS,
    generic_request,
    meta_request,
    slack_request,
    telegram_request,
    twilio_request,
    with_body,
    with_headers,
)

GENUINE: dict[str, Callable[[], ChannelRequest]] = {
    "telegram": lambda: telegram_request(tg_text_update()),
    "slack": lambda: slack_request(slack_event()),
    "whatsapp": lambda: meta_request(wa_notification(wa_change([wa_text()]))),
    "twilio": lambda: twilio_request(twilio_sms()),
    "generic": lambda: generic_request(generic_message()),
}
WRONG_SECRET: dict[str, Callable[[], ChannelRequest]] = {
    "telegram": lambda: telegram_request(tg_text_update(), secret="another-secret"),
    "slack": lambda: slack_request(slack_event(), secret="another-secret"),
    "whatsapp": lambda: meta_request(wa_notification(wa_change([wa_text()])), secret="x"),
    "twilio": lambda: twilio_request(twilio_sms(), token="another-token"),
    "generic": lambda: generic_request(generic_message(), secret="another-secret"),
}
# Correctly signed requests carrying an arbitrary JSON body (the JSON channels).
SIGNED_JSON: dict[str, Callable[[bytes], ChannelRequest]] = {
    "telegram": lambda body: telegram_request(body),
    "slack": lambda body: slack_request(body),
    "whatsapp": lambda body: meta_request(body),
    "generic": lambda body: generic_request(body),
}
AUTH_HEADER = {
    "telegram": "x-telegram-bot-api-secret-token",
    "slack": "x-slack-signature",
    "whatsapp": "x-hub-signature-256",
    "twilio": "x-twilio-signature",
    "generic": "x-waypoint-signature",
}
ALL = sorted(GENUINE)


def assert_rejected(
    channel: Channel, request: ChannelRequest, error: type[WebhookRejected], status: int
) -> WebhookRejected:
    with pytest.raises(error) as caught:
        channel.handle(request)
    assert caught.value.status == status
    assert not any(secret in str(caught.value) for secret in ALL_SECRETS)
    return caught.value


@pytest.mark.parametrize("name", ALL)
def test_genuine_request_is_accepted(channels: dict[str, Channel], name: str) -> None:
    outcome = channels[name].handle(GENUINE[name]())
    assert outcome.kind == "messages"
    assert outcome.status == 200
    assert len(outcome.messages) == 1


@pytest.mark.parametrize("name", ALL)
def test_missing_signature_is_401(channels: dict[str, Channel], name: str) -> None:
    request = with_headers(GENUINE[name](), **{AUTH_HEADER[name].replace("-", "_"): None})
    error = assert_rejected(channels[name], request, SignatureRejected, 401)
    assert AUTH_HEADER[name] in str(error)


@pytest.mark.parametrize("name", ALL)
def test_signature_made_with_another_secret_is_401(channels: dict[str, Channel], name: str) -> None:
    assert_rejected(channels[name], WRONG_SECRET[name](), SignatureRejected, 401)


@pytest.mark.parametrize("name", [n for n in ALL if n != "telegram"])  # Telegram signs nothing
def test_body_changed_after_signing_is_401(channels: dict[str, Channel], name: str) -> None:
    request = GENUINE[name]()
    tampered = request.body.replace(b"i", b"j", 1)
    assert tampered != request.body
    assert_rejected(channels[name], with_body(request, tampered), SignatureRejected, 401)


@pytest.mark.parametrize("name", ALL)
def test_signature_header_with_garbage_is_401(channels: dict[str, Channel], name: str) -> None:
    for garbage in ("v1=abc", "sha256=zz", "sha256=", "\u00e9\u00e9", "x" * 5000):
        request = with_headers(GENUINE[name](), **{AUTH_HEADER[name].replace("-", "_"): garbage})
        assert_rejected(channels[name], request, SignatureRejected, 401)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_other_methods_are_405_with_allow_header(
    channels: dict[str, Channel], name: str, method: str
) -> None:
    request = GENUINE[name]().model_copy(update={"method": method})
    error = assert_rejected(channels[name], request, MethodNotAllowed, 405)
    assert "POST" in error.headers["Allow"]


@pytest.mark.parametrize("name", [n for n in ALL if n != "whatsapp"])  # Meta's GET is its handshake
def test_get_is_405_except_for_meta(channels: dict[str, Channel], name: str) -> None:
    request = GENUINE[name]().model_copy(update={"method": "GET"})
    assert_rejected(channels[name], request, MethodNotAllowed, 405)


@pytest.mark.parametrize("name", ALL)
def test_oversized_body_is_413_before_anything_else(
    channels: dict[str, Channel], name: str
) -> None:
    channel = channels[name]
    limit: int = channel.max_body_bytes  # type: ignore[attr-defined]
    # Unsigned and not even JSON: size is checked before the signature and the parse.
    request = with_body(with_headers(GENUINE[name](), content_type="text/xml"), b"x" * (limit + 1))
    assert_rejected(channel, request, PayloadTooLarge, 413)


@pytest.mark.parametrize("name", ALL)
def test_declared_content_length_over_the_cap_is_413(
    channels: dict[str, Channel], name: str
) -> None:
    channel = channels[name]
    limit: int = channel.max_body_bytes  # type: ignore[attr-defined]
    request = with_headers(GENUINE[name](), content_length=str(limit + 1))
    assert_rejected(channel, request, PayloadTooLarge, 413)


def test_the_default_cap_is_256_kib_and_meta_gets_3_mib(channels: dict[str, Channel]) -> None:
    caps = {name: channel.max_body_bytes for name, channel in channels.items()}  # type: ignore[attr-defined]
    assert caps == {
        "telegram": 256 * 1024,
        "slack": 256 * 1024,
        "whatsapp": 3 * 1024 * 1024,
        "twilio": 256 * 1024,
        "generic": 256 * 1024,
    }


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("content_type", ["text/xml", "text/plain", "", "multipart/form-data"])
def test_wrong_content_type_is_415(
    channels: dict[str, Channel], name: str, content_type: str
) -> None:
    request = with_headers(GENUINE[name](), content_type=content_type or None)
    assert_rejected(channels[name], request, UnsupportedMediaType, 415)


def test_json_to_the_twilio_form_route_is_415(channels: dict[str, Channel]) -> None:
    request = with_headers(GENUINE["twilio"](), content_type="application/json")
    assert_rejected(channels["twilio"], request, UnsupportedMediaType, 415)


def test_content_type_parameters_and_case_are_accepted(channels: dict[str, Channel]) -> None:
    request = with_headers(GENUINE["telegram"](), content_type="Application/JSON; charset=utf-8")
    assert channels["telegram"].handle(request).kind == "messages"


@pytest.mark.parametrize("name", sorted(SIGNED_JSON))
@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b"null",
        b'"a string"',
        b"\xff\xfe{}",
        b"[" * 10_000 + b"]" * 10_000,
        b'{"update_id": ' + b"9" * 5000 + b"}",
    ],
    ids=["broken", "array", "null", "string", "bad-utf8", "deep", "huge-int"],
)
def test_correctly_signed_malformed_json_is_400(
    channels: dict[str, Channel], name: str, body: bytes
) -> None:
    assert_rejected(channels[name], SIGNED_JSON[name](body), MalformedRequest, 400)


@pytest.mark.parametrize("body", [b"novalue", b"\xff=1", b"a=1&b"])
def test_malformed_twilio_form_is_400(channels: dict[str, Channel], body: bytes) -> None:
    # Twilio signs the decoded parameters, so the form is parsed (bounded) before verifying.
    request = with_body(GENUINE["twilio"](), body)
    assert_rejected(channels["twilio"], request, MalformedRequest, 400)


def test_header_names_are_case_insensitive(channels: dict[str, Channel]) -> None:
    request = GENUINE["slack"]()
    shouted = {name.upper(): value for name, value in request.headers.items()}
    as_sent = ChannelRequest.from_http("POST", request.url, headers=shouted, body=request.body)
    assert channels["slack"].handle(as_sent).kind == "messages"
