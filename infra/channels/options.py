"""Choices offered to the customer: numbered text for channels without buttons, and ids that fit
the platforms' payload limits.

Channels are stateless, so they cannot remember which options a message offered. Two pure
functions bridge that for the turn worker, which does know (the session's pending interrupt):
`match_numbered_reply` turns an SMS answer like "2." into an option id, and `resolve_choice` maps
a compacted id (see `compact_choice_id`) back to the original.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from infra.channels.base import ReplyOption

_COMPACT_PREFIX = "~"
_NUMBERED = re.compile(r"^\s*#?(\d{1,3})\s*[.)]?\s*$")


def numbered_options(options: Sequence[ReplyOption]) -> str:
    """`1. Billing\\n2. Support`: options as text, for channels without buttons."""
    return "\n".join(f"{n}. {option.label}" for n, option in enumerate(options, start=1))


def match_numbered_reply(text: str, options: Sequence[ReplyOption]) -> str | None:
    """The id of the option a free-text answer picks: its number ("2", "2.", "2)", "#2") or its
    label or id (case- and whitespace-insensitive). None when it picks nothing."""
    numbered = _NUMBERED.match(text)
    if numbered:
        index = int(numbered.group(1)) - 1
        return options[index].id if 0 <= index < len(options) else None
    wanted = " ".join(text.split()).casefold()
    for option in options:
        if wanted in (" ".join(option.label.split()).casefold(), option.id.casefold()):
            return option.id
    return None


def compact_choice_id(option_id: str, max_bytes: int) -> str:
    """`option_id` if it fits in `max_bytes` UTF-8 bytes (Telegram callback_data: 64), else a
    stable digest token `~<hex>` that `resolve_choice` maps back given the offered options."""
    if len(option_id.encode()) <= max_bytes and not option_id.startswith(_COMPACT_PREFIX):
        return option_id
    hex_chars = max(8, min(40, max_bytes - len(_COMPACT_PREFIX)))
    return _COMPACT_PREFIX + hashlib.sha256(option_id.encode()).hexdigest()[:hex_chars]


def resolve_choice(choice: str, options: Sequence[ReplyOption]) -> str | None:
    """The offered option id a received `choice` stands for (itself, or the id a compacted token
    was derived from); None if it matches none of `options` (a stale or forged click)."""
    for option in options:
        if choice == option.id:
            return option.id
    digest = choice[len(_COMPACT_PREFIX) :]
    if choice.startswith(_COMPACT_PREFIX) and len(digest) >= 8:  # a bare "~" must match nothing
        for option in options:
            if hashlib.sha256(option.id.encode()).hexdigest().startswith(digest):
                return option.id
    return None
