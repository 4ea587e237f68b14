"""Short, distinct titles for options, when a platform caps a button or row title's length.

Cutting every label to the cap makes options that share a beginning look the same: "Transfer money
to my savings" and "Transfer money to my mother" both become "Transfer money to m…", which the
customer cannot tell apart and WhatsApp refuses outright (titles must be unique). So:

1. A label that fits is its own title (whitespace runs collapsed to one space).
2. A longer one is cut at a word boundary, ending with "…".
3. Titles still equal (case-insensitively) are rebuilt from what tells their labels apart:
   the shared beginning's first word, "…", then the part where they differ ("Transfer…my savings").
4. Whatever is still equal (identical labels, or labels that differ only past the cap) is
   prefixed with the option's number ("#3 Billing", "#4 Billing"), which is unique by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from infra.channels.text import longest_prefix

ELLIPSIS = "…"
_DISTINGUISH_ROUNDS = 4
Length = Callable[[str], int]


def title_key(title: str) -> str:
    """What two titles are compared by: case and spacing do not make them different."""
    return " ".join(title.split()).casefold()


def short_titles(labels: Sequence[str], limit: int, *, length: Length = len) -> list[str]:
    """One title per label, each at most `limit` (measured by `length`), pairwise distinct under
    `title_key`, each keeping as much of what tells its label apart as fits. `limit` must leave
    room for the number prefix of the last option ("#150 " and one character)."""
    if limit < len(f"#{len(labels)} ") + 1:
        raise ValueError(f"a title limit of {limit} is too short for {len(labels)} options")
    flat = [" ".join(label.split()) or f"Option {n}" for n, label in enumerate(labels, start=1)]
    titles = [shorten(label, limit, length=length) for label in flat]
    for _ in range(_DISTINGUISH_ROUNDS):  # a sub-group still equal has a longer shared start
        groups = _collisions(titles)
        for group in groups:
            labels_of = [flat[i] for i in group]
            distinguished = _distinguished(labels_of, limit, length)
            for index, title in zip(group, distinguished, strict=True):
                titles[index] = title
        if not groups:
            break
    numbered: set[int] = set()
    while groups := _collisions(titles):
        fresh = [i for group in groups for i in group if i not in numbered]
        if not fresh:  # two numbered titles never collide; this only stops a runaway loop
            break
        for index in fresh:
            numbered.add(index)
            titles[index] = shorten(f"#{index + 1} {flat[index]}", limit, length=length)
    return titles


def shorten(text: str, limit: int, *, length: Length = len) -> str:
    """`text` if it fits in `limit`, else its longest beginning that fits with "…" after it, cut
    at a space when one falls in the second half (a whole word rather than a fragment)."""
    if length(text) <= limit:
        return text
    room = limit - length(ELLIPSIS)
    if room < 1:
        return text[: longest_prefix(text, limit, length)]
    head = text[: longest_prefix(text, room, length)]
    space = head.rfind(" ")
    if space > len(head) // 2:
        head = head[:space]
    return head.rstrip() + ELLIPSIS


def _distinguished(labels: list[str], limit: int, length: Length) -> list[str]:
    """Titles for labels whose cut titles were equal: the shared beginning's first word, "…",
    and each label from the word where it starts to differ."""
    common = _common_word_prefix(labels)
    first_word = common.split(" ", 1)[0]
    lead = first_word + ELLIPSIS if length(first_word + ELLIPSIS) <= limit // 2 else ELLIPSIS
    titles = []
    for label in labels:
        rest = label[len(common) :].strip()
        if not rest:  # nothing tells it apart: left for the numbering
            titles.append(shorten(label, limit, length=length))
            continue
        titles.append(lead + shorten(rest, limit - length(lead), length=length))
    return titles


def _common_word_prefix(labels: list[str]) -> str:
    """The longest beginning shared by every label, ending at a word boundary."""
    shortest, longest = min(labels, key=str.casefold), max(labels, key=str.casefold)
    at = 0
    while at < len(shortest) and shortest[at].casefold() == longest[at].casefold():
        at += 1
    if at == len(shortest) and (at == len(longest) or longest[at] == " "):
        return shortest
    space = shortest.rfind(" ", 0, at + 1)
    return shortest[: space + 1] if space >= 0 else ""


def _collisions(titles: list[str]) -> list[list[int]]:
    """Indexes of titles that are equal under `title_key`, grouped, in order."""
    by_key: dict[str, list[int]] = {}
    for index, title in enumerate(titles):
        by_key.setdefault(title_key(title), []).append(index)
    return [group for group in by_key.values() if len(group) > 1]
