"""Language tags (BCP 47) as an agent declares them, and the languages Waypoint ships lines for.

An agent serves `config.languages` (default `["en"]`; the first is its default). A customer's
message is detected as a base language ("es", "zh-Hans", "pt"); it is in a served language when
one of the agent's tags has that base language (and script, for Chinese): "pt" is served by
"pt-BR", "zh-Hant" only by "zh-Hant".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# The languages whose message catalogs ship with Waypoint (engine/language/catalogs/).
SHIPPED = ("en", "zh-Hans", "zh-Hant", "es", "pt-BR", "fr", "de", "ja")

# Names a prompt says a language by (English name, then the language's own).
NAMES = {
    "en": "English",
    "zh-Hans": "Simplified Chinese (简体中文)",
    "zh-Hant": "Traditional Chinese (繁體中文)",
    "es": "Spanish (español)",
    "pt-BR": "Brazilian Portuguese (português do Brasil)",
    "pt": "Portuguese (português)",
    "fr": "French (français)",
    "de": "German (Deutsch)",
    "ja": "Japanese (日本語)",
    "it": "Italian (italiano)",
    "nl": "Dutch (Nederlands)",
    "ko": "Korean (한국어)",
}

_TAG = re.compile(r"^[a-zA-Z]{2,3}(-[a-zA-Z]{4})?(-([a-zA-Z]{2}|\d{3}))?$")


def normalize_tag(tag: str) -> str:
    """A tag in its canonical case: "zh-hans" → "zh-Hans", "pt-br" → "pt-BR". Raises ValueError
    for anything that is not a language tag."""
    text = tag.strip().replace("_", "-")
    if not _TAG.fullmatch(text):
        raise ValueError(f"{tag!r} is not a language tag (e.g. en, es, pt-BR, zh-Hans)")
    parts = text.split("-")
    out = [parts[0].lower()]
    for part in parts[1:]:
        out.append(part.title() if len(part) == 4 else part.upper())
    return "-".join(out)


def base(tag: str) -> str:
    """The language of a tag, with the script for Chinese: "pt-BR" → "pt", "zh-Hant" → "zh-Hant"."""
    parts = tag.split("-")
    if parts[0] == "zh":
        return "zh-Hant" if "Hant" in parts else "zh-Hans"
    return parts[0]


def served_tag(detected: str | None, served: Sequence[str]) -> str | None:
    """The agent's tag for a detected language, or None when the agent does not serve it."""
    if detected is None:
        return None
    for tag in served:
        if tag == detected or base(tag) == base(detected):
            return tag
    return None


def language_name(tag: str) -> str:
    """How a prompt names the language: "Spanish (español)"; an unknown tag as itself."""
    return NAMES.get(tag) or NAMES.get(base(tag)) or tag
