"""Rotating a channel's secret without downtime: while its setting holds the new and the old value
("NEW OLD"), a request signed (or a token presented) with either is accepted; once it holds only
the new one, the old is refused. What Waypoint signs or sends itself uses the first value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from pydantic import SecretStr

from infra.channels.base import Channel, ChannelRequest, OutboundReply
from infra.channels.errors import HandshakeRejected, SignatureRejected
from infra.channels.registry import build_channels
from infra.channels.signing import sign_generic
from tests.channels.conftest import SettableClock
from tests.channels.fake_platform import FakePlatform
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
    PUBLIC_BASE_URL,
    channel_secrets,
    generic_request,
    meta_request,
    slack_request,
    telegram_request,
    twilio_request,
)
from tests.channels.test_whatsapp import handshake


@dataclass(frozen=True)
class Rotated:
    """One secret of one channel: its setting, and a genuine request made with a given value."""

    channel: str
    field: str
    old: str
    new: str
    request: Callable[[str], ChannelRequest]


ROTATED = [
    Rotated(
        "telegram",
        "telegram_secret_token",
        "old-tg-secret_0123",
        "new-tg-secret_4567",
        lambda secret: telegram_request(tg_text_update("hi"), secret=secret),
    ),
    Rotated(
        "slack",
        "slack_signing_secret",
        "0ld5ecret0ld5ecret0ld5ecret0ld5e",
        "9ew5ecret9ew5ecret9ew5ecret9ew5e",
        lambda secret: slack_request(slack_event("hi"), secret=secret),
    ),
    Rotated(
        "whatsapp",
        "whatsapp_app_secret",
        "0ldapp0ldapp0ldapp0ldapp0ldapp00",
        "9ewapp9ewapp9ewapp9ewapp9ewapp99",
        lambda secret: meta_request(wa_notification(wa_change([wa_text("hi")])), secret=secret),
    ),
    Rotated(
        "whatsapp",
        "whatsapp_verify_token",
        "old-verify-token",
        "new-verify-token",
        lambda token: handshake("subscribe", token, "8311"),
    ),
    Rotated(
        "twilio",
        "twilio_auth_token",
        "0ldauthtoken0ldauthtoken0ldauth0",
        "9ewauthtoken9ewauthtoken9ewauth9",
        lambda token: twilio_request(twilio_sms("hi"), token=token),
    ),
    Rotated(
        "generic",
        "generic_secret",
        "old-generic-secret",
        "new-generic-secret",
        lambda secret: generic_request(generic_message(), secret=secret),
    ),
]


def _channel(rotated: Rotated, value: str, clock: SettableClock) -> Channel:
    secrets = channel_secrets().model_copy(update={rotated.field: SecretStr(value)})
    return build_channels(
        secrets, clock, public_base_url=PUBLIC_BASE_URL, callback_hosts=("127.0.0.1",)
    )[rotated.channel]


@pytest.mark.parametrize("rotated", ROTATED, ids=[r.field for r in ROTATED])
def test_during_a_rotation_both_values_are_accepted_and_after_it_the_old_is_refused(
    rotated: Rotated, clock: SettableClock
) -> None:
    before = _channel(rotated, rotated.old, clock)
    during = _channel(rotated, f"{rotated.new} {rotated.old}", clock)
    after = _channel(rotated, rotated.new, clock)

    assert before.handle(rotated.request(rotated.old)).status == 200
    with pytest.raises((SignatureRejected, HandshakeRejected)):
        before.handle(rotated.request(rotated.new))  # not yet
    assert during.handle(rotated.request(rotated.old)).status == 200
    assert during.handle(rotated.request(rotated.new)).status == 200
    assert after.handle(rotated.request(rotated.new)).status == 200
    with pytest.raises((SignatureRejected, HandshakeRejected)) as refused:
        after.handle(rotated.request(rotated.old))
    assert refused.value.status in (401, 403)
    for value in (rotated.old, rotated.new):
        assert value not in repr(during) and value not in str(refused.value)


def test_a_twilio_shared_key_is_rotated_the_same_way(clock: SettableClock) -> None:
    from infra.channels.signing import twilio_headers
    from tests.channels.payloads import form_body
    from tests.channels.signed import TWILIO_URL

    def signed(secret: str) -> ChannelRequest:
        params = twilio_sms("hi")
        headers = twilio_headers(secret, TWILIO_URL, params, shared_key_id="KS1")
        return ChannelRequest.from_http("POST", TWILIO_URL, headers=headers, body=form_body(params))

    rotated = Rotated("twilio", "twilio_shared_key", "old-shared-key", "new-shared-key", signed)
    during = _channel(rotated, "new-shared-key old-shared-key", clock)
    after = _channel(rotated, "new-shared-key", clock)
    assert during.handle(signed("old-shared-key")).status == 200
    assert during.handle(signed("new-shared-key")).status == 200
    with pytest.raises(SignatureRejected):
        after.handle(signed("old-shared-key"))


async def test_what_waypoint_signs_itself_uses_the_first_value(
    clock: SettableClock, platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    secrets = channel_secrets().model_copy(
        update={"generic_secret": SecretStr("new-generic-secret old-generic-secret")}
    )
    generic = build_channels(secrets, clock, callback_hosts=("127.0.0.1",))["generic"]
    reply = OutboundReply(
        text="hello",
        reply_to={"callback_url": platform.url("replies"), "conversation_id": "c1"},
    )
    await generic.send(reply, http)

    [sent] = platform.requests
    timestamp = sent.headers["x-waypoint-timestamp"]
    expected = sign_generic("new-generic-secret", sent.body, timestamp)
    assert sent.headers["x-waypoint-signature"] == expected
