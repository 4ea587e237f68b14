"""Slack message text and Block Kit for a reply: text escaped and split into section-sized
parts, and the options of the last part as buttons (up to 25) or a select menu (up to 100), with
short labels that stay distinct (`infra.channels.titles`). Limits: `infra.channels.platform_limits`.
"""

from __future__ import annotations

from typing import Any

from infra.channels.base import ReplyOption
from infra.channels.options import compact_choice_id
from infra.channels.platform_limits import (
    SLACK_ACTIONS_ELEMENTS,
    SLACK_BUTTON_TEXT,
    SLACK_BUTTON_VALUE,
    SLACK_MAX_BLOCKS,
    SLACK_OPTION_TEXT,
    SLACK_OPTION_VALUE,
    SLACK_SECTION_TEXT,
)
from infra.channels.text import split_text, utf16_len
from infra.channels.titles import short_titles

MAX_SECTION_CHARS = SLACK_SECTION_TEXT  # plain `text` parts use it too
MAX_BUTTONS_PER_BLOCK = SLACK_ACTIONS_ELEMENTS
MAX_BUTTON_LABEL = SLACK_BUTTON_TEXT
MAX_BUTTON_VALUE = SLACK_BUTTON_VALUE


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


def blocks_for(
    part: str,
    options: list[ReplyOption],
    view: dict[str, Any] | None,
    *,
    placeholder: str = "Choose an option",
) -> list[dict[str, Any]]:
    """Block Kit for the last part: the text in a section, then the options (up to 25 buttons in
    one actions block, else a select menu), then any `view["blocks"]` that fit under Slack's 50
    blocks. Empty when there is nothing but text."""
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
        room = SLACK_MAX_BLOCKS - len(blocks)
        blocks.extend([block for block in extra if isinstance(block, dict)][:room])
    return blocks
