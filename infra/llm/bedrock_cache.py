"""Where a Bedrock request gets a cache point: after the prompt's stable prefix, on models that
cache, when that prefix is long enough to be cached.

Bedrock caches a prompt prefix up to a `cachePoint` block (Converse's `messages`, `system` and,
on Anthropic's models, `tools` accept one); a later request whose prefix is byte-identical up to
the same point reads it from the cache (`cacheReadInputTokens`) instead of processing it again,
for about a tenth of the input price. The engine's prompts mark their stable prefix
(`engine.prompt_text.Prompt`): the role, the agent and its glossary, the shared rules. So the
adapter sends the prompt as two text blocks with a cache point between them, under three
conditions:

- the model caches: its id matches a pattern of `CachingModel`s (a cross-region profile's
  geography and an ARN's prefix are read through: `us.anthropic.claude-…` is
  `anthropic.claude-…`). Bedrock refuses a cache point on a model that does not cache ("You
  invoked an unsupported model or your request did not allow prompt caching"); should a listed
  model refuse one all the same, the adapter sends the request again without it, and none to
  that model from then on (`infra.llm.bedrock_llm`);
- the prefix reaches the model's minimum per cache checkpoint (AWS: a checkpoint below it is
  accepted but caches nothing). The prefix is counted as Bedrock counts it: the tool definition
  (the schema, which comes first), the system text, then the prompt's stable part, estimated at
  4 characters per token (`engine.llm.estimate_tokens`' rule). Claude's tokenizer makes fewer
  characters per token of English, so the estimate errs low: a prefix just above the minimum
  may go without a cache point. One below it (text that tokenizes more compactly) costs
  nothing: AWS accepts the request and caches nothing;
- the stable part and the rest are both non-blank text (a content block must not be blank).

One cache point per request: after the stable prefix, which covers the tool definition and the
system text before it (Anthropic caches tools, then system, then messages, as one prefix). A
second one after the tool definition alone would only serve when the stable prefix changed (a
new agent version) and the schema alone passed the minimum; no engine schema does (the largest,
the matching batch's, is a few hundred tokens), and Nova models take no cache point in `tools`.

`WAYPOINT_BEDROCK_CACHE_MODELS` sets the list: `pattern=min_tokens` items separated by commas
(`fnmatch` patterns on the model id), `defaults` for the list below, `none` for no cache point
at all. Unset: the defaults.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.prompt_text import stable_chars
from infra.llm.bedrock_client import is_inference_profile

CACHE_MODELS_ENV = "WAYPOINT_BEDROCK_CACHE_MODELS"
CHARS_PER_TOKEN = 4  # the engine's estimate (`engine.llm.estimate_tokens`)


@dataclass(frozen=True)
class CachingModel:
    """Models whose id matches `pattern` take cache points, from `min_tokens` of prefix on."""

    pattern: str
    min_tokens: int

    def matches(self, model_id: str) -> bool:
        return fnmatch.fnmatchcase(model_id, self.pattern)


# AWS's "Supported models, Regions, and limits" for prompt caching (Bedrock user guide) and
# Anthropic's minimum cacheable lengths, as read on 2026-11-29: the first pattern that matches
# wins, so the Opus 4.5 / 4.6 rows come before Opus 4's. Claude 3.5 Sonnet v2 is left out: its
# caching stayed with the preview's customers, and others get a refusal.
DEFAULT_CACHING_MODELS: tuple[CachingModel, ...] = (
    CachingModel("anthropic.claude-3-7-sonnet-*", 1_024),
    CachingModel("anthropic.claude-3-5-haiku-*", 2_048),
    CachingModel("anthropic.claude-haiku-4-5*", 4_096),
    CachingModel("anthropic.claude-sonnet-4*", 1_024),
    CachingModel("anthropic.claude-opus-4-5*", 4_096),
    CachingModel("anthropic.claude-opus-4-6*", 4_096),
    CachingModel("anthropic.claude-opus-4*", 1_024),
    CachingModel("amazon.nova-micro-v1*", 1_000),
    CachingModel("amazon.nova-lite-v1*", 1_000),
    CachingModel("amazon.nova-pro-v1*", 1_000),
    CachingModel("amazon.nova-premier-v1*", 1_000),
)


def base_model_id(model: str) -> str:
    """The foundation model an id names, for matching: an ARN's resource id, without a
    cross-region profile's geography (`arn:…:inference-profile/us.amazon.nova-pro-v1:0` →
    `amazon.nova-pro-v1:0`). An application inference profile's ARN stays as it is (its id
    says nothing of its model): give it a pattern of its own."""
    if ":application-inference-profile/" in model:
        return model
    resource = model.split("/", 1)[1] if model.startswith("arn:") and "/" in model else model
    if is_inference_profile(resource):
        return resource.split(".", 1)[1]
    return resource


class CachePolicy:
    """Which models take cache points, and where a request puts its one."""

    def __init__(self, models: Sequence[CachingModel] = DEFAULT_CACHING_MODELS) -> None:
        self.models = tuple(models)

    @classmethod
    def from_env(cls) -> CachePolicy:
        """`WAYPOINT_BEDROCK_CACHE_MODELS`, else the defaults (see the module docstring)."""
        value = os.environ.get(CACHE_MODELS_ENV)
        return cls(DEFAULT_CACHING_MODELS if value is None else parse_caching_models(value))

    def min_tokens(self, model: str) -> int | None:
        """The model's minimum prefix per cache checkpoint; None when it does not cache."""
        ids = {model, base_model_id(model)}
        for entry in self.models:
            if any(entry.matches(i) for i in ids):
                return entry.min_tokens
        return None

    def cache_point_at(self, prompt: str, model: str, ahead_chars: int = 0) -> int | None:
        """The character offset in `prompt` after which the cache point goes, or None for none.
        `ahead_chars`: the characters the request sends before the prompt (the tool definition,
        the system text), part of the cached prefix."""
        at = stable_chars(prompt)
        minimum = self.min_tokens(model)
        if at == 0 or minimum is None:
            return None
        head, tail = prompt[:at], prompt[at:]
        if not head.strip() or (tail and not tail.strip()):
            return None
        if (ahead_chars + len(head)) // CHARS_PER_TOKEN < minimum:
            return None
        return at


def parse_caching_models(value: str) -> tuple[CachingModel, ...]:
    """`pattern=min_tokens, defaults, …` (or `none`) as a list; raises ValueError, naming the
    variable, on an item it cannot read."""
    models: list[CachingModel] = []
    for item in (part.strip() for part in value.split(",")):
        if not item or item.lower() == "none":
            continue
        if item.lower() == "defaults":
            models.extend(DEFAULT_CACHING_MODELS)
            continue
        pattern, sep, minimum = item.rpartition("=")
        if not sep or not pattern.strip() or not minimum.strip().isdigit():
            raise ValueError(
                f"{CACHE_MODELS_ENV}: {item!r} is not pattern=min_tokens (e.g. "
                "anthropic.claude-sonnet-4*=1024), 'defaults' or 'none'"
            )
        models.append(CachingModel(pattern.strip(), int(minimum)))
    return tuple(models)


def with_cache_point(text: str, at: int | None) -> list[dict[str, Any]]:
    """The content blocks of a prompt: one text block, or the stable part, a cache point and the
    rest (no empty text block after it)."""
    if at is None:
        return [{"text": text}]
    blocks: list[dict[str, Any]] = [{"text": text[:at]}, {"cachePoint": {"type": "default"}}]
    if text[at:]:
        blocks.append({"text": text[at:]})
    return blocks
