"""A tool fetches what the customer sent with the channel's own credentials (real local HTTP):
Telegram `getFile` then the file, WhatsApp's media URL then the file (Bearer token), Slack's
`url_private` (Bearer), Twilio's `MediaUrl` (Basic). Credentials only ever go to the platform's own
hosts, and an oversized file is refused rather than held in memory."""

from __future__ import annotations

import base64

import httpx
import pytest

from engine.sessions.session import Attachment
from infra.channels.base import Channel
from infra.channels.errors import ChannelConfigError, DeliveryRejected
from infra.channels.media import download, fetch_attachment
from tests.channels.fake_platform import FakePlatform, Scripted
from tests.channels.payloads import TWILIO_ACCOUNT_SID
from tests.channels.signed import SLACK_BOT_TOKEN, TG_BOT_TOKEN, TWILIO_TOKEN, WA_ACCESS_TOKEN


async def test_telegram_file_is_fetched_by_its_path(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(
        Scripted(200, {"ok": True, "result": {"file_id": "AgAD", "file_path": "photos/f_1.jpg"}}),
        Scripted(200, "JPEG-BYTES"),
    )
    photo = {"kind": "image", "channel": "telegram", "platform_id": "AgAD", "mime": "image/jpeg"}
    media = await fetch_attachment(channels, photo, http)  # as a tool finds it in its context
    assert (media.data, media.mime) == (b"JPEG-BYTES", "image/jpeg")
    get_file, file = platform.requests
    assert get_file.path == f"/telegram/bot{TG_BOT_TOKEN}/getFile"
    assert get_file.json() == {"file_id": "AgAD"}
    assert file.path == f"/telegram/file/bot{TG_BOT_TOKEN}/photos/f_1.jpg"
    assert repr(media).count("JPEG") == 0  # the bytes stay out of reprs and logs


async def test_whatsapp_media_url_then_file_both_with_the_token(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(
        Scripted(200, {"url": platform.url("graph/lookaside/m1"), "mime_type": "audio/ogg"}),
        Scripted(200, "OGG", {"content-type": "audio/ogg"}),
    )
    media = await fetch_attachment(
        channels, Attachment(kind="voice", platform_id="555"), http, channel="whatsapp"
    )
    assert (media.data, media.mime) == (b"OGG", "audio/ogg")
    lookup, file = platform.requests
    assert lookup.method == "GET" and lookup.path == "/graph/v26.0/555"
    assert file.path == "/graph/lookaside/m1"
    for request in (lookup, file):
        assert request.headers["authorization"] == f"Bearer {WA_ACCESS_TOKEN}"


async def test_whatsapp_refuses_a_media_url_off_metas_hosts(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(200, {"url": "https://collector.evil.example/grab"}))
    with pytest.raises(DeliveryRejected, match="not on the platform's hosts"):
        await fetch_attachment(
            channels, {"kind": "image", "platform_id": "1"}, http, channel="whatsapp"
        )
    assert len(platform.requests) == 1  # the token never left for the other host


async def test_slack_and_twilio_fetch_with_their_credentials_only_from_their_hosts(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(200, "PNG"), Scripted(200, "PDF"))
    slack_file = Attachment(kind="image", url=platform.url("slack/files-pri/F1/shot.png"))
    assert (await fetch_attachment(channels, slack_file, http, channel="slack")).data == b"PNG"
    assert platform.requests[0].headers["authorization"] == f"Bearer {SLACK_BOT_TOKEN}"
    mms = Attachment(kind="document", url=platform.url("twilio/2010-04-01/Media/ME1"))
    assert (await fetch_attachment(channels, mms, http, channel="twilio")).data == b"PDF"
    basic = base64.b64encode(f"{TWILIO_ACCOUNT_SID}:{TWILIO_TOKEN}".encode()).decode()
    assert platform.requests[1].headers["authorization"] == f"Basic {basic}"

    for channel, url in (
        ("slack", "https://files.slack.com.evil.example/x"),
        ("twilio", "https://api.twilio.com@evil.example/x"),
        ("twilio", "ftp://api.twilio.com/x"),
    ):
        with pytest.raises(DeliveryRejected):
            await fetch_attachment(
                channels, Attachment(kind="file", url=url), http, channel=channel
            )
    assert len(platform.requests) == 2


async def test_what_cannot_be_fetched_says_why(
    channels: dict[str, Channel], http: httpx.AsyncClient
) -> None:
    with pytest.raises(ChannelConfigError, match="cannot fetch media"):
        await fetch_attachment(
            channels, Attachment(kind="file", url="https://x"), http, channel="generic"
        )
    with pytest.raises(ChannelConfigError, match="location"):
        await fetch_attachment(
            channels, Attachment(kind="location", latitude=1, longitude=2), http, channel="telegram"
        )
    with pytest.raises(DeliveryRejected, match="file_id"):
        await fetch_attachment(channels, Attachment(kind="image"), http, channel="telegram")


async def test_an_oversized_file_is_refused(
    platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(200, "x" * 5000))
    with pytest.raises(DeliveryRejected, match="over 1000 bytes"):
        await download(http, platform.url("any"), channel="t", secrets=(), max_bytes=1000)
