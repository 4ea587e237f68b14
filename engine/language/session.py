"""The session's language: the customer's latest message in a language the agent serves, else
what it was, else the agent's default (`config.languages[0]`)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.language.tags import base, served_tag

_CHINESE = ("zh-Hans", "zh-Hant")


def session_language(
    current: str | None, detected: Sequence[str | None], served: Sequence[str]
) -> str:
    """The language after a turn whose messages were detected as `detected` (in order)."""
    language = current if current in served else None
    for found in detected:
        tag = _served(found, served, language)
        if tag is not None:
            language = tag
    return language or (served[0] if served else "en")


def _served(detected: str | None, served: Sequence[str], current: str | None) -> str | None:
    """The agent's tag for a detected language. Chinese in characters both scripts share ("zh",
    "好的") keeps a Chinese session's script, else takes the first Chinese the agent serves."""
    if detected != "zh":
        return served_tag(detected, served)
    if current is not None and base(current) in _CHINESE:
        return current
    return next((tag for tag in served if base(tag) in _CHINESE), None)
