"""Made-up topic words for the synthetic agents ("the velori trasko"): every guideline and journey
gets words of its own, so the fake LLM's lexical reading matches exactly what a conversation
mentions and nothing else, and vector recall (hashing embedder) finds the journey the customer
talks about.
"""

from __future__ import annotations

_ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "tr",
    "kr",
    "pl",
    "br",
    "st",
]
_VOWELS = ["a", "e", "i", "o", "u"]
_CODAS = ["", "n", "r", "s", "l"]
_SYLLABLES = [o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS]  # 375


def topic_word(i: int) -> str:
    """The i-th made-up word: three syllables, deterministic, distinct for i < 375**3."""
    n = len(_SYLLABLES)
    j = (i * 2_654_435_761 + 12_345) % n**3  # a bijection (coprime multiplier) that spreads
    return _SYLLABLES[j // (n * n)] + _SYLLABLES[(j // n) % n] + _SYLLABLES[j % n]


class Words:
    """Hands out fresh topic words in a fixed order."""

    def __init__(self) -> None:
        self._next = 0

    def take(self, count: int = 2) -> list[str]:
        out = [topic_word(self._next + k) for k in range(count)]
        self._next += count
        return out
