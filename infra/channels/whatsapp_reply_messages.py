"""The WhatsApp Cloud API messages a reply is sent as: text parts, then the options in the first
form that shows every label in full (`choice_form`): reply buttons, a list whose rows carry the
full labels, or numbered text. And the plain form of an interactive message (its text with the
options numbered), the fallback when Meta refuses it. Limits: `infra.channels.platform_limits`.

A label is never cut until its meaning is lost: "Transfer money to my savings account" and
"Transfer money to my mother" do not fit a button's 20 characters, so they are offered as list
rows, each with a short distinct title (`infra.channels.titles`) and the full label as its
description (the customer's pick comes back with that description: `whatsapp_notifications`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from infra.channels.base import OutboundReply, ReplyOption
from infra.channels.options import compact_choice_id, numbered_options
from infra.channels.platform_limits import (
    WHATSAPP_BUTTON_ID,
    WHATSAPP_BUTTON_TITLE,
    WHATSAPP_INTERACTIVE_BODY,
    WHATSAPP_LIST_BUTTON,
    WHATSAPP_MAX_BUTTONS,
    WHATSAPP_MAX_ROWS,
    WHATSAPP_ROW_DESCRIPTION,
    WHATSAPP_ROW_ID,
    WHATSAPP_ROW_TITLE,
    WHATSAPP_SECTION_TITLE,
    WHATSAPP_TEXT,
)
from infra.channels.text import split_text, utf16_len
from infra.channels.titles import short_titles, shorten

MAX_TEXT_CHARS = WHATSAPP_TEXT
MAX_INTERACTIVE_BODY_CHARS = WHATSAPP_INTERACTIVE_BODY
MAX_BUTTONS = WHATSAPP_MAX_BUTTONS
MAX_LIST_ROWS = WHATSAPP_MAX_ROWS
MAX_BUTTON_TITLE = WHATSAPP_BUTTON_TITLE
MAX_BUTTON_ID = WHATSAPP_BUTTON_ID
MAX_ROW_TITLE = WHATSAPP_ROW_TITLE
MAX_ROW_DESCRIPTION = WHATSAPP_ROW_DESCRIPTION
MAX_ROW_ID = WHATSAPP_ROW_ID
MAX_LIST_BUTTON = WHATSAPP_LIST_BUTTON
MAX_SECTION_TITLE = WHATSAPP_SECTION_TITLE

ChoiceForm = Literal["buttons", "list", "numbered"]


def choice_form(options: Sequence[ReplyOption]) -> ChoiceForm:
    """How `options` are offered, the first form that shows every label in full: reply buttons
    when there are at most 3 and each label fits a button title (20); else a list when there are
    at most 10 and each label fits a row's description (72: the row's title is a short form of
    it); else numbered text, which has no length limit per label."""
    sizes = [utf16_len(flat_label(option.label)) for option in options]
    if len(options) <= MAX_BUTTONS and all(size <= MAX_BUTTON_TITLE for size in sizes):
        return "buttons"
    if len(options) <= MAX_LIST_ROWS and all(size <= MAX_ROW_DESCRIPTION for size in sizes):
        return "list"
    return "numbered"


def flat_label(label: str) -> str:
    """A label as a title shows it: runs of whitespace (line breaks too) as one space."""
    return " ".join(label.split())


def list_labels(reply: OutboundReply) -> tuple[str, str]:
    """A list message's button and section title, in the reply's language."""
    return reply.line("choose_button"), reply.line("options_title")


def text_body(text: str) -> dict[str, Any]:
    """A plain text message (link previews off: an agent's URL is not an invitation)."""
    return {"type": "text", "text": {"body": text, "preview_url": False}}


def bodies(
    text: str, options: list[ReplyOption], *, labels: tuple[str, str] = ("Choose", "Options")
) -> list[dict[str, Any]]:
    """Message bodies to send in order: text parts, the last one interactive when there are
    options (its body limited to 1024 characters, so a long text goes ahead as plain parts).
    Lengths in UTF-16 units (never fewer than Meta's characters); code blocks stay closed.
    `labels`: a list's button and section title (`list_labels`)."""
    parts = split_text(text, MAX_TEXT_CHARS, length=utf16_len, fences=True)
    if not options:
        return [text_body(part) for part in parts]
    tail = split_text(parts.pop(), MAX_INTERACTIVE_BODY_CHARS, length=utf16_len, fences=True)
    parts.extend(tail[:-1])
    messages: list[dict[str, Any]] = [text_body(part) for part in parts]
    body = interactive(tail[-1], options, labels=labels)
    messages.append({"type": "interactive", "interactive": body})
    return messages


def plain_bodies(message: dict[str, Any], options: list[ReplyOption]) -> list[dict[str, Any]]:
    """The plain form of an interactive message: its body text with the options numbered."""
    text = f"{message['interactive']['body']['text']}\n\n{numbered_options(options)}"
    return [text_body(part) for part in split_text(text, MAX_TEXT_CHARS, length=utf16_len)]


def interactive(
    body: str, options: list[ReplyOption], *, labels: tuple[str, str] = ("Choose", "Options")
) -> dict[str, Any]:
    """Reply buttons when every label fits one (`choice_form`), else a list whose button and
    section title are `labels` (the caller sends options no list can hold as numbered text)."""
    if choice_form(options) == "buttons":
        titles = short_titles([o.label for o in options], MAX_BUTTON_TITLE, length=utf16_len)
        buttons = [
            {
                "type": "reply",
                "reply": {"id": compact_choice_id(option.id, MAX_BUTTON_ID), "title": title},
            }
            for option, title in zip(options, titles, strict=True)
        ]
        return {"type": "button", "body": {"text": body}, "action": {"buttons": buttons}}
    titles = short_titles([o.label for o in options], MAX_ROW_TITLE, length=utf16_len)
    rows = []
    for option, title in zip(options, titles, strict=True):
        row = {"id": compact_choice_id(option.id, MAX_ROW_ID), "title": title}
        label = flat_label(option.label)
        if title != label:  # the full label shows below its short title
            row["description"] = shorten(label, MAX_ROW_DESCRIPTION, length=utf16_len)
        rows.append(row)
    return {
        "type": "list",
        "body": {"text": body},
        "action": {
            "button": shorten(labels[0], MAX_LIST_BUTTON, length=utf16_len),
            "sections": [
                {"title": shorten(labels[1], MAX_SECTION_TITLE, length=utf16_len), "rows": rows}
            ],
        },
    }
