"""Message text on the way in (cleaning) and on the way out (splitting to platform limits)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

# Inbound text limit: at or above every platform's own message limit (Telegram and WhatsApp 4,096,
# Twilio 1,600 for a concatenated SMS, Slack 40,000), so a customer's message is kept whole. The
# generic channel and the management API refuse longer texts, naming the limit; anything longer
# that a platform still sends is cut with a visible note, never silently.
MAX_INBOUND_CHARS = 40_000

# Keep newlines and tabs; drop every other C0/C1 control character (NUL, escape sequences …)
# and the Unicode line/paragraph separators some clients emit.
_DROP: dict[int, str | None] = {c: None for c in range(0x20) if c not in (0x09, 0x0A)}
_DROP.update({c: None for c in range(0x7F, 0xA0)})
_DROP.update({0x2028: "\n", 0x2029: "\n"})


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str, limit: int = MAX_INBOUND_CHARS) -> str:
    """NFC-normalize, drop control characters, strip; past `limit` characters, cut and end with a
    note saying so (the agent and the transcript see that the message was cut)."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n")).translate(_DROP)
    # A lone surrogate (JSON "\ud83d" without its pair) cannot be encoded as UTF-8 anywhere
    # downstream (queue, store): replace it rather than fail the message on every retry.
    text = _LONE_SURROGATE.sub("\ufffd", text)
    text = text.strip()
    if len(text) <= limit:
        return text
    note = f"\n[… cut: the message was over {limit} characters]"
    if len(note) >= limit:
        return text[:limit]
    return text[: limit - len(note)].rstrip() + note


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: how Telegram counts its 4096-character limit."""
    return len(text.encode("utf-16-le")) // 2


def split_text(text: str, limit: int, *, length: Callable[[str], int] = len) -> list[str]:
    """Split `text` into parts of at most `limit` (as measured by `length`), preferring to cut at
    a paragraph break, then a line break, then a space; a hard cut only inside a word longer than
    `limit`. Never returns an empty list: "" → [""]."""
    if limit < 1:
        raise ValueError("limit must be positive")
    parts: list[str] = []
    rest = text
    while length(rest) > limit:
        cut = _longest_prefix(rest, limit, length)
        window = rest[:cut]
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at > 0:
                cut = at
                break
        piece = rest[:cut].rstrip()
        if piece:  # a window of pure whitespace yields nothing worth sending
            parts.append(piece)
        rest = rest[cut:].lstrip()
    if rest or not parts:
        parts.append(rest)
    return parts


def _longest_prefix(text: str, limit: int, length: Callable[[str], int]) -> int:
    """The largest n with length(text[:n]) <= limit (binary search; `length` is monotonic)."""
    low, high = 1, min(len(text), limit)
    if length(text[:high]) <= limit:
        return high
    while low < high:
        mid = (low + high + 1) // 2
        if length(text[:mid]) <= limit:
            low = mid
        else:
            high = mid - 1
    return low


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, ending with "…" when something was cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
