"""How much of each prompt a prefix cache could serve: the longest prefix it shares with an
earlier prompt of the same purpose in the same session.

Providers cache prompt prefixes: OpenAI automatically, for prompts of at least 1,024 tokens, in
steps of 128 tokens past that; Bedrock at the cache points a request sets. A prompt can only hit
what an earlier request of the same session already sent, so over a conversation each prompt is
compared with every earlier prompt of its purpose in its session (the best match counts: a cache
keeps more than the last entry for the few minutes a conversation takes).

`cached_share(calls, count)` returns, per purpose, the prompt tokens and the tokens of the shared
prefixes, both as an ideal prefix cache (every shared token) and under OpenAI's rule — and what
the prompts' marks serve (`engine.prompt_text.Prompt`: where each prompt's stable prefix ends):
the marked prefix of a prompt whose earlier prompt of its purpose in its session had the same
one, and the part of it a Bedrock request would put before its cache point
(`infra.llm.bedrock_cache`: only on a prefix above the model's minimum).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

OPENAI_MIN_TOKENS = 1_024  # OpenAI caches prompts of this many tokens or more…
OPENAI_STEP_TOKENS = 128  # …in prefixes of whole steps of this size


@dataclass(frozen=True)
class SentPrompt:
    """One prompt sent to a model: its session, its purpose (`LLMPurpose` value) and its text;
    where its marked stable prefix ends (0: no mark), and where a Bedrock request would put its
    cache point (None: none)."""

    session: str
    purpose: str
    text: str
    stable_chars: int = 0
    cache_point: int | None = None


@dataclass
class PurposeShare:
    """The prompt tokens of one purpose and how many of them a prefix cache could have served."""

    purpose: str
    calls: int = 0
    prompt_tokens: int = 0
    prefix_tokens: int = 0  # ideal prefix cache: every token of the shared prefix
    openai_tokens: int = 0  # OpenAI's rule: ≥ 1,024-token prompts, 128-token steps
    marked_tokens: int = 0  # the marked stable prefix, when an earlier prompt had it
    cache_point_tokens: int = 0  # what a Bedrock cache point reads (above the model's minimum)

    def _of(self, tokens: int) -> float:
        return tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def share(self) -> float:
        return self._of(self.prefix_tokens)

    @property
    def openai_share(self) -> float:
        return self._of(self.openai_tokens)

    @property
    def marked_share(self) -> float:
        return self._of(self.marked_tokens)

    @property
    def cache_point_share(self) -> float:
        return self._of(self.cache_point_tokens)

    def add(self, other: PurposeShare) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.prefix_tokens += other.prefix_tokens
        self.openai_tokens += other.openai_tokens
        self.marked_tokens += other.marked_tokens
        self.cache_point_tokens += other.cache_point_tokens


@dataclass
class CacheShares:
    """Per purpose, in the order purposes were first seen, and their total."""

    purposes: dict[str, PurposeShare] = field(default_factory=dict)

    @property
    def total(self) -> PurposeShare:
        total = PurposeShare("all")
        for share in self.purposes.values():
            total.add(share)
        return total


def common_prefix_length(a: str, b: str) -> int:
    """The number of leading characters `a` and `b` share."""
    # Character by character is what is meant here (a prompt is no path).
    return len(os.path.commonprefix([a, b]))  # noqa: RUF071


def openai_cached_tokens(prefix_tokens: int, prompt_tokens: int) -> int:
    """What OpenAI's automatic cache serves of a shared prefix: nothing below 1,024 prompt (and
    prefix) tokens, else the prefix rounded down to a whole 128-token step."""
    if prompt_tokens < OPENAI_MIN_TOKENS or prefix_tokens < OPENAI_MIN_TOKENS:
        return 0
    return prefix_tokens - prefix_tokens % OPENAI_STEP_TOKENS


@dataclass(frozen=True)
class PrefixHit:
    """One prompt: its tokens, those of the prefix it shares with an earlier prompt of its purpose
    in its session, what OpenAI's rule would serve of them, and what its mark and a Bedrock cache
    point would (the marked prefix, when an earlier prompt was sent with the same one)."""

    sent: SentPrompt
    prompt_tokens: int
    prefix_tokens: int
    openai_tokens: int
    marked_tokens: int = 0
    cache_point_tokens: int = 0


def prefix_hits(prompts: Iterable[SentPrompt], count: Callable[[str], int]) -> list[PrefixHit]:
    """For each prompt, in the order sent, the longest prefix it shares with an earlier prompt of
    the same purpose in the same session, counted in tokens by `count`; and its marked prefix
    (and the part before a Bedrock cache point) when an earlier one had the same."""
    earlier: dict[tuple[str, str], list[SentPrompt]] = {}
    hits = []
    for sent in prompts:
        seen = earlier.setdefault((sent.session, sent.purpose), [])
        shared = max((common_prefix_length(sent.text, e.text) for e in seen), default=0)
        marks = {e.text[: e.stable_chars] for e in seen if e.stable_chars}
        points = {e.text[: e.cache_point] for e in seen if e.cache_point}
        seen.append(sent)
        tokens = count(sent.text)
        prefix = min(tokens, count(sent.text[:shared])) if shared else 0
        marked = sent.text[: sent.stable_chars]
        point = sent.text[: sent.cache_point] if sent.cache_point else ""
        hits.append(
            PrefixHit(
                sent,
                tokens,
                prefix,
                openai_cached_tokens(prefix, tokens),
                min(tokens, count(marked)) if marked and marked in marks else 0,
                min(tokens, count(point)) if point and point in points else 0,
            )
        )
    return hits


def cached_share(prompts: Iterable[SentPrompt], count: Callable[[str], int]) -> CacheShares:
    """`prefix_hits` summed per purpose."""
    shares = CacheShares()
    for hit in prefix_hits(prompts, count):
        share = shares.purposes.setdefault(hit.sent.purpose, PurposeShare(hit.sent.purpose))
        share.calls += 1
        share.prompt_tokens += hit.prompt_tokens
        share.prefix_tokens += hit.prefix_tokens
        share.openai_tokens += hit.openai_tokens
        share.marked_tokens += hit.marked_tokens
        share.cache_point_tokens += hit.cache_point_tokens
    return shares


def shares_of(rows: Sequence[tuple[str, CacheShares]]) -> list[list[str]]:
    """Table rows: workload, purpose, calls, prompt tokens, shared-prefix share, OpenAI share,
    marked-prefix share, Bedrock cache-point share."""
    out = []
    for label, shares in rows:
        for share in [*shares.purposes.values(), shares.total]:
            out.append(
                [
                    label,
                    share.purpose,
                    f"{share.calls}",
                    f"{share.prompt_tokens:,}",
                    f"{share.share:.0%}",
                    f"{share.openai_share:.0%}",
                    f"{share.marked_share:.0%}",
                    f"{share.cache_point_share:.0%}",
                ]
            )
    return out
