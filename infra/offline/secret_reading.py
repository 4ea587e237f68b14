"""Secrets typed ahead (`SecretsSaid`) from `engine.matching.secret_reading`'s prompt.

Only a value a cue names counts ("my password is monkey", "PIN: 4471"), read by
`values.extract_values` as it reads the values named with a request: a bare word is no password
here, and a word that says something about the secret ("my password is not working") is none
either. The engine keeps only what the customer's words hold; this reader proposes.
"""

from __future__ import annotations

import re

from engine.matching.collected_values import CollectedItem
from engine.matching.secret_reading import SECRET_FIELDS_HEADER, SecretsSaid
from infra.offline.language import word_set
from infra.offline.prompt import CONVERSATION_HEADER, parse_shared_context, section
from infra.offline.slots import INT, NUMBER, TEXT, Slot
from infra.offline.values import extract_values

PARSER = "secret reading parser (infra/offline/secret_reading.py)"
_FIELD = re.compile(r"^- (?P<name>[^\s(]+) \((?P<type>\w+)\): ")
_KINDS = {"int": INT, "integer": INT, "decimal": NUMBER, "number": NUMBER, "money": NUMBER}
# What a customer says about a secret rather than the secret itself.
_ABOUT_IT = word_set(
    """not no wrong incorrect invalid expired forgotten forgot lost blocked locked reset changed
    new old same different working broken correct right too very still also"""
)


def read_secrets(prompt: str) -> SecretsSaid:
    """The values the latest customer messages name for the listed secret fields."""
    context = parse_shared_context(prompt, parser=PARSER)
    # The fields come before the conversation (the prompt's stable prefix): a header the
    # customer typed is in the conversation, after them, and is never read as one.
    head = prompt.split(CONVERSATION_HEADER, 1)[0]
    block = section(head, SECRET_FIELDS_HEADER, parser=PARSER)
    slots = []
    for line in block.splitlines():
        m = _FIELD.match(line)
        if m:
            slots.append(Slot(m["name"], _KINDS.get(m["type"], TEXT)))
    values: list[CollectedItem] = []
    for text in context.latest_customer_messages:
        for name, value in extract_values(slots, text, named_only=True).items():
            if value.casefold() not in _ABOUT_IT:
                values.append(CollectedItem(name=name, value=value))
    return SecretsSaid(values=values)
