"""Media through the whole stack (signed webhook → inbox → SQS FIFO → worker → turn → outbox →
platform): a voice note gets the agent's "can't open that" reply instead of silence, and a photo's
caption is answered, its attachment stored with the customer's event."""

from __future__ import annotations

from typing import Any

from engine.sessions.session import EventKind, EventSource
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.channels.payloads import tg_text_update
from tests.functions import signed_events as signed
from tests.functions.conftest import drain, invoke_webhook, load_session
from tests.functions.platforms import FakePlatforms

CHAT = 4242
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")


def _send(update_id: int, **content: Any) -> None:
    update = tg_text_update(update_id=update_id, chat_id=CHAT, user_id=CHAT)
    del update["message"]["text"]
    update["message"] |= content
    assert invoke_webhook(signed.telegram(update))["statusCode"] == 200


def test_a_voice_note_is_answered_with_the_unsupported_media_reply(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    voice = {
        "file_id": "AwAD-voice",
        "file_unique_id": "v",
        "duration": 2,
        "mime_type": "audio/ogg",
    }
    _send(1, voice=voice)

    assert drain(stack) == [{"batchItemFailures": []}]

    [reply] = platforms.replies("telegram")
    agent = runtime.run(runtime.agents.get("bank"))
    assert reply.json()["text"] == agent.config.unsupported_media_response
    customer = [
        e
        for e in load_session(runtime, SESSION).events
        if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]
    assert customer[0].data["attachments"] == [
        {"kind": "voice", "channel": "telegram", "platform_id": "AwAD-voice", "mime": "audio/ogg"}
    ]


def test_a_photo_caption_is_answered_by_a_turn_with_the_photo_on_its_event(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    photo = [{"file_id": "AgAD-big", "file_unique_id": "p", "width": 800, "height": 600}]
    _send(2, photo=photo, caption="hi")

    assert drain(stack) == [{"batchItemFailures": []}]

    [reply] = platforms.replies("telegram")
    agent = runtime.run(runtime.agents.get("bank"))
    assert reply.json()["text"] != agent.config.unsupported_media_response
    [customer] = [
        e
        for e in load_session(runtime, SESSION).events
        if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]
    assert customer.text == "hi"
    assert customer.data["attachments"][0]["platform_id"] == "AgAD-big"
