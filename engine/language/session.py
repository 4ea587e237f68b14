"""The session's language: the customer's latest message in a language the agent serves, else
what it was, else the agent's default (`config.languages[0]`)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.language.tags import served_tag


def session_language(
    current: str | None, detected: Sequence[str | None], served: Sequence[str]
) -> str:
    """The language after a turn whose messages were detected as `detected` (in order)."""
    language = current if current in served else None
    for found in detected:
        tag = served_tag(found, served)
        if tag is not None:
            language = tag
    return language or (served[0] if served else "en")
