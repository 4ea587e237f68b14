"""Factories for platform webhook payloads, shaped like the real ones (shared/notes/channels.md §9:
bolt-python, pywa, python-telegram-bot fixtures, Twilio's webhook-request doc). Each takes only the
values a test cares about."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote, urlencode

# -- Telegram -------------------------------------------------------------------------------------


def tg_text_update(
    text: str = "/start",
    *,
    update_id: int = 10000,
    chat_id: int = 1111111,
    user_id: int = 1111111,
    is_bot: bool = False,
    topic: int | None = None,
    date: int | None = None,
) -> dict[str, Any]:
    """A text message update, sent `date` (default: now, so it is not a replay)."""
    message: dict[str, Any] = {
        "message_id": 1365,
        "from": {"id": user_id, "is_bot": is_bot, "first_name": "T"},
        "chat": {"id": chat_id, "type": "private" if topic is None else "supergroup"},
        "date": int(time.time()) if date is None else date,
        "text": text,
    }
    if topic is not None:
        message |= {"message_thread_id": topic, "is_topic_message": True}
    return {"update_id": update_id, "message": message}


def tg_click_update(
    data: str = "opt:2",
    *,
    update_id: int = 10001,
    chat_id: int = 1111111,
    keyboard: tuple[tuple[str, str], ...] = (("Billing", "opt:1"), ("Support", "opt:2")),
) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "callback_query": {
            "id": "4382bfdwdsb323b2d9",
            "from": {"id": 1111111, "is_bot": False, "first_name": "T"},
            "message": {
                "message_id": 1366,
                "from": {"id": 123456, "is_bot": True, "first_name": "Bot"},
                "chat": {"id": chat_id, "type": "private"},
                "date": 1441645600,
                "text": "How can I help?",
                "reply_markup": {
                    "inline_keyboard": [
                        [{"text": label, "callback_data": value}] for label, value in keyboard
                    ]
                },
            },
            "chat_instance": "-123",
            "data": data,
        },
    }


# -- Slack ----------------------------------------------------------------------------------------


def slack_event(
    text: str = "<@W111> Hi",
    *,
    event_type: str = "app_mention",
    event_id: str = "Ev111",
    channel: str = "C111",
    channel_type: str = "channel",
    user: str | None = "W222",
    ts: str = "1595926230.009600",
    thread_ts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An `event_callback`, as in bolt-python's tests/adapter_tests/aws/test_aws_lambda.py."""
    event: dict[str, Any] = {
        "type": event_type,
        "text": text,
        "ts": ts,
        "channel": channel,
        "channel_type": channel_type,
        "event_ts": ts,
        "client_msg_id": "9cbd4c5b-7ddf-4ede-b479-ad21fca66d63",
    }
    if user is not None:
        event["user"] = user
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    event |= extra
    return {
        "token": "verification_token",
        "team_id": "T111",
        "enterprise_id": "E111",
        "api_app_id": "A111",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1595926230,
        "authorizations": [
            {"enterprise_id": "E111", "team_id": "T111", "user_id": "W111", "is_bot": True}
        ],
    }


def slack_block_actions(
    value: str = "billing",
    *,
    label: str = "Billing",
    channel: str = "C111",
    thread_ts: str | None = "1595926230.009600",
    trigger_id: str = "111.222.xxx",
) -> dict[str, Any]:
    """A `block_actions` payload, as in bolt-python's tests/scenario_tests/test_block_actions.py."""
    message: dict[str, Any] = {"type": "message", "ts": "1596478230.000200", "text": "Pick one"}
    if thread_ts is not None:
        message["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "user": {
            "id": "W222",
            "username": "primary-owner",
            "name": "primary-owner",
            "team_id": "T111",
        },
        "api_app_id": "A111",
        "token": "verification_token",
        "container": {
            "type": "message",
            "message_ts": "1596478230.000200",
            "channel_id": channel,
            "is_ephemeral": False,
        },
        "trigger_id": trigger_id,
        "team": {"id": "T111", "domain": "workspace"},
        "channel": {"id": channel, "name": "random"},
        "message": message,
        "response_url": "https://hooks.slack.com/actions/T111/111/xxx",
        "actions": [
            {
                "action_id": "waypoint_choice_0",
                "block_id": "b",
                "text": {"type": "plain_text", "text": label, "emoji": True},
                "value": value,
                "type": "button",
                "action_ts": "1596478232.151932",
            }
        ],
    }


def slack_form(payload: dict[str, Any]) -> bytes:
    """An interactivity body: one form field `payload` holding the JSON."""
    return ("payload=" + quote(json.dumps(payload))).encode()


# -- WhatsApp (Meta) ------------------------------------------------------------------------------

PHONE_NUMBER_ID = "277321005464405"


def wa_text(
    body: str = "Hi",
    *,
    wamid: str = "wamid.A1",
    sender: str | None = "972544401243",
    timestamp: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A text message, sent at `timestamp` (default: now, so it is not a replay)."""
    message: dict[str, Any] = {
        "id": wamid,
        "timestamp": str(int(time.time()) if timestamp is None else timestamp),
        "type": "text",
        "text": {"body": body},
    }
    if sender is not None:
        message["from"] = sender
    return message | extra


def wa_button_reply(
    reply_id: str = "billing", title: str = "Billing", *, wamid: str = "wamid.B1"
) -> dict[str, Any]:
    return {
        "from": "972544401243",
        "id": wamid,
        "timestamp": str(int(time.time())),
        "type": "interactive",
        "interactive": {"type": "button_reply", "button_reply": {"id": reply_id, "title": title}},
    }


def wa_list_reply(
    reply_id: str = "row-7",
    title: str = "Savings",
    *,
    description: str | None = None,
    wamid: str = "wamid.L1",
) -> dict[str, Any]:
    """A list pick; Meta echoes the row's description when the row had one."""
    picked = {"id": reply_id, "title": title}
    if description is not None:
        picked["description"] = description
    return {
        "from": "972544401243",
        "id": wamid,
        "timestamp": str(int(time.time())),
        "type": "interactive",
        "interactive": {"type": "list_reply", "list_reply": picked},
    }


def wa_contact(
    wa_id: str | None = "972544401243", user_id: str | None = None, name: str = "PyWa Tests"
) -> dict[str, Any]:
    contact: dict[str, Any] = {"profile": {"name": name}}
    if wa_id is not None:
        contact["wa_id"] = wa_id
    if user_id is not None:
        contact["user_id"] = user_id
    return contact


def wa_change(
    messages: list[dict[str, Any]] | None = None,
    *,
    contacts: list[dict[str, Any]] | None = None,
    statuses: list[dict[str, Any]] | None = None,
    phone_number_id: str = PHONE_NUMBER_ID,
) -> dict[str, Any]:
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550953877", "phone_number_id": phone_number_id},
    }
    if messages is not None:
        value["contacts"] = contacts if contacts is not None else [wa_contact()]
        value["messages"] = messages
    if statuses is not None:
        value["statuses"] = statuses
    return {"value": value, "field": "messages"}


def wa_notification(*changes: dict[str, Any]) -> dict[str, Any]:
    """One entry holding `changes` (each from `wa_change`)."""
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": "264937493375603", "changes": list(changes)}],
    }


def wa_status(wamid: str = "wamid.OUT1", status: str = "delivered") -> dict[str, Any]:
    return {
        "id": wamid,
        "status": status,
        "timestamp": "1730231999",
        "recipient_id": "972544401243",
    }


# -- Twilio ---------------------------------------------------------------------------------------

TWILIO_ACCOUNT_SID = "AC" + "0123456789abcdef" * 2


def twilio_sms(body: str = "Hello", **overrides: str) -> dict[str, str]:
    """An inbound SMS webhook's parameters (Twilio's "webhook-request" doc)."""
    params = {
        "ToCountry": "US",
        "ToState": "CA",
        "SmsMessageSid": "SM11111111111111111111111111111111",
        "NumMedia": "0",
        "ToCity": "SAN FRANCISCO",
        "FromZip": "94105",
        "SmsSid": "SM11111111111111111111111111111111",
        "FromState": "CA",
        "SmsStatus": "received",
        "FromCity": "SAN FRANCISCO",
        "Body": body,
        "FromCountry": "US",
        "To": "+14155550100",
        "MessagingServiceSid": "MG11111111111111111111111111111111",
        "ToZip": "94105",
        "NumSegments": "1",
        "MessageSid": "SM11111111111111111111111111111111",
        "AccountSid": TWILIO_ACCOUNT_SID,
        "From": "+14155550199",
        "ApiVersion": "2010-04-01",
    }
    return params | overrides


def form_body(params: dict[str, str]) -> bytes:
    return urlencode(params).encode()


# -- generic --------------------------------------------------------------------------------------


def generic_message(text: str = "hi", **overrides: Any) -> dict[str, Any]:
    return {
        "event_id": "evt-1",
        "conversation_id": "conv-1",
        "customer_id": "cust-1",
        "text": text,
        "callback_url": "http://127.0.0.1:9/hooks/waypoint",
    } | overrides


def json_body(data: dict[str, Any]) -> bytes:
    """Compact JSON, non-ASCII escaped as Meta does (json.dumps' default ensure_ascii)."""
    return json.dumps(data, separators=(",", ":")).encode()
