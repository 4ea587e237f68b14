"""What each platform accepts from a bot, written from its own documentation, and validators that
check an outbound payload against it.

The renderers (`telegram`, `slack`, `whatsapp`, `twilio`) are written to these limits; the
validators are written separately, from the documents, so the tests can check every rendered
payload against them (`tests/channels/test_rendering_limits.py`), and a channel can check a payload
before it is sent. Each validator returns the list of broken rules (empty: the payload is valid).

Units: Telegram counts UTF-16 code units; Twilio counts characters of its UCS-2 body, i.e. UTF-16
units. Slack and Meta say "characters" without defining them; we count UTF-16 units, which is
never fewer than code points, so a payload valid here is valid under either reading.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from infra.channels.sms import sms_cost
from infra.channels.text import utf16_len
from infra.channels.titles import title_key

# -- Telegram Bot API (https://core.telegram.org/bots/api) ---------------------------------------
# sendMessage.text: "Text of the message to be sent, 1-4096 characters after entities parsing"
# (#sendmessage); lengths are in UTF-16 code units (#formatting-options: "entity length in UTF-16").
TELEGRAM_TEXT_UTF16 = 4096
# InlineKeyboardButton.callback_data: "Data to be sent in a callback query … 1-64 bytes"
# (#inlinekeyboardbutton).
TELEGRAM_CALLBACK_DATA_BYTES = 64
# Not stated in the Bot API reference: Telegram's servers refuse an inline keyboard of more than
# 100 buttons (the platform's practical cap, as reported in issue #18 and by bot developers).
TELEGRAM_MAX_BUTTONS = 100

# -- Slack (https://docs.slack.dev/reference/block-kit) ------------------------------------------
# chat.postMessage `blocks`: "up to 50 blocks" per message (/reference/block-kit/blocks).
SLACK_MAX_BLOCKS = 50
# chat.postMessage `text`: "truncated … at 40,000 characters" (/reference/methods/chat.postMessage).
SLACK_MAX_TEXT = 40_000
# Section block `text`: "Maximum length for the text in this field is 3000 characters".
SLACK_SECTION_TEXT = 3000
# Actions block `elements`: "There is a maximum of 25 elements in each action block".
SLACK_ACTIONS_ELEMENTS = 25
# Button element: text "Maximum length … 75 characters"; value "Maximum length … 2000 characters";
# action_id "Maximum length … 255 characters", "unique among all other action_ids in the
# containing block" (/reference/block-kit/block-elements/button-element).
SLACK_BUTTON_TEXT = 75
SLACK_BUTTON_VALUE = 2000
SLACK_ACTION_ID = 255
# Static select: "Maximum number of options is 100"; placeholder "Maximum length … 150 characters"
# (/reference/block-kit/block-elements/select-menu-element); option object: text "Maximum
# length … 75 characters", value "Maximum length … 150 characters"
# (/reference/block-kit/composition-objects/option-object).
SLACK_SELECT_OPTIONS = 100
SLACK_SELECT_PLACEHOLDER = 150
SLACK_OPTION_TEXT = 75
SLACK_OPTION_VALUE = 150

# -- WhatsApp Cloud API (https://developers.facebook.com/docs/whatsapp/cloud-api) ----------------
# Text message body: "Maximum 4096 characters" (/reference/messages#text-object).
WHATSAPP_TEXT = 4096
# Interactive body text: "Maximum 1024 characters" (/reference/messages#interactive-object).
WHATSAPP_INTERACTIVE_BODY = 1024
# Reply buttons: "You can have up to 3 buttons"; button title "Maximum 20 characters", id "Maximum
# 256 characters"; "You cannot have leading or trailing spaces"; titles and ids must be unique
# within the message (/messages/interactive-reply-buttons-messages; error 131009 otherwise).
WHATSAPP_MAX_BUTTONS = 3
WHATSAPP_BUTTON_TITLE = 20
WHATSAPP_BUTTON_ID = 256
# List messages: action.button "Maximum 20 characters"; "up to 10 sections" and "10 rows total
# across all sections"; section title "Maximum 24 characters" (required with more than one
# section); row title "Maximum 24 characters", description "Maximum 72 characters", id "Maximum
# 200 characters", row ids unique (/messages/interactive-list-messages).
WHATSAPP_LIST_BUTTON = 20
WHATSAPP_MAX_SECTIONS = 10
WHATSAPP_MAX_ROWS = 10
WHATSAPP_SECTION_TITLE = 24
WHATSAPP_ROW_TITLE = 24
WHATSAPP_ROW_DESCRIPTION = 72
WHATSAPP_ROW_ID = 200

# -- Twilio Messaging (https://www.twilio.com/docs/messaging) ------------------------------------
# Message resource `Body`: "The text content of the outgoing message. Can be up to 1,600
# characters in length" (/api/message-resource#create-a-message-resource); Twilio counts them
# as UTF-16 units (an emoji is two).
TWILIO_BODY_UTF16 = 1600
# Our own ceiling for one SMS, not Twilio's: at most 10 concatenated segments (1530 GSM-7
# septets, 670 UCS-2 units), past which carriers are known to drop or split messages
# (/guides/what-the-heck-is-a-segment recommends keeping messages short for that reason).
SMS_MAX_SEGMENTS = 10


def _too_long(what: str, value: Any, limit: int, *, length: Any = utf16_len) -> list[str]:
    if not isinstance(value, str):
        return [f"{what} is not a string"]
    if not value.strip():
        return [f"{what} is empty"]
    size = length(value)
    return [f"{what} is {size} long, over {limit}"] if size > limit else []


def _duplicates(what: str, values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    problems = []
    for value in values:
        key = title_key(value)
        if key in seen:
            problems.append(f"{what} {value!r} is not unique")
        seen.add(key)
    return problems


def telegram_violations(payload: dict[str, Any]) -> list[str]:
    """Broken rules of a `sendMessage` payload."""
    problems = _too_long("text", payload.get("text"), TELEGRAM_TEXT_UTF16)
    markup = payload.get("reply_markup")
    if markup is None:
        return problems
    buttons = [b for row in markup.get("inline_keyboard", []) for b in row]
    if not buttons:
        problems.append("an inline keyboard without buttons")
    if len(buttons) > TELEGRAM_MAX_BUTTONS:
        problems.append(f"{len(buttons)} buttons, over {TELEGRAM_MAX_BUTTONS}")
    for button in buttons:
        problems += _too_long("button text", button.get("text"), 10**6)
        data = button.get("callback_data")
        if not isinstance(data, str) or not 1 <= len(data.encode()) <= TELEGRAM_CALLBACK_DATA_BYTES:
            problems.append(f"callback_data {data!r} is not 1-64 bytes")
    problems += _duplicates("callback_data", [str(b.get("callback_data")) for b in buttons])
    return problems


def slack_violations(payload: dict[str, Any]) -> list[str]:
    """Broken rules of a `chat.postMessage` payload (the blocks we send: section, actions with
    buttons or a static select, and whatever blocks a tool's view adds, checked only for count)."""
    problems = _too_long("text", payload.get("text"), SLACK_MAX_TEXT)
    blocks = payload.get("blocks") or []
    if len(blocks) > SLACK_MAX_BLOCKS:
        problems.append(f"{len(blocks)} blocks, over {SLACK_MAX_BLOCKS}")
    action_ids: list[str] = []
    for block in blocks:
        if block.get("type") == "section":
            problems += _too_long("section text", block["text"].get("text"), SLACK_SECTION_TEXT)
        if block.get("type") != "actions":
            continue
        elements = block.get("elements", [])
        if not 1 <= len(elements) <= SLACK_ACTIONS_ELEMENTS:
            problems.append(f"an actions block with {len(elements)} elements")
        for element in elements:
            action_ids.append(str(element.get("action_id")))
            problems += _too_long("action_id", element.get("action_id"), SLACK_ACTION_ID)
            problems += _slack_element(element)
    problems += _duplicates("action_id", action_ids)
    return problems


def _slack_element(element: dict[str, Any]) -> list[str]:
    if element.get("type") == "button":
        problems = _too_long("button text", element["text"].get("text"), SLACK_BUTTON_TEXT)
        return problems + _too_long("button value", element.get("value"), SLACK_BUTTON_VALUE)
    if element.get("type") == "static_select":
        options = element.get("options", [])
        problems = _too_long(
            "placeholder", element["placeholder"].get("text"), SLACK_SELECT_PLACEHOLDER
        )
        if not 1 <= len(options) <= SLACK_SELECT_OPTIONS:
            problems.append(f"a select menu with {len(options)} options")
        for option in options:
            problems += _too_long("option text", option["text"].get("text"), SLACK_OPTION_TEXT)
            problems += _too_long("option value", option.get("value"), SLACK_OPTION_VALUE)
        return problems + _duplicates("option value", [str(o.get("value")) for o in options])
    return [f"unexpected element type {element.get('type')!r}"]


def whatsapp_violations(payload: dict[str, Any]) -> list[str]:
    """Broken rules of a Cloud API `/messages` payload (text, reply buttons or list)."""
    if payload.get("type") == "text":
        return _too_long("text body", payload.get("text", {}).get("body"), WHATSAPP_TEXT)
    if payload.get("type") != "interactive":
        return [f"unexpected message type {payload.get('type')!r}"]
    interactive = payload["interactive"]
    body = interactive.get("body", {}).get("text")
    problems = _too_long("interactive body", body, WHATSAPP_INTERACTIVE_BODY)
    action = interactive.get("action", {})
    if interactive.get("type") == "button":
        buttons = [b.get("reply", {}) for b in action.get("buttons", [])]
        if not 1 <= len(buttons) <= WHATSAPP_MAX_BUTTONS:
            problems.append(f"{len(buttons)} reply buttons")
        for button in buttons:
            problems += _trimmed_and_short(
                "button title", button.get("title"), WHATSAPP_BUTTON_TITLE
            )
            problems += _trimmed_and_short("button id", button.get("id"), WHATSAPP_BUTTON_ID)
        problems += _duplicates("button title", [str(b.get("title")) for b in buttons])
        return problems + _duplicates("button id", [str(b.get("id")) for b in buttons])
    if interactive.get("type") == "list":
        problems += _too_long("list button", action.get("button"), WHATSAPP_LIST_BUTTON)
        sections = action.get("sections", [])
        if not 1 <= len(sections) <= WHATSAPP_MAX_SECTIONS:
            problems.append(f"{len(sections)} list sections")
        rows = [row for section in sections for row in section.get("rows", [])]
        if not 1 <= len(rows) <= WHATSAPP_MAX_ROWS:
            problems.append(f"{len(rows)} list rows")
        for section in sections:
            if len(sections) > 1 or "title" in section:
                problems += _too_long("section title", section.get("title"), WHATSAPP_SECTION_TITLE)
        for row in rows:
            problems += _trimmed_and_short("row title", row.get("title"), WHATSAPP_ROW_TITLE)
            problems += _trimmed_and_short("row id", row.get("id"), WHATSAPP_ROW_ID)
            if "description" in row:
                problems += _too_long(
                    "row description", row["description"], WHATSAPP_ROW_DESCRIPTION
                )
        problems += _duplicates("row title", [str(r.get("title")) for r in rows])
        return problems + _duplicates("row id", [str(r.get("id")) for r in rows])
    return [*problems, f"unexpected interactive type {interactive.get('type')!r}"]


def _trimmed_and_short(what: str, value: Any, limit: int) -> list[str]:
    problems = _too_long(what, value, limit)
    if isinstance(value, str) and value != value.strip():
        problems.append(f"{what} {value!r} has leading or trailing spaces")
    return problems


def twilio_violations(form: dict[str, str], *, sms: bool) -> list[str]:
    """Broken rules of a Messages API form; `sms` adds our segment ceiling (not for WhatsApp)."""
    body = form.get("Body")
    problems = _too_long("Body", body, TWILIO_BODY_UTF16)
    if sms and isinstance(body, str) and (cost := sms_cost(body)).segments > SMS_MAX_SEGMENTS:
        problems.append(
            f"Body is {cost.segments} {cost.encoding} segments, over {SMS_MAX_SEGMENTS}"
        )
    return problems
