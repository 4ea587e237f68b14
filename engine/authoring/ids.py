"""Deterministic ids for authored entities.

An id that is not given explicitly is derived from content: a readable slug plus a short hash, so
the same definition always compiles to the same ids (and therefore the same snapshot version), in
Python and in YAML alike. Production agents should still pin ids of journeys and of guidelines
that other entities refer to: a derived id changes when the text it is derived from changes.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection

ROOT_STATE_ID = "root"
END_STATE_NAME = "END"  # how the document form names the end of a journey; reserved as a state id

_SLUG_MAX_WORDS = 6
_SLUG_MAX_CHARS = 40
_DIGEST_CHARS = 6


def slugify(text: str) -> str:
    """`"The customer wants to transfer money"` → `"the-customer-wants-to-transfer-money"`.

    Non-ASCII text (a Chinese condition, say) slugs to `""`; callers fall back to a kind prefix.
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())[:_SLUG_MAX_WORDS]
    return "-".join(words)[:_SLUG_MAX_CHARS].strip("-")


def content_digest(*parts: str | None) -> str:
    """A short hash of `parts`; `None` and `""` hash differently (an observation is not an empty
    action)."""
    blob = "\x1f".join("\x00" if p is None else p for p in parts).encode()
    return hashlib.sha256(blob).hexdigest()[:_DIGEST_CHARS]


def _derived(fallback: str, text: str, *parts: str | None) -> str:
    return f"{slugify(text) or fallback}-{content_digest(text, *parts)}"


def default_guideline_id(condition: str, action: str | None, journey_id: str | None = None) -> str:
    """Derived from the condition, the action and the journey the guideline is scoped to: changing
    the action gives a new guideline, which a session has not applied yet — as it should."""
    return _derived("guideline", condition, action, journey_id)


def default_journey_id(title: str) -> str:
    """Derived from the title only, so editing a journey's steps keeps session paths pointing at it."""
    return _derived("journey", title)


def default_canned_response_id(template: str) -> str:
    """Derived from the template text."""
    return _derived("response", template)


def default_state_id(taken: Collection[str]) -> str:
    """`s1`, `s2`, … in creation order, skipping ids already taken explicitly."""
    n = max(len(taken), 1)  # `taken` holds the root, so the first state is s1
    while f"s{n}" in taken:
        n += 1
    return f"s{n}"


def default_transition_id(source: str, target: str | None, taken: Collection[str]) -> str:
    """`"ask->check"`, `"decide->END"`; a second transition between the same states gets `#2`."""
    base = f"{source}->{END_STATE_NAME if target is None else target}"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}#{n}"
    return candidate
