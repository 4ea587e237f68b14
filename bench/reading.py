"""How the benchmark's fake LLM reads text: content words, relevance, and values in a message.

Deliberately simple and deterministic. It only has to be *plausible* — match a guideline whose
distinctive words the customer used, take the number the customer typed as an amount — so that
the benchmarks walk the same paths a real model would (journeys entered and advanced, tools run,
replies composed), with the same prompts the engine builds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
_NUMBER = re.compile(r"(?<![\w-])[$€£]?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w-])")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_TOKEN = re.compile(r"[\w@.\-]+")

# Function words, and words every condition uses ("the customer wants …"): they carry no topic.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "i",
        "im",
        "i'm",
        "me",
        "my",
        "mine",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "it",
        "its",
        "they",
        "them",
        "their",
        "this",
        "that",
        "these",
        "those",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "about",
        "into",
        "over",
        "as",
        "and",
        "or",
        "but",
        "if",
        "then",
        "so",
        "than",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "want",
        "wants",
        "wanted",
        "like",
        "need",
        "needs",
        "please",
        "thanks",
        "thank",
        "just",
        "also",
        "some",
        "any",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "when",
        "where",
        "why",
        "there",
        "here",
        "not",
        "no",
        "ok",
        "okay",
        "all",
        "s",
        "t",
        "customer",
        "customers",
        "agent",
        "asks",
        "ask",
        "asked",
        "says",
        "say",
        "said",
        "mentions",
        "mention",
        "tells",
        "tell",
        "know",
        "knows",
        "gave",
        "give",
        "gives",
        "given",
        "named",
        "name",
        "yet",
        "something",
        "still",
        "now",
        "again",
        "one",
        "while",
        "during",
    ]
)

# A few everyday synonyms, so "Hello!" reads as a greeting.
SYNONYMS = {"hello": "greet", "hi": "greet", "hey": "greet", "greets": "greet", "greeting": "greet"}

NEGATIONS = frozenset({"not", "no", "fail", "failed", "fails", "rejected", "insufficient", "false"})


@lru_cache(maxsize=1 << 14)
def stem(word: str) -> str:
    word = SYNONYMS.get(word, word)
    for suffix, keep in (("ies", 3), ("ing", 5), ("ed", 4), ("es", 4), ("s", 3)):
        if len(word) > keep and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@lru_cache(maxsize=1 << 14)
def content_stems(text: str) -> frozenset[str]:
    """The topic-bearing words of a text, stemmed."""
    return frozenset(stem(w) for w in words(text) if w not in STOPWORDS)


def relevance(condition: str, evidence: str) -> tuple[bool, int]:
    """Whether a condition reads as true of the evidence (the latest customer message, maybe with
    tool results), and a 0–10 score. One shared content word suffices for conditions with at most
    two; longer conditions need two. "… unrelated to X, Y" holds when none of X, Y is present."""
    lowered = condition.lower()
    seen = content_stems(evidence)
    if "unrelated to" in lowered:
        topics = content_stems(lowered.split("unrelated to", 1)[1])
        applies = len(seen) >= 3 and not topics & seen
        return applies, 7 if applies else 1
    wanted = content_stems(condition)
    if not wanted:
        return False, 0
    overlap = len(wanted & seen)
    need = 1 if len(wanted) <= 2 else 2
    applies = overlap >= need
    return applies, min(10, 4 + 2 * overlap) if applies else min(4, overlap)


def best_condition(conditions: Iterable[str | None], evidence: str) -> int | None:
    """Index of the condition that fits the evidence best (ties: the first). Unconditional options
    score lowest but are taken when nothing fits. Negated conditions ("not sufficient", "failed")
    win when the evidence says false, and lose when it says true."""
    seen = content_stems(evidence)
    false_said = bool({"false", "no", "fail", "reject"} & seen)
    best: tuple[float, int] | None = None
    for i, condition in enumerate(conditions):
        if condition is None:
            score = 0.5
        else:
            score = float(len(content_stems(condition) & seen))
            negated = bool(NEGATIONS & set(words(condition)))
            score += 2.0 if negated == false_said else -2.0
        if best is None or score > best[0]:
            best = (score, i)
    return best[1] if best is not None and best[0] > 0 else None


def first_number(text: str) -> str | None:
    match = _NUMBER.search(text)
    if match is None:
        return None
    return match.group(1).replace(",", "") + (match.group(2) or "")


def reference_token(text: str) -> str | None:
    """The identifier-looking token of a message: the last one with a digit, else the last word."""
    tokens = [t.strip(".-") for t in _TOKEN.findall(text)]
    tokens = [t for t in tokens if t]
    with_digit = [t for t in tokens if any(c.isdigit() for c in t)]
    if with_digit:
        return with_digit[-1]
    plain = [t for t in tokens if t.lower() not in STOPWORDS]
    return plain[-1] if plain else None


def named_value(name: str, text: str) -> str | None:
    """The words after the field's name ("the reference is RQ-1" → "RQ-1"), up to the clause's
    end, when the customer named the field."""
    key = name.replace("_", " ").split()[-1].lower()
    at = text.lower().rfind(key)
    if at < 0:
        return None
    clause = re.split(r"[,;?!]|\.(?:\s|$)| and ", text[at + len(key) :], maxsplit=1)[0]
    kept = clause.split()
    while kept and kept[0].lower() in STOPWORDS:
        kept.pop(0)
    return " ".join(kept).strip(".") or None


def value_for(kind: str, text: str, choices: Iterable[str] = (), name: str = "") -> str | None:
    """What the customer said for a field of this kind (the journey map's type words)."""
    lowered = text.lower()
    if kind.startswith(("whole number", "number")):
        return first_number(text)
    if kind.startswith("yes/no"):
        found = {"yes", "no"} & set(words(lowered))
        return found.pop() if len(found) == 1 else None
    if kind.startswith("date"):
        match = _DATE.search(text)
        return match.group(0) if match else None
    if kind.startswith("one of"):
        return next((c for c in choices if c.lower() in lowered), None)
    return (named_value(name, text) if name else None) or reference_token(text)


def is_question(text: str) -> bool:
    return text.rstrip().endswith("?")
