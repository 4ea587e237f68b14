"""Offline embeddings: deterministic feature hashing, no key, no network, no model download.

`HashingEmbedder` is the default when no OpenAI key is configured and the embedder of every test.
It is not semantic: it scores lexical overlap (shared words, shared word stems through character
3-grams, shared word pairs). That is enough to recall "I want to transfer money" → the "Money
transfer" journey, and it is stable across processes and machines, so vectors written at publish
time stay valid on the hot path.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

_WORD = re.compile(r"\w+")

# Function words carry no topic; hashing them would make every short sentence look alike.
_STOPWORD_TEXT = """
    a an the i im me my mine we our you your he she it its they them their this that these those to of in on at by for from with about into over as and or but if then so than is am
    are was were be been being do does did have has had can could would should will shall may
    might must want wants wanted like need needs please hi hello hey thanks thank just also
    some any what which who whom how when where why there here not no yes ok okay"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# Feature weights: whole words dominate; 3-grams catch inflections ("transferring"/"transfer"),
# word pairs reward shared phrases ("money transfer").
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.25
_PAIR_WEIGHT = 0.5


def _stem(word: str) -> str:
    """A deliberately tiny stemmer: plural and -ing/-ed endings only."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return _undouble(word[:-3])
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return _undouble(word[:-2])
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _undouble(stem: str) -> str:
    # "transferr" → "transfer", "stopp" → "stop"; keeps "ll"/"ss" words like "bill", "pass".
    if len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
        return stem[:-1]
    return stem


def _terms(text: str) -> list[str]:
    words = (w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS)
    return [_stem(w) for w in words]


def _features(text: str) -> Iterator[tuple[str, float]]:
    """Every hashed feature of `text` with its weight: the definition `embed_one` computes
    from cached per-term buckets."""
    terms = _terms(text)
    for term in terms:
        yield from _term_features(term)
    yield from _phrase_features(terms)


def _phrase_features(terms: list[str]) -> Iterator[tuple[str, float]]:
    """The features of the terms together: their word pairs, or "empty" when there are none."""
    for left, right in itertools.pairwise(terms):
        yield f"p:{left} {right}", _PAIR_WEIGHT
    if not terms:
        # Keeps the unit-length promise for empty or stopword-only text.
        yield "empty", 1.0


def _term_features(term: str) -> Iterator[tuple[str, float]]:
    yield "w:" + term, _WORD_WEIGHT
    padded = f"<{term}>"
    for i in range(len(padded) - 2):
        yield "c:" + padded[i : i + 3], _TRIGRAM_WEIGHT


@lru_cache(maxsize=1 << 15)
def _term_contributions(term: str, dimensions: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """A term's word and 3-gram features as (bucket, signed weight) columns: a conversation
    repeats its words turn after turn, so each is hashed once."""
    pairs = [_signed(feature, weight, dimensions) for feature, weight in _term_features(term)]
    return tuple(i for i, _ in pairs), tuple(w for _, w in pairs)


@lru_cache(maxsize=1 << 12)
def _line_contributions(
    line: str, dimensions: int
) -> tuple[str | None, str | None, tuple[int, ...], tuple[float, ...]]:
    """A line's first and last terms (None without any) and the (bucket, signed weight) columns
    of its terms and of its word pairs."""
    terms = _terms(line)
    if not terms:
        return None, None, (), ()
    indices: list[int] = []
    weights: list[float] = []
    for term in terms:
        term_indices, term_weights = _term_contributions(term, dimensions)
        indices += term_indices
        weights += term_weights
    for feature, weight in _phrase_features(terms):
        index, signed = _signed(feature, weight, dimensions)
        indices.append(index)
        weights.append(signed)
    return terms[0], terms[-1], tuple(indices), tuple(weights)


def _signed(feature: str, weight: float, dimensions: int) -> tuple[int, float]:
    index, sign = _bucket(feature, dimensions)
    return index, sign * weight


@lru_cache(maxsize=1 << 16)
def _bucket(feature: str, dimensions: int) -> tuple[int, float]:
    # blake2b, not hash(): Python's str hash is salted per process, vectors must not be.
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    # The sign bit makes collisions cancel out on average instead of always adding up.
    return h % dimensions, (1.0 if h >> 63 else -1.0)


class HashingEmbedder:
    """`Embedder` by feature hashing of word unigrams, character 3-grams and word pairs."""

    model = "waypoint-hashing-v1"

    def __init__(self, dimensions: int = 384):
        if dimensions < 16:
            raise ValueError(f"dimensions must be at least 16, got {dimensions}")
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """One L2-normalized float32 vector for `text`, summed line by line: a word never spans
        a line break, so a text's terms are its lines' terms in order, and its features each
        line's own (cached: the recall query repeats the conversation's lines turn after turn)
        plus the word pair across each break between lines with words."""
        dimensions = self._dimensions
        indices: list[int] = []
        weights: list[float] = []
        last: str | None = None  # the last term of the lines so far
        for line in text.split("\n"):
            first, final, line_indices, line_weights = _line_contributions(line, dimensions)
            if first is None:
                continue
            if last is not None:
                index, signed = _signed(f"p:{last} {first}", _PAIR_WEIGHT, dimensions)
                indices.append(index)
                weights.append(signed)
            last = final
            indices += line_indices
            weights += line_weights
        if last is None:
            for feature, weight in _phrase_features([]):  # no terms: the "empty" feature
                index, signed = _signed(feature, weight, dimensions)
                indices.append(index)
                weights.append(signed)
        # Weights are ±1, ±0.5 and ±0.25: their sums are exact in float64 and float32 alike, so
        # summing per bucket at once, in any order, gives the vector adding them one by one gave.
        vector = np.bincount(indices, weights=weights, minlength=dimensions).astype(np.float32)
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else vector

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """`Embedder.embed`: shape (len(texts), dimensions), unit rows, float32."""
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        return np.stack([self.embed_one(text) for text in texts])
