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


def in_session_words(
    current: str | None, texts: Sequence[str], detected: Sequence[str | None], served: Sequence[str]
) -> list[str | None]:
    """Each message's language, where a short answer in the session's own words is counted as
    the session's language whatever the detector says: a detector reads one word unreliably
    ("quinientos" looks German to it, "ja, genau" English), and kanji alone are Japanese too.
    A message keeps the session's language when the detector would move it elsewhere and the
    message is, in the session's language, a yes or a no, or a number in words (with its
    currency), or — in a Japanese session — Han characters only."""
    language = current if current in served else None
    settled: list[str | None] = []
    for text, found in zip(texts, detected, strict=True):
        moves = _served(found, served, language) not in (None, language)
        if language is not None and moves and _speaks(text, language, found):
            found = language
        tag = _served(found, served, language)
        language = tag if tag is not None else language
        settled.append(found)
    return settled


def _speaks(text: str, language: str, found: str | None) -> bool:
    from engine.values.yes_no import answers_in

    if base(language) == "ja" and found in ("zh", *_CHINESE):
        return True  # no kana (they would be read as Japanese): kanji only
    return answers_in(text, language) or _number_in_words(text, language)


def _number_in_words(text: str, language: str) -> bool:
    """Whether every word of `text` is part of a number written in `language`'s words or names
    a currency ("quinientos", "quinientos dólares", "cinq cents")."""
    from engine.values.locale import CURRENCY_WORDS, number_words

    spans = [(start, end) for start, end, _, strong in number_words(text, language) if strong]
    if not spans:
        return False
    rest = list(text)
    for start, end in spans:
        rest[start:end] = " " * (end - start)
    left = "".join(rest).split()
    return all(word.strip(".,!?¡¿").casefold() in CURRENCY_WORDS for word in left)


def _served(detected: str | None, served: Sequence[str], current: str | None) -> str | None:
    """The agent's tag for a detected language. Chinese in characters both scripts share ("zh",
    "好的") keeps a Chinese session's script, else takes the first Chinese the agent serves."""
    if detected != "zh":
        return served_tag(detected, served)
    if current is not None and base(current) in _CHINESE:
        return current
    return next((tag for tag in served if base(tag) in _CHINESE), None)
