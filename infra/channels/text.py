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


def split_text(
    text: str, limit: int, *, length: Callable[[str], int] = len, fences: bool = False
) -> list[str]:
    """Split `text` into parts of at most `limit` (as measured by `length`), preferring to cut at
    a paragraph break, then a line break, then a space; a hard cut only inside a word longer than
    `limit`, and then never inside a character sequence that draws as one (an emoji with its
    modifiers or joiners, a flag, a letter with its accents). Never returns an empty list:
    "" → [""].

    `fences`: the text is markup where ``` opens and closes a code block (Slack, WhatsApp). A part
    cut inside a block closes it and the next part reopens it, so no part shows raw markup."""
    if limit < 1:
        raise ValueError("limit must be positive")
    if fences and FENCE in text and limit > 2 * len(_FENCE_OPEN) + 1:
        pieces = _split(text, limit - 2 * len(_FENCE_OPEN), length)
        return _balance_fences(pieces)
    return _split(text, limit, length)


FENCE = "```"
_FENCE_OPEN = FENCE + "\n"
_FENCE_CLOSE = "\n" + FENCE


def _balance_fences(pieces: list[str]) -> list[str]:
    """Each piece that ends inside a code block gets it closed; the next one reopens it."""
    balanced: list[str] = []
    inside = False
    for piece in pieces:
        if inside:
            piece = _FENCE_OPEN + piece
        inside = piece.count(FENCE) % 2 == 1
        balanced.append(piece + _FENCE_CLOSE if inside else piece)
    return balanced


def _split(text: str, limit: int, length: Callable[[str], int]) -> list[str]:
    parts: list[str] = []
    rest = text
    while length(rest) > limit:
        cut = max(1, longest_prefix(rest, limit, length))  # at least one: the split advances
        window = rest[:cut]
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at > 0:
                cut = at
                break
        else:
            cut = _cluster_boundary(rest, cut)
        piece = rest[:cut].rstrip()
        if piece:  # a window of pure whitespace yields nothing worth sending
            parts.append(piece)
        rest = rest[cut:].lstrip()
    if rest or not parts:
        parts.append(rest)
    return parts


_ZWJ = "\u200d"


def _joins_previous(char: str) -> bool:
    """Whether `char` draws as part of the character before it: a combining mark, a variation
    selector, an emoji skin-tone modifier or tag, or the joiner itself."""
    code = ord(char)
    return (
        char == _ZWJ
        or unicodedata.combining(char) != 0
        or 0xFE00 <= code <= 0xFE0F
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
        or 0x20D0 <= code <= 0x20FF
    )


def _is_regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _cluster_boundary(text: str, cut: int) -> int:
    """`cut` moved left until it does not split a drawn character (see `_joins_previous`; flags
    are pairs of regional indicators); `cut` itself if the whole window is one such sequence."""
    at = cut
    while 0 < at < len(text) and (_joins_previous(text[at]) or text[at - 1] == _ZWJ):
        at -= 1
    if 0 < at < len(text) and _is_regional_indicator(text[at]):
        run = 0
        while at - run - 1 >= 0 and _is_regional_indicator(text[at - run - 1]):
            run += 1
        at -= run % 2  # an odd run before the cut: its last indicator pairs with text[at]
    return at if at > 0 else cut


def longest_prefix(text: str, limit: int, length: Callable[[str], int]) -> int:
    """The largest n with length(text[:n]) <= limit, 0 when not even one character fits
    (binary search; `length` is monotonic and counts each character as at least 1)."""
    low, high = 0, max(0, min(len(text), limit))
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
