"""Which of several things a customer's words pick: an enum's choices — named, or called by the
agent's other words for them (glossary synonyms, aliases its description states) — and the
options the agent's last message offered, picked by position ("the second one"). Also the salient
part of a short answer ("it's seldo, thanks" → "seldo"), what such a pick is read from.

No domain words here: what a choice is also called comes from the agent; only ordinals ("first",
"last") and the filler around a short answer ("sure, it's …, thanks") are everyday English.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from infra.offline.slots import ENUM, Slot

_FILLER_START = re.compile(
    r"^(?:(?:sure|ok|okay|yes|yeah|yep|well|so|um|uh|hi|hello|hey|right|alright|fine)[,!.]?\s+"
    r"|(?:i'?ll (?:have|take)|i'?d like|i want|give me|can i (?:have|get)|let me have|"
    r"(?:i'?ll |let'?s )?go with)(?: the| a| an| some)?\s+"
    r"|(?:deliver|send|ship|bring|post|mail) (?:it|them|that|those) (?:to|at)\s+"
    r"|(?:it'?s|it is|that'?s|that is|this is|the answer is|i'?m|i am|use|call me|try|"
    r"my \w+(?: \w+)? (?:is|was)|the \w+(?: \w+)? (?:is|was)|i (?:think|guess) it'?s)\s+)",
    re.I,
)
# What ends a short answer without being part of it: "…, please", "… thanks!", "…?!". Matched on
# the text read backwards, from its end only: the same pattern anchored with `$` is tried from
# every position of the text, and a long run of commas or marks made that quadratic.
_FILLER_END_BACKWARDS = re.compile(r"[.!]*(?:(?:esaelp|sknaht|uoy knaht|xht)[,\s]+)+|[.!?]+", re.I)


def with_vocabulary(slot: Slot, glossary: Mapping[str, Sequence[str]]) -> Slot:
    """An enum slot with the agent's other words for its choices: the synonyms of a glossary term
    named like a choice ("current account" → checking), and aliases its description gives
    ("AAPL is Apple, MSFT Microsoft"). Nothing here is a word list of ours."""
    if slot.kind != ENUM:
        return slot
    by_name = {c.lower(): c for c in slot.choices}
    aliases = list(slot.aliases)
    for term, synonyms in glossary.items():
        choice = by_name.get(term.lower())
        if choice is not None:
            aliases.extend((synonym, choice) for synonym in synonyms)
    aliases.extend(description_aliases(slot.description, slot.choices))
    return replace(slot, aliases=tuple(dict.fromkeys(aliases)))


def description_aliases(description: str, choices: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs a description states for enum choices: "AAPL is Apple", "MSFT = Microsoft",
    "TSLA Tesla", "Apple (AAPL)" — one pair per comma- or semicolon-separated part."""
    found: list[tuple[str, str]] = []
    for part in re.split(r"[,;]", description):
        part = part.rsplit(":", 1)[-1].strip().rstrip(".")
        for choice in choices:
            c = re.escape(choice)
            after = re.fullmatch(rf"{c}\s+(?:is|=|means|for|-)?\s*(?P<alias>[^()]+)", part, re.I)
            before = re.fullmatch(rf"(?P<alias>[^()]+?)\s*\(\s*{c}\s*\)", part, re.I)
            for m in (after, before):
                if m and m["alias"].strip().lower() != choice.lower():
                    found.append((m["alias"].strip(), choice))
    return found


_ORDINALS = {
    "first": 0, "1st": 0, "former": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2,
    "fourth": 3, "4th": 3, "fifth": 4, "5th": 4, "last": -1, "latter": -1, "final": -1,
}  # fmt: skip
_ORDINAL_ANSWER = re.compile(
    r"^(?:(?:let'?s go with|go with|i'?ll take|i'?ll have|i want|i'?d like)\s+)?"
    r"(?:the |that |option |number |no\.? ?)?(?P<which>\w+)(?: one| option)?$",
    re.I,
)


def ordinal_pick(answer: str, options: Sequence[str]) -> str | None:
    """The option an answer like "the second", "the last one", "option 2" refers to."""
    m = _ORDINAL_ANSWER.match(direct_answer(answer).lower())
    if m is None or not options:
        return None
    which = m["which"]
    index = _ORDINALS.get(which)
    # isdecimal, not isdigit: "¹" is a digit that int() refuses
    if index is None and which.isdecimal() and 1 <= int(which) <= len(options):
        index = int(which) - 1
    if index is None or index >= len(options):
        return None
    return options[index]


def offered_order(choices: Sequence[str], offered: str) -> list[str]:
    """The choices in the order the agent's last message named them (all of them, or none: the
    declared order)."""
    spots = {c: offered.lower().find(c.lower()) for c in choices}
    if offered and all(spot >= 0 for spot in spots.values()):
        return sorted(choices, key=spots.__getitem__)
    return list(choices)


_TIME = re.compile(r"\b\d{1,2}[:.]\d{2}\b(?:\s?[ap]m)?|\b\d{1,2}\s?[ap]m\b", re.I)


def offered_options(offered: str) -> list[str]:
    """Options an agent's message lists that a customer may pick by position: times."""
    return _TIME.findall(offered)


def direct_answer(text: str) -> str:
    """The salient part of a short answer: "it's seldo, thanks" → "seldo"."""
    stripped = text.strip()
    for _ in range(3):
        shorter = _FILLER_START.sub("", stripped, count=1).strip()
        if shorter == stripped:
            break
        stripped = shorter
    stripped = _without_filler_end(stripped).strip(" ,;:\"'")
    one = re.fullmatch(r"(?:the|that) (.+?) one", stripped, re.I)  # "the checking one"
    return one.group(1) if one else stripped


def _without_filler_end(text: str) -> str:
    """`text` without its closing filler (", thanks", "please!", "?!"), read from its end (or
    from before a final newline, as `$` reads)."""
    body, newline = (text[:-1], "\n") if text.endswith("\n") else (text, "")
    found = _FILLER_END_BACKWARDS.match(body[::-1])
    return (body[: len(body) - found.end()] if found else body) + newline


def mentions_choice(text: str, choice: str) -> bool:
    """Whether `choice` is named in `text` (case-insensitive, `_` as space, singular/plural). A
    short upper-case code ("L", "XS") is named only as written: "a" or "m" in a sentence is a
    word, not the option."""
    if len(choice) <= 2 and choice.isupper():
        return bool(re.search(rf"(?<![\w-]){re.escape(choice)}(?![\w-])", text))
    spaced = re.sub(r"[_-]+", " ", choice.lower())  # "follow-up" is also "follow up"
    phrase = re.escape(spaced).replace(r"\ ", r"[\s_-]*")
    return bool(re.search(rf"\b{phrase}(?:s|es)?\b", text.lower())) or (
        len(choice) > 3
        and choice.lower().endswith("s")
        and bool(re.search(rf"\b{re.escape(choice.lower()[:-1])}\b", text.lower()))
    )
