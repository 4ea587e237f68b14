"""What a channel writes around a reply — the numbered options' prompt, a list's button and title,
a menu's placeholder, the text of a reply with only options — is in the reply's language (the
engine records it on the reply event; `infra.outbox.outbound_reply` carries it)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from engine.sessions.session import Event, EventKind, EventSource
from infra.channels.base import Channel, OutboundReply, ReplyOption
from infra.outbox import outbound_reply
from tests.channels.fake_platform import FakePlatform
from tests.channels.payloads import PHONE_NUMBER_ID

WA_ID = "972544401243"


def options(n: int) -> list[ReplyOption]:
    return [ReplyOption(id=f"o{i}", label=f"Opción {i}") for i in range(n)]


async def test_sms_asks_for_a_number_in_the_replys_language(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="¿Qué necesitas?",
        options=options(2),
        reply_to={"to": "+14155550199", "from": "+14155550100"},
        language="es",
    )
    await channels["twilio"].send(reply, http)

    assert platform.requests[0].form()["Body"] == (
        "¿Qué necesitas?\n\nResponde con un número:\n1. Opción 0\n2. Opción 1"
    )


async def test_a_whatsapp_list_has_its_button_and_title_in_the_replys_language(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="口座をお選びください",
        options=options(5),
        reply_to={"phone_number_id": PHONE_NUMBER_ID, "wa_id": WA_ID},
        language="ja",
    )
    await channels["whatsapp"].send(reply, http)

    action = platform.requests[0].json()["interactive"]["action"]
    assert action["button"] == "選択"
    assert action["sections"][0]["title"] == "選択肢"


async def test_a_slack_menu_has_its_placeholder_in_the_replys_language(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="Welches Konto?", options=options(30), reply_to={"channel": "D1"}, language="de"
    )
    await channels["slack"].send(reply, http)

    _, actions = platform.requests[0].json()["blocks"]
    assert actions["elements"][0]["placeholder"]["text"] == "Option auswählen"


def test_a_reply_of_only_options_says_choose_in_its_language() -> None:
    reply = OutboundReply(options=options(2), language="zh-Hant")
    assert reply.display_text == "請選擇一個選項："
    assert OutboundReply(options=options(2)).display_text == "Please choose an option:"


def test_the_outbound_reply_is_in_the_language_the_engine_recorded() -> None:
    event = Event(
        id="t1.1",
        offset=1,
        kind=EventKind.MESSAGE,
        source=EventSource.AGENT,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        turn_id="t1",
        text="¿Seguimos?",
        data={"language": "es", "options": [{"id": "confirm", "label": "Sí, adelante"}]},
    )
    reply = outbound_reply(event, {"to": "+1"})
    assert reply is not None and reply.language == "es"

    older = event.model_copy(update={"data": {}})  # a reply recorded before languages
    assert (outbound_reply(older, {"to": "+1"}) or reply).language == "en"
