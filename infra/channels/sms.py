"""SMS length accounting: which encoding a text goes out in, and how many segments it costs.

A carrier sends an SMS in GSM-7 (7-bit septets) when every character is in the GSM 03.38
alphabet, else in UCS-2 (UTF-16 code units, so an emoji costs two). One segment holds 160 septets
or 70 units; a longer text is concatenated from segments of 153 septets or 67 units (the rest of
each carries the concatenation header), and an escape pair or a surrogate pair is never split
between two segments. Sources: 3GPP TS 23.038 §6.2.1 (alphabet and extension table), TS 23.040
§9.2.3.24.1 (concatenation header); Twilio, "What is the SMS character limit?"
(https://www.twilio.com/docs/glossary/what-sms-character-limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.channels.text import utf16_len

# GSM 03.38 default alphabet (one septet each) and its extension table (escape + one septet).
GSM7_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENSION = frozenset("\f^{}\\[~]|€")
GSM7_SINGLE, GSM7_CONCATENATED = 160, 153
UCS2_SINGLE, UCS2_CONCATENATED = 70, 67

Encoding = Literal["GSM-7", "UCS-2"]


@dataclass(frozen=True)
class SmsCost:
    """How a text goes out: its encoding, its length in that encoding's units, its segments."""

    encoding: Encoding
    units: int
    segments: int


def is_gsm7(text: str) -> bool:
    """Whether every character of `text` is in the GSM-7 alphabet or its extension table."""
    return all(char in GSM7_BASIC or char in GSM7_EXTENSION for char in text)


def sms_cost(text: str) -> SmsCost:
    """The encoding, length in units and number of segments of `text` sent as one SMS."""
    if is_gsm7(text):
        sizes = [2 if char in GSM7_EXTENSION else 1 for char in text]
        return SmsCost("GSM-7", sum(sizes), _segments(sizes, GSM7_SINGLE, GSM7_CONCATENATED))
    sizes = [utf16_len(char) for char in text]
    return SmsCost("UCS-2", sum(sizes), _segments(sizes, UCS2_SINGLE, UCS2_CONCATENATED))


def _segments(sizes: list[int], single: int, concatenated: int) -> int:
    """Segments needed for characters of these sizes: one if they fit `single`, else packed
    greedily into segments of `concatenated` without splitting a character."""
    total = sum(sizes)
    if total <= single:
        return 1
    segments, used = 1, 0
    for size in sizes:
        if used + size > concatenated:
            segments, used = segments + 1, 0
        used += size
    return segments
