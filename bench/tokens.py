"""Token counting for the benchmarks: a real BPE tokenizer when one is installed, else chars/4.

The tokenizer must work offline with data shipped inside a PyPI package. `tiktoken` alone does not
qualify (it downloads its BPE files on first use), but `mistral-common` ships the Tekken tokenizer
(a tiktoken-format BPE with a 131k vocabulary, the same family and size class as OpenAI's
o200k_base) as a JSON file inside its wheel, and loads it with no network access:

    pip install mistral-common      # not a project dependency; the benchmarks fall back without it

Without it, counts use the engine's documented estimate (`engine.llm.estimate_tokens`, ≈4
characters per token), which is also the unit of the reference figures in
shared/notes/reference-engine.md — so every report carries both.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from engine.llm import estimate_tokens

TEKKEN_FILE = "tekken_240911.json"


class TokenCounter(Protocol):
    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class EstimateCounter:
    """The engine's own estimate: len(text) // 4."""

    name: str = "chars/4 estimate"

    def count(self, text: str) -> int:
        return estimate_tokens(text)


class TekkenCounter:
    """Mistral's Tekken BPE tokenizer from the `mistral-common` wheel (no download)."""

    def __init__(self) -> None:
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        path = importlib.resources.files("mistral_common") / "data" / TEKKEN_FILE
        with importlib.resources.as_file(path) as file:
            self._tokenizer = Tekkenizer.from_file(file)
        self.name = f"Tekken BPE ({TEKKEN_FILE}, mistral-common, offline)"

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, bos=False, eos=False))


@lru_cache(maxsize=2)
def token_counter(prefer_tokenizer: bool = True) -> TokenCounter:
    """The tokenizer if it loads, else the estimate; loaded once per process (~3 s)."""
    if prefer_tokenizer:
        try:
            return TekkenCounter()
        except Exception:  # not installed, or its data missing: the estimate is documented
            pass
    return EstimateCounter()
