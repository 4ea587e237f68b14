"""Slack message text and Block Kit for a reply: text escaped and split into section-sized
parts, and the options of the last part as buttons (up to 25) or a select menu (up to 100), with
short labels that stay distinct (`infra.channels.titles`). Limits: `infra.channels.platform_limits`.

A tool's view (`view["blocks"]`) follows the options. Slack takes at most 50 blocks per message,
so a longer view goes on in further messages, in order (`block_messages`); one that would need
more than `MAX_VIEW_MESSAGES` messages is cut there, and its last block says how many items were
left out. Nothing is dropped without saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infra.channels.base import ReplyOption
from infra.channels.options import compact_choice_id
from infra.channels.platform_limits import (
    SLACK_ACTIONS_ELEMENTS,
    SLACK_BUTTON_TEXT,
    SLACK_BUTTON_VALUE,
    SLACK_MAX_BLOCKS,
    SLACK_MAX_TEXT,
    SLACK_OPTION_TEXT,
    SLACK_OPTION_VALUE,
    SLACK_SECTION_TEXT,
)
from infra.channels.text import split_text, utf16_len
from infra.channels.titles import short_titles, shorten

MAX_SECTION_CHARS = SLACK_SECTION_TEXT  # plain `text` parts use it too
MAX_BUTTONS_PER_BLOCK = SLACK_ACTIONS_ELEMENTS
MAX_BUTTON_LABEL = SLACK_BUTTON_TEXT
MAX_BUTTON_VALUE = SLACK_BUTTON_VALUE
# A reply with a tool's view takes at most this many messages (250 blocks); past that the view is
# cut, saying how much was left out, rather than filling the conversation.
MAX_VIEW_MESSAGES = 5


def escape(text: str) -> str:
    """Slack's three control characters escaped, so agent text is shown as written: an LLM that
    writes `<!channel>` or `<@U123>` must not ping anyone."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def parts(text: str) -> list[str]:
    """`text` escaped and split into section-sized parts; code blocks stay closed."""
    return [
        escape(part)
        for part in split_text(
            text, MAX_SECTION_CHARS, length=lambda piece: utf16_len(escape(piece)), fences=True
        )
    ]


def block_messages(
    part: str,
    options: list[ReplyOption],
    view: dict[str, Any] | None,
    *,
    placeholder: str = "Choose an option",
    left_out: Callable[[int], str] = lambda count: f"{count} more items are not shown here.",
) -> list[list[dict[str, Any]]]:
    """The blocks of each message for the last part, in order: the text in a section, then the
    options (`blocks_for`), then the view's blocks, at most 50 per message. Past
    `MAX_VIEW_MESSAGES` messages the view is cut, its last block a context line saying how many
    of its blocks were left out (`left_out(count)`). Empty when there is nothing but text."""
    blocks = blocks_for(part, options, view, placeholder=placeholder)
    if not blocks:
        return []
    capacity = SLACK_MAX_BLOCKS * MAX_VIEW_MESSAGES
    if len(blocks) > capacity:
        kept = blocks[: capacity - 1]
        note = {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": left_out(len(blocks) - len(kept))}],
        }
        blocks = [*kept, note]
    return [blocks[at : at + SLACK_MAX_BLOCKS] for at in range(0, len(blocks), SLACK_MAX_BLOCKS)]


def fallback_text(blocks: list[dict[str, Any]]) -> str:
    """The words of `blocks` (sections, their fields, headers, context lines), one per line:
    a message's `text`, which Slack shows in notifications and to screen readers."""
    words: list[str] = []
    for block in blocks:
        texts = [block.get("text")]
        for key in ("fields", "elements"):  # a section's fields, a context block's lines
            more = block.get(key)
            texts += more if isinstance(more, list) else []
        for item in texts:
            if (
                isinstance(item, dict)
                and isinstance(item.get("text"), str)
                and item["text"].strip()
            ):
                words.append(item["text"].strip())
    return shorten("\n".join(words), SLACK_MAX_TEXT, length=utf16_len)


def blocks_for(
    part: str,
    options: list[ReplyOption],
    view: dict[str, Any] | None,
    *,
    placeholder: str = "Choose an option",
) -> list[dict[str, Any]]:
    """Block Kit for the last part: the text in a section, then the options (up to 25 buttons in
    one actions block, else a select menu), then every block of `view["blocks"]`, however many
    (`block_messages` splits them into messages). Empty when there is nothing but text."""
    extra = view.get("blocks") if view else None
    if not options and not isinstance(extra, list):
        return []
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": part}}]
    if 0 < len(options) <= MAX_BUTTONS_PER_BLOCK:
        titles = short_titles([o.label for o in options], MAX_BUTTON_LABEL, length=utf16_len)
        buttons = [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": title},
                "action_id": f"waypoint_choice_{index}",
                "value": compact_choice_id(option.id, MAX_BUTTON_VALUE),
            }
            for index, (option, title) in enumerate(zip(options, titles, strict=True))
        ]
        blocks.append({"type": "actions", "elements": buttons})
    elif options:
        titles = short_titles([o.label for o in options], SLACK_OPTION_TEXT, length=utf16_len)
        menu = {
            "type": "static_select",
            "action_id": "waypoint_choice",
            "placeholder": {"type": "plain_text", "text": placeholder},
            "options": [
                {
                    "text": {"type": "plain_text", "text": title},
                    "value": compact_choice_id(option.id, SLACK_OPTION_VALUE),
                }
                for option, title in zip(options, titles, strict=True)
            ],
        }
        blocks.append({"type": "actions", "elements": [menu]})
    if isinstance(extra, list):
        blocks.extend(block for block in extra if isinstance(block, dict))
    return blocks
