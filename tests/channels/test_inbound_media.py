"""Inbound media, captions and locations, from payloads shaped like each platform's own (Telegram
Bot API `Message`, pywa's tests/data/updates/message.json, Slack's `file_share` and
`thread_broadcast` message events, Twilio's MMS webhook parameters): a caption or comment is the
message's text, each file a structured `Attachment` (kind, platform id / URL, mime, size, name),
a shared location structured values plus a readable text; they reach the engine's message."""

from __future__ import annotations

import time
from typing import Any

import pytest

from engine.sessions.session import Attachment
from infra.channels.base import Channel, NormalizedMessage
from infra.channels.errors import MalformedRequest
from tests.channels.payloads import (
    slack_event,
    tg_text_update,
    twilio_sms,
    wa_change,
    wa_notification,
)
from tests.channels.signed import meta_request, slack_request, telegram_request, twilio_request


def _one(channel: Channel, request: Any) -> NormalizedMessage:
    outcome = channel.handle(request)
    assert outcome.kind == "messages", outcome.reason
    [message] = outcome.messages
    return message


def _tg(**content: Any) -> dict[str, Any]:
    update = tg_text_update()
    del update["message"]["text"]
    update["message"] |= content
    return update


# -- Telegram ------------------------------------------------------------------------------------


def test_telegram_photo_caption_is_the_text_and_the_largest_size_the_attachment(
    channels: dict[str, Channel],
) -> None:
    sizes = [
        {
            "file_id": "AgAD-small",
            "file_unique_id": "u1",
            "width": 90,
            "height": 67,
            "file_size": 1200,
        },
        {
            "file_id": "AgAD-large",
            "file_unique_id": "u2",
            "width": 1280,
            "height": 960,
            "file_size": 98765,
        },
    ]
    message = _one(
        channels["telegram"], telegram_request(_tg(photo=sizes, caption="Is this my card?"))
    )
    assert message.text == "Is this my card?"
    assert message.attachments == [
        Attachment(kind="image", platform_id="AgAD-large", mime="image/jpeg", size=98765)
    ]


def test_telegram_voice_note_and_document_are_attachments_without_text(
    channels: dict[str, Channel],
) -> None:
    voice = {
        "file_id": "AwAD-voice",
        "file_unique_id": "v",
        "duration": 3,
        "mime_type": "audio/ogg",
        "file_size": 5321,
    }
    message = _one(channels["telegram"], telegram_request(_tg(voice=voice)))
    assert message.text == ""
    assert message.attachments == [
        Attachment(kind="voice", platform_id="AwAD-voice", mime="audio/ogg", size=5321)
    ]
    assert message.to_inbound().is_unreadable_media
    document = {
        "file_id": "BQAD-doc",
        "file_unique_id": "d",
        "file_name": "statement.pdf",
        "mime_type": "application/pdf",
        "file_size": 42,
    }
    message = _one(channels["telegram"], telegram_request(_tg(document=document, caption="see")))
    assert (message.text, message.attachments[0].name, message.attachments[0].kind) == (
        "see",
        "statement.pdf",
        "document",
    )


def test_telegram_location_and_venue_are_structured_values_and_readable_text(
    channels: dict[str, Channel],
) -> None:
    message = _one(
        channels["telegram"],
        telegram_request(_tg(location={"latitude": 48.8584, "longitude": 2.2945})),
    )
    assert message.attachments == [Attachment(kind="location", latitude=48.8584, longitude=2.2945)]
    assert message.text == "Shared location: 48.858400, 2.294500"
    assert not message.to_inbound().is_unreadable_media
    venue = {
        "location": {"latitude": 48.8584, "longitude": 2.2945},
        "title": "Eiffel Tower",
        "address": "Champ de Mars, Paris",
    }
    message = _one(
        channels["telegram"], telegram_request(_tg(venue=venue, location=venue["location"]))
    )
    assert message.attachments[0].name == "Eiffel Tower"
    assert (
        message.text == "Shared location: Eiffel Tower, Champ de Mars, Paris (48.858400, 2.294500)"
    )


def test_telegram_message_with_nothing_usable_is_still_ignored(
    channels: dict[str, Channel],
) -> None:
    outcome = channels["telegram"].handle(telegram_request(_tg(dice={"emoji": "🎲", "value": 3})))
    assert outcome.kind == "ignored"


# -- WhatsApp ------------------------------------------------------------------------------------


def _wa(kind: str, content: dict[str, Any]) -> dict[str, Any]:
    message = {
        "from": "972544401243",
        "id": f"wamid.{kind}",
        "timestamp": str(int(time.time())),
        "type": kind,
        kind: content,
    }
    return wa_notification(wa_change([message]))


def test_whatsapp_image_caption_is_the_text(channels: dict[str, Channel]) -> None:
    image = {
        "caption": "My receipt",
        "mime_type": "image/jpeg",
        "sha256": "abc=",
        "id": "1234567890",
    }
    message = _one(channels["whatsapp"], meta_request(_wa("image", image)))
    assert message.text == "My receipt" and message.raw_type == "image"
    assert message.attachments == [
        Attachment(kind="image", platform_id="1234567890", mime="image/jpeg")
    ]


def test_whatsapp_voice_note_and_document(channels: dict[str, Channel]) -> None:
    audio = {"mime_type": "audio/ogg; codecs=opus", "sha256": "x=", "id": "555", "voice": True}
    message = _one(channels["whatsapp"], meta_request(_wa("audio", audio)))
    assert message.text == "" and message.attachments[0].kind == "voice"
    assert message.to_inbound().is_unreadable_media
    document = {"filename": "bill.pdf", "mime_type": "application/pdf", "sha256": "y=", "id": "777"}
    message = _one(channels["whatsapp"], meta_request(_wa("document", document)))
    assert message.attachments == [
        Attachment(kind="document", platform_id="777", mime="application/pdf", name="bill.pdf")
    ]


def test_whatsapp_location(channels: dict[str, Channel]) -> None:
    place = {"latitude": 38.9, "longitude": -77.03, "name": "Head office", "address": "1 Main St"}
    message = _one(channels["whatsapp"], meta_request(_wa("location", place)))
    assert message.attachments == [
        Attachment(
            kind="location",
            latitude=38.9,
            longitude=-77.03,
            name="Head office",
            address="1 Main St",
        )
    ]
    assert message.text == "Shared location: Head office, 1 Main St (38.900000, -77.030000)"


# -- Slack ---------------------------------------------------------------------------------------


def test_slack_file_share_comment_is_the_text_and_the_file_an_attachment(
    channels: dict[str, Channel],
) -> None:
    files = [
        {
            "id": "F0123ABC",
            "name": "screenshot.png",
            "mimetype": "image/png",
            "filetype": "png",
            "size": 20480,
            "url_private": "https://files.slack.com/files-pri/T111-F0123ABC/screenshot.png",
        }
    ]
    body = slack_event(
        "The error is in this screenshot",
        event_type="message",
        channel="D111",
        channel_type="im",
        subtype="file_share",
        files=files,
    )
    message = _one(channels["slack"], slack_request(body))
    assert message.text == "The error is in this screenshot"
    assert message.raw_type == "message.file_share"
    assert message.attachments == [
        Attachment(
            kind="image",
            platform_id="F0123ABC",
            url="https://files.slack.com/files-pri/T111-F0123ABC/screenshot.png",
            mime="image/png",
            size=20480,
            name="screenshot.png",
        )
    ]


def test_slack_thread_broadcast_is_answered_but_edits_and_bots_still_are_not(
    channels: dict[str, Channel],
) -> None:
    body = slack_event(
        "also posting this to the channel",
        event_type="message",
        subtype="thread_broadcast",
        thread_ts="1595926000.000100",
    )
    message = _one(channels["slack"], slack_request(body))
    assert message.text == "also posting this to the channel"
    assert message.reply_to["thread_ts"] == "1595926000.000100"
    for subtype in ("message_changed", "bot_message", "channel_join"):
        ignored = channels["slack"].handle(slack_request(slack_event("x", subtype=subtype)))
        assert ignored.kind == "ignored"
    bot_share = slack_event("x", subtype="file_share", bot_id="B1")
    assert channels["slack"].handle(slack_request(bot_share)).kind == "ignored"


# -- Twilio --------------------------------------------------------------------------------------


def test_twilio_mms_body_is_the_text_and_each_media_an_attachment(
    channels: dict[str, Channel],
) -> None:
    media = "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME"
    params = twilio_sms(
        "Here you go",
        NumMedia="2",
        MediaUrl0=media + "0",
        MediaContentType0="image/jpeg",
        MediaUrl1=media + "1",
        MediaContentType1="application/pdf",
        MediaUrl2=media + "2",  # beyond NumMedia: not Twilio's, ignored
    )
    message = _one(channels["twilio"], twilio_request(params))
    assert message.text == "Here you go"
    assert message.attachments == [
        Attachment(kind="image", url=media + "0", mime="image/jpeg"),
        Attachment(kind="document", url=media + "1", mime="application/pdf"),
    ]


def test_twilio_media_only_and_whatsapp_location(channels: dict[str, Channel]) -> None:
    params = twilio_sms(
        "", NumMedia="1", MediaUrl0="https://api.twilio.com/m/1", MediaContentType0="audio/ogg"
    )
    message = _one(channels["twilio"], twilio_request(params))
    assert message.to_inbound().is_unreadable_media
    location = twilio_sms(
        "",
        From="whatsapp:+14155550199",
        To="whatsapp:+14155550100",
        Latitude="37.7749",
        Longitude="-122.4194",
        Address="Market St",
        Label="Office",
    )
    message = _one(channels["twilio"], twilio_request(location))
    assert message.attachments == [
        Attachment(
            kind="location",
            latitude=37.7749,
            longitude=-122.4194,
            name="Office",
            address="Market St",
        )
    ]
    assert message.text.startswith("Shared location: Office, Market St")


def test_hostile_media_fields_never_crash_the_webhook(channels: dict[str, Channel]) -> None:
    for params in (
        twilio_sms("", NumMedia="999999999999"),
        twilio_sms("", NumMedia="-3", MediaUrl0="https://x"),
        twilio_sms("hi", Latitude="nan-ish", Longitude="2"),
        twilio_sms("hi", Latitude="nan", Longitude="inf"),
        twilio_sms("hi", Latitude="91", Longitude="0"),
    ):
        outcome = channels["twilio"].handle(twilio_request(params))
        assert outcome.kind in ("messages", "ignored")
        assert all(a.kind != "location" for m in outcome.messages for a in m.attachments)
    for hostile in ({"latitude": float("nan"), "longitude": 0}, {"latitude": 0, "longitude": 1e9}):
        with pytest.raises(MalformedRequest):
            channels["telegram"].handle(telegram_request(_tg(location=hostile)))
        with pytest.raises(MalformedRequest):
            channels["whatsapp"].handle(meta_request(_wa("location", hostile)))


# -- into the engine -----------------------------------------------------------------------------


def test_attachments_reach_the_engines_message(channels: dict[str, Channel]) -> None:
    image = {"caption": "My receipt", "mime_type": "image/jpeg", "id": "1234567890"}
    inbound = _one(channels["whatsapp"], meta_request(_wa("image", image))).to_inbound()
    assert inbound.text == "My receipt"
    assert inbound.attachments == (  # each says which channel can fetch it
        Attachment(kind="image", channel="whatsapp", platform_id="1234567890", mime="image/jpeg"),
    )
    assert not inbound.is_unreadable_media  # it has a caption: a turn answers it


def test_a_contact_card_or_poll_is_answered_not_dropped(channels: dict[str, Channel]) -> None:
    contact = {"phone_number": "+15551234567", "first_name": "Ann"}
    message = _one(channels["telegram"], telegram_request(_tg(contact=contact)))
    assert message.attachments == [Attachment(kind="other", name="contact")]
    assert message.to_inbound().is_unreadable_media
    card = [{"name": {"formatted_name": "Ann"}, "phones": [{"phone": "+15551234567"}]}]
    message = _one(channels["whatsapp"], meta_request(_wa("contacts", card)))
    assert message.attachments == [Attachment(kind="other", name="contacts")]
    unsupported = wa_notification(
        wa_change(
            [
                {
                    "from": "972544401243",
                    "id": "wamid.U",
                    "timestamp": str(int(time.time())),
                    "type": "unsupported",
                    "errors": [{"code": 131051, "title": "Message type unknown"}],
                }
            ]
        )
    )
    message = _one(channels["whatsapp"], meta_request(unsupported))
    assert message.to_inbound().is_unreadable_media
