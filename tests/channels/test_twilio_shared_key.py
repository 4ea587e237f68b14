"""Twilio SharedKey signing (HMAC-SHA256 with the shared key's secret, announced by
`X-Twilio-Webhooks-Signature-Settings`) is accepted alongside the Auth Token scheme (HMAC-SHA1),
each scheme only with its own secret; forged, cross-scheme and downgraded signatures are refused."""

from __future__ import annotations

import pytest

from infra.channels.base import ChannelRequest
from infra.channels.errors import MalformedRequest, SignatureRejected
from infra.channels.registry import ChannelSecrets, build_channels
from infra.channels.signing import sign_twilio, twilio_headers, twilio_signature_settings
from infra.channels.twilio import TwilioChannel
from tests.channels.conftest import SettableClock
from tests.channels.payloads import TWILIO_ACCOUNT_SID, form_body, twilio_sms
from tests.channels.signed import NOW, PUBLIC_BASE_URL, TWILIO_TOKEN, TWILIO_URL
from tests.channels.vectors import (
    TWILIO_DOC_PARAMS,
    TWILIO_DOC_URL,
    TWILIO_SHA256_SIGNATURE,
)

SHARED_KEY = "sk-secret-of-the-shared-key"
KEY_ID = "webhooks_sharedkey_0123456789abcdef"
SETTINGS = f"key={KEY_ID},algorithm=HMAC_SHA256"


def _channel(shared_key: str | None = SHARED_KEY) -> TwilioChannel:
    return TwilioChannel(
        auth_token=TWILIO_TOKEN,
        account_sid=TWILIO_ACCOUNT_SID,
        public_base_url=PUBLIC_BASE_URL,
        shared_key=shared_key,
    )


def _request(headers: dict[str, str], params: dict[str, str] | None = None) -> ChannelRequest:
    body = form_body(params if params is not None else twilio_sms())
    return ChannelRequest.from_http("POST", TWILIO_URL, headers=headers, body=body, received_at=NOW)


def test_our_sha256_signature_matches_twilios_own_library() -> None:
    assert sign_twilio("12345", TWILIO_DOC_URL, TWILIO_DOC_PARAMS, algorithm="HMAC_SHA256") == (
        TWILIO_SHA256_SIGNATURE
    )
    assert twilio_signature_settings(SETTINGS) == ("HMAC_SHA256", KEY_ID)
    assert twilio_signature_settings(None) == ("HMAC_SHA1", None)
    assert twilio_signature_settings(" key = k , algorithm = hmac_sha256 ") == ("HMAC_SHA256", "k")


def test_a_shared_key_signed_message_is_accepted() -> None:
    params = twilio_sms()
    outcome = _channel().handle(
        _request(twilio_headers(SHARED_KEY, TWILIO_URL, params, shared_key_id=KEY_ID), params)
    )
    assert outcome.kind == "messages" and outcome.messages[0].text == params["Body"]


def test_the_auth_token_scheme_still_works_when_a_shared_key_is_configured() -> None:
    params = twilio_sms()
    outcome = _channel().handle(_request(twilio_headers(TWILIO_TOKEN, TWILIO_URL, params), params))
    assert outcome.kind == "messages"


def test_both_schemes_cover_the_url_and_every_parameter() -> None:
    params = twilio_sms()
    headers = twilio_headers(SHARED_KEY, TWILIO_URL, params, shared_key_id=KEY_ID)
    with pytest.raises(SignatureRejected, match="HMAC_SHA256"):
        _channel().handle(_request(headers, {**params, "Body": "transfer everything"}))
    with pytest.raises(SignatureRejected):
        _channel().handle(_request(headers, {**params, "Extra": "1"}))
    other_url = twilio_headers(SHARED_KEY, TWILIO_URL + "x", params, shared_key_id=KEY_ID)
    with pytest.raises(SignatureRejected):
        _channel().handle(_request(other_url, params))


@pytest.mark.parametrize(
    ("secret", "settings", "why"),
    [
        ("not-the-key", SETTINGS, "forged with the wrong shared key"),
        (TWILIO_TOKEN, SETTINGS, "SHA-256 with the Auth Token: each scheme has its own secret"),
        (SHARED_KEY, None, "SHA-256 signature presented as the SHA-1 scheme"),
    ],
)
def test_forged_and_cross_scheme_signatures_are_refused(
    secret: str, settings: str | None, why: str
) -> None:
    params = twilio_sms()
    headers = twilio_headers(secret, TWILIO_URL, params, shared_key_id=KEY_ID)
    if settings is None:
        del headers["X-Twilio-Webhooks-Signature-Settings"]
    with pytest.raises(SignatureRejected):
        _channel().handle(_request(headers, params))


def test_a_downgrade_to_sha1_signed_with_the_shared_key_is_refused() -> None:
    params = twilio_sms()
    headers = twilio_headers(SHARED_KEY, TWILIO_URL, params)  # SHA-1, shared key as the secret
    headers["X-Twilio-Webhooks-Signature-Settings"] = f"key={KEY_ID},algorithm=HMAC_SHA1"
    with pytest.raises(SignatureRejected, match="HMAC_SHA1"):
        _channel().handle(_request(headers, params))


def test_an_unknown_algorithm_is_refused_naming_the_supported_ones() -> None:
    params = twilio_sms()
    headers = twilio_headers(SHARED_KEY, TWILIO_URL, params, shared_key_id=KEY_ID)
    headers["X-Twilio-Webhooks-Signature-Settings"] = f"key={KEY_ID},algorithm=HMAC_MD5"
    with pytest.raises(SignatureRejected, match=r"unsupported .*HMAC_SHA1.*HMAC_SHA256"):
        _channel().handle(_request(headers, params))


def test_a_shared_key_request_without_a_configured_key_says_what_to_set() -> None:
    params = twilio_sms()
    headers = twilio_headers(SHARED_KEY, TWILIO_URL, params, shared_key_id=KEY_ID)
    with pytest.raises(SignatureRejected, match="WAYPOINT_TWILIO_SHARED_KEY"):
        _channel(shared_key=None).handle(_request(headers, params))


def test_during_a_rotation_both_the_old_and_the_new_key_verify() -> None:
    channel = _channel(shared_key="new-key old-key")
    params = twilio_sms()
    for key in ("new-key", "old-key"):
        headers = twilio_headers(key, TWILIO_URL, params, shared_key_id=KEY_ID)
        assert channel.handle(_request(headers, params)).kind == "messages"


def test_the_shared_key_is_read_from_the_environment_and_never_shown() -> None:
    secrets = ChannelSecrets.from_env(
        {
            "WAYPOINT_TWILIO_AUTH_TOKEN": TWILIO_TOKEN,
            "WAYPOINT_TWILIO_ACCOUNT_SID": TWILIO_ACCOUNT_SID,
            "WAYPOINT_TWILIO_SHARED_KEY": SHARED_KEY,
        }
    )
    channel = build_channels(secrets, SettableClock(), public_base_url=PUBLIC_BASE_URL)["twilio"]
    assert SHARED_KEY not in repr(secrets) and SHARED_KEY not in repr(channel)
    params = twilio_sms()
    headers = twilio_headers(SHARED_KEY, TWILIO_URL, params, shared_key_id=KEY_ID)
    assert channel.handle(_request(headers, params)).kind == "messages"
    with pytest.raises(SignatureRejected) as refused:
        channel.handle(
            _request(twilio_headers("x", TWILIO_URL, params, shared_key_id=KEY_ID), params)
        )
    assert SHARED_KEY not in str(refused.value)


def test_a_verified_shared_key_request_that_is_not_a_message_is_still_malformed() -> None:
    headers = twilio_headers(SHARED_KEY, TWILIO_URL, {"Foo": "1"}, shared_key_id=KEY_ID)
    with pytest.raises(MalformedRequest):
        _channel().handle(_request(headers, {"Foo": "1"}))
