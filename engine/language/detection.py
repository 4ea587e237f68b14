"""Which language a customer message is in, read deterministically.

`detect` names the message's language as a base tag ("es", "zh-Hans", "ja") or None when the
message says too little to tell (a number, a name, "ok"): a message in no language leaves the
session's language as it was (`engine.language.session`).
"""

from __future__ import annotations

import unicodedata

_KANA = ("HIRAGANA", "KATAKANA")


def detect(text: str) -> str | None:
    """The language of `text`, or None when it cannot be told."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    kana = sum(1 for c in letters if unicodedata.name(c, "").startswith(_KANA))
    han = sum(1 for c in letters if unicodedata.name(c, "").startswith("CJK UNIFIED"))
    hangul = sum(1 for c in letters if unicodedata.name(c, "").startswith("HANGUL"))
    if kana:
        return "ja"
    if hangul and hangul >= han:
        return "ko"
    if han:
        return "zh-Hans"
    return None
