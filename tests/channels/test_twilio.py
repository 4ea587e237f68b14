"""Twilio: form webhooks signed over the exact public URL + sorted parameters, acknowledged with
empty TwiML; replies through the Messages API with Basic auth (real local HTTP)."""

from __future__ import annotations

import base64

import httpx
import pytest

from infra.channels.base import Channel, ChannelRequest, OutboundReply, ReplyOption
from infra.channels.errors import (
    DeliveryRejected,
    DeliveryUnavailable,
    MalformedRequest,
    RateLimited,
    SignatureRejected,
)
from infra.channels.signing import twilio_headers
from infra.channels.twilio import EMPTY_TWIML, TwilioChannel
from tests.channels.fake_platform import FakePlatform, Scripted
from tests.channels.payloads import TWILIO_ACCOUNT_SID, form_body, twilio_sms
from tests.channels.signed import (
    PUBLIC_BASE_URL,
    TWILIO_PATH,
    TWILIO_TOKEN,
    TWILIO_URL,
    twilio_request,
)
from tests.channels.vectors import (
    TWILIO_DOC_PARAMS,
    TWILIO_DOC_SIGNATURE,
    TWILIO_DOC_TOKEN,
    TWILIO_DOC_URL,
)


def test_twilios_documented_request_passes_verification() -> None:
    # Twilio's own example (a voice webhook: verified, then refused as not a message).
    channel = TwilioChannel(auth_token=TWILIO_DOC_TOKEN, account_sid="AC123")
    request = ChannelRequest.from_http(
        "POST",
        TWILIO_DOC_URL,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Twilio-Signature": TWILIO_DOC_SIGNATURE,
        },
        body=form_body(TWILIO_DOC_PARAMS),
    )
    with pytest.raises(MalformedRequest, match="MessageSid, AccountSid"):
        channel.handle(request)


def test_inbound_sms_is_normalized_and_acked_with_empty_twiml(
    channels: dict[str, Channel],
) -> None:
    outcome = channels["twilio"].handle(twilio_request(twilio_sms("Hello  there")))

    assert outcome.kind == "messages" and outcome.status == 200
    assert outcome.body == EMPTY_TWIML
    assert outcome.headers["Content-Type"].startswith("text/xml")
    [message] = outcome.messages
    assert message.event_id == "SM11111111111111111111111111111111"
    assert message.account_id == TWILIO_ACCOUNT_SID
    assert message.conversation_key == f"twilio:{TWILIO_ACCOUNT_SID}:+14155550100:+14155550199"
    assert message.customer_id == "+14155550199"
    assert message.text == "Hello  there"
    assert message.choice is None
    assert message.reply_to == {
        "to": "+14155550199",
        "from": "+14155550100",
        "message_sid": "SM11111111111111111111111111111111",  # for WhatsApp's typing indicator
        "messaging_service_sid": "MG11111111111111111111111111111111",
    }
    assert message.raw_type == "sms"


def test_whatsapp_quick_reply_through_twilio_is_a_choice(channels: dict[str, Channel]) -> None:
    params = twilio_sms(
        "Billing",
        From="whatsapp:+14155550199",
        To="whatsapp:+14155550100",
        ButtonPayload="billing",
        ButtonText="Billing",
        ProfileName="Ada",
    )
    [message] = channels["twilio"].handle(twilio_request(params)).messages
    assert (message.choice, message.text, message.raw_type) == ("billing", "Billing", "whatsapp")
    assert message.customer_name == "Ada"


def test_the_signature_binds_the_public_url(channels: dict[str, Channel]) -> None:
    params = twilio_sms()
    # Signed for another host, another path, another query, or plain http: all refused.
    for url in (
        "https://evil.example.com" + TWILIO_PATH,
        PUBLIC_BASE_URL + "/webhooks/other",
        TWILIO_URL + "?tenant=b",
        TWILIO_URL.replace("https://", "http://"),
    ):
        request = ChannelRequest.from_http(
            "POST",
            TWILIO_URL,
            headers=twilio_headers(TWILIO_TOKEN, url, params),
            body=form_body(params),
        )
        with pytest.raises(SignatureRejected):
            channels["twilio"].handle(request)


def test_the_url_is_rebuilt_from_the_public_base_url(channels: dict[str, Channel]) -> None:
    # Behind API Gateway the Lambda sees an internal host and a stage; Twilio signed the public URL.
    params = twilio_sms()
    request = ChannelRequest.from_http(
        "POST",
        "https://abc123.execute-api.eu-west-1.amazonaws.com" + TWILIO_PATH + "?x=1",
        headers=twilio_headers(TWILIO_TOKEN, TWILIO_URL + "?x=1", params),
        body=form_body(params),
    )
    assert channels["twilio"].handle(request).kind == "messages"


@pytest.mark.parametrize("signed_url", [TWILIO_URL.replace(".com", ".com:443")])
def test_default_port_variants_are_accepted(channels: dict[str, Channel], signed_url: str) -> None:
    params = twilio_sms()
    request = ChannelRequest.from_http(
        "POST",
        TWILIO_URL,
        headers=twilio_headers(TWILIO_TOKEN, signed_url, params),
        body=form_body(params),
    )
    assert channels["twilio"].handle(request).kind == "messages"


@pytest.mark.parametrize("change", ["added", "changed"])
def test_an_added_or_changed_parameter_breaks_the_signature(
    channels: dict[str, Channel], change: str
) -> None:
    signed = twilio_request(twilio_sms("hi"))
    params = twilio_sms("hi") | ({"Extra": "1"} if change == "added" else {"Body": "bye"})
    with pytest.raises(SignatureRejected):
        channels["twilio"].handle(signed.model_copy(update={"body": form_body(params)}))


def test_another_accounts_request_is_rejected(channels: dict[str, Channel]) -> None:
    request = twilio_request(twilio_sms(AccountSid="AC" + "f" * 32))
    with pytest.raises(SignatureRejected, match="another Twilio account"):
        channels["twilio"].handle(request)


@pytest.mark.parametrize(
    "params",
    [
        twilio_sms(MessageStatus="delivered", SmsStatus="delivered"),
        twilio_sms("", NumMedia="1"),  # says it has media, but names none
        twilio_sms(""),
    ],
    ids=["status-callback", "media-count-without-urls", "empty"],
)
def test_status_callbacks_and_bodiless_messages_are_ignored_with_twiml(
    channels: dict[str, Channel], params: dict[str, str]
) -> None:
    outcome = channels["twilio"].handle(twilio_request(params))
    assert outcome.kind == "ignored" and outcome.body == EMPTY_TWIML


def test_a_message_without_message_sid_is_400(channels: dict[str, Channel]) -> None:
    params = twilio_sms()
    del params["MessageSid"]
    with pytest.raises(MalformedRequest, match="MessageSid"):
        channels["twilio"].handle(twilio_request(params))


# -- sending ------------------------------------------------------------------------------------


async def test_reply_is_a_basic_auth_form_post_with_numbered_options(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="What do you need?",
        options=[
            ReplyOption(id="billing", label="Billing"),
            ReplyOption(id="support", label="Support"),
        ],
        reply_to={"to": "+14155550199", "from": "+14155550100"},
    )
    receipt = await channels["twilio"].send(reply, http)

    [request] = platform.requests
    assert request.path == f"/twilio/2010-04-01/Accounts/{TWILIO_ACCOUNT_SID}/Messages.json"
    expected_auth = base64.b64encode(f"{TWILIO_ACCOUNT_SID}:{TWILIO_TOKEN}".encode()).decode()
    assert request.headers["authorization"] == f"Basic {expected_auth}"
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert request.form() == {
        "To": "+14155550199",
        "From": "+14155550100",
        "Body": "What do you need?\n\nReply with a number:\n1. Billing\n2. Support",
    }
    assert receipt.message_ids == [f"SM{1:032d}"]


async def test_long_sms_is_split_at_1600_characters(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="lorem ipsum " * 400, reply_to={"to": "+1", "messaging_service_sid": "MG1"}
    )
    receipt = await channels["twilio"].send(reply, http)
    bodies = [r.form() for r in platform.requests]
    assert receipt.parts == len(bodies) == 4
    assert all(len(b["Body"]) <= 1600 and b["MessagingServiceSid"] == "MG1" for b in bodies)


async def test_twilio_errors_are_typed(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(text="hi", reply_to={"to": "+1", "from": "+2"})
    platform.script(
        Scripted(
            429,
            {"code": 20429, "message": "Too Many Requests", "status": 429},
            {"Retry-After": "2"},
        )
    )
    with pytest.raises(RateLimited) as limited:
        await channels["twilio"].send(reply, http)
    assert limited.value.retry_after == 2

    platform.script(
        Scripted(400, {"code": 21211, "message": "Invalid 'To' Phone Number", "status": 400})
    )
    with pytest.raises(DeliveryRejected, match="21211"):
        await channels["twilio"].send(reply, http)

    platform.script(Scripted(503, "Service Unavailable"))
    with pytest.raises(DeliveryUnavailable) as unavailable:
        await channels["twilio"].send(reply, http)
    assert TWILIO_TOKEN not in str(unavailable.value)
