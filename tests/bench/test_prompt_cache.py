"""Prompts that cache: every purpose's stable prefix is byte-identical across the turns of a
session and the turn's content never comes before it (on real conversations through the engine),
and the share a prefix cache could serve is measured as a cache would serve it."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from bench.prompt_cache import (
    OPENAI_MIN_TOKENS,
    SentPrompt,
    cached_share,
    common_prefix_length,
    openai_cached_tokens,
    prefix_hits,
)
from bench.prompt_costs import (
    banking_conversation,
    reference_conversation,
    replay,
    sent_prompts,
)
from bench.tokens import EstimateCounter
from engine.agent_config import LLMPurpose

# Where each purpose's stable prefix ends: the first part that may differ from one turn to the
# next (the guideline groups, the journey map, the secret reading's conversation).
STABLE_UNTIL = {
    LLMPurpose.MATCH_GUIDELINES: "\n\n### ",
    LLMPurpose.DISAMBIGUATE: "\n\nTask: ",
    LLMPurpose.SELECT_JOURNEY_NODE: "\n\n## Journey map\n",
    LLMPurpose.CALL_TOOLS: "\n\nTools you may call now:\n",
    LLMPurpose.READ_SECRETS: "\n\nConversation (most recent last):\n",
}
# The turn's content: none of it may come before the stable prefix ends.
TURN_MARKERS = (
    "Known facts about the customer:\n",
    "Conversation (most recent last):\n",
    "Tool results from this turn:\n",
    "\nCustomer: ",
)


def stable_prefix(purpose: str, prompt: str) -> str:
    marker = STABLE_UNTIL.get(LLMPurpose(purpose))
    if marker is None:  # compose: everything before the turn's context
        return prompt[: min(prompt.index(m) for m in TURN_MARKERS if m in prompt)]
    return prompt[: prompt.index(marker)]


def chars(text: str) -> int:
    return len(text)


@pytest.fixture(scope="module")
def conversations() -> dict[str, list[SentPrompt]]:
    counter = EstimateCounter()
    return {
        c.label: sent_prompts(asyncio.run(replay(c, counter)))
        for c in (reference_conversation(), banking_conversation())
    }


def test_every_purposes_stable_prefix_is_byte_identical_across_the_turns_of_a_session(
    conversations: dict[str, list[SentPrompt]],
) -> None:
    seen: set[str] = set()
    for label, prompts in conversations.items():
        by_purpose: dict[str, list[str]] = defaultdict(list)
        for sent in prompts:
            by_purpose[sent.purpose].append(sent.text)
        for purpose, texts in by_purpose.items():
            prefixes = {stable_prefix(purpose, text) for text in texts}
            assert len(prefixes) == 1, f"{label}: {purpose} prompts differ in their stable part"
            [prefix] = prefixes
            assert prefix.startswith("You ") and "Agent: " in prefix  # the role, the agent
            # the builders' marks: the same on every turn, within the stable part found here
            # (up to the paragraph break that ends it)
            marks = {sent.text[: sent.stable_chars] for sent in prompts if sent.purpose == purpose}
            assert len(marks) == 1, f"{label}: {purpose} prompts differ in their marked prefix"
            assert f"{prefix}\n\n".startswith(*marks), f"{label}: {purpose}"
            for marker in TURN_MARKERS:
                assert marker not in prefix, (
                    f"{label}: {purpose}: {marker!r} before the stable part"
                )
            if len(texts) > 1:
                seen.add(purpose)
    # the conversations exercise these purposes over several turns
    assert {"match_guidelines", "select_journey_node", "compose", "read_secrets"} <= seen


def test_the_customers_words_come_only_after_the_stable_prefix(
    conversations: dict[str, list[SentPrompt]],
) -> None:
    from bench.compare import MESSAGES
    from bench.scenarios import BANKING_CONVERSATION

    said = {"reference scenario": MESSAGES, "banking concierge": BANKING_CONVERSATION}
    for label, prompts in conversations.items():
        for sent in prompts:
            prefix = stable_prefix(sent.purpose, sent.text)
            for message in said[label]:
                assert f"Customer: {message}" not in prefix


def test_the_marked_prefix_is_always_a_prefix_the_measured_turns_share(
    conversations: dict[str, list[SentPrompt]],
) -> None:
    """Every prompt marks its stable prefix and every later prompt of its purpose in the session
    starts with it, so what a cache point placed there serves is within what the measured turns
    share; the Bedrock adapter's cache point, where it sets one, is exactly at the mark. (Across
    sessions: tests/infra/test_bedrock_cache_points.py.)"""
    counter = EstimateCounter()
    for label, prompts in conversations.items():
        for hit in prefix_hits(prompts, counter.count):
            sent = hit.sent
            assert sent.stable_chars > 0, f"{label}: an unmarked {sent.purpose} prompt"
            assert sent.cache_point in (None, sent.stable_chars)
            assert hit.marked_tokens <= hit.prefix_tokens
            assert hit.cache_point_tokens <= hit.marked_tokens
        by_purpose: dict[str, list[SentPrompt]] = defaultdict(list)
        for sent in prompts:
            by_purpose[sent.purpose].append(sent)
        for purpose, sent_prompts_ in by_purpose.items():
            first, *later = sent_prompts_
            marked = first.text[: first.stable_chars]
            for sent in later:
                assert common_prefix_length(sent.text, first.text) >= len(marked), purpose
                assert sent.text[: sent.stable_chars] == marked, f"{label}: {purpose}"
        shares = cached_share(prompts, counter.count)
        # the marked prefix is a part of the shared prefix, and it caches on Claude where the
        # prefix (the tool definition with it) passes 1,024 tokens: node selection's does
        assert 0 < shares.total.marked_share <= shares.total.share
        assert shares.purposes["select_journey_node"].cache_point_share > 0


def test_marked_and_cache_point_shares_count_only_what_an_earlier_prompt_had() -> None:
    stable = "S" * 400
    prompts = [
        SentPrompt("s1", "match", stable + "one", stable_chars=400, cache_point=400),
        SentPrompt("s1", "match", stable + "two", stable_chars=400, cache_point=400),
        SentPrompt("s1", "match", "X" + stable + "three", stable_chars=401),  # another prefix
        SentPrompt("s2", "match", stable + "four", stable_chars=400),  # another session: cold
    ]
    match = cached_share(prompts, chars).purposes["match"]
    assert (match.marked_tokens, match.cache_point_tokens) == (400, 400)
    assert match.marked_share == pytest.approx(400 / match.prompt_tokens)


def test_the_share_is_the_longest_prefix_shared_with_an_earlier_prompt_of_its_purpose() -> None:
    stable = "S" * 600
    prompts = [
        SentPrompt("s1", "match", stable + "turn one"),
        SentPrompt("s1", "compose", stable + "turn one"),  # another purpose: not compared
        SentPrompt("s1", "match", stable + "turn two"),  # shares stable + "turn "
        SentPrompt("s2", "match", stable + "turn two"),  # another session: cold
        SentPrompt("s1", "match", stable + "turn one, again"),  # best with the first one
    ]
    shares = cached_share(prompts, chars)

    match = shares.purposes["match"]
    assert match.calls == 4
    assert match.prompt_tokens == 3 * 608 + 615
    assert match.prefix_tokens == (600 + 5) + 0 + (600 + 8)
    assert shares.purposes["compose"].prefix_tokens == 0
    assert shares.total.prompt_tokens == match.prompt_tokens + 608
    assert match.share == pytest.approx(1213 / (3 * 608 + 615))
    assert common_prefix_length("abc", "abd") == 2


def test_openai_serves_only_prompts_of_1024_tokens_in_whole_128_token_steps() -> None:
    assert openai_cached_tokens(prefix_tokens=900, prompt_tokens=1_000) == 0
    assert openai_cached_tokens(prefix_tokens=1_000, prompt_tokens=3_000) == 0
    assert openai_cached_tokens(prefix_tokens=1_024, prompt_tokens=3_000) == 1_024
    assert openai_cached_tokens(prefix_tokens=1_300, prompt_tokens=3_000) == 1_280
    long_stable = "L" * 2_000
    shares = cached_share(
        [SentPrompt("s", "p", long_stable + "a"), SentPrompt("s", "p", long_stable + "b")], chars
    )
    assert shares.purposes["p"].prefix_tokens == 2_000
    assert shares.purposes["p"].openai_tokens == 2_000 - 2_000 % 128
    assert OPENAI_MIN_TOKENS == 1_024


def test_the_banking_conversation_has_at_least_half_its_prompt_tokens_in_shared_prefixes(
    conversations: dict[str, list[SentPrompt]],
) -> None:
    banking = cached_share(conversations["banking concierge"], EstimateCounter().count)
    assert banking.total.share >= 0.5


def test_dollars_per_1000_turns_price_each_purpose_on_its_model_and_cached_tokens_as_cached(
    conversations: dict[str, list[SentPrompt]],
) -> None:
    from bench.prompt_costs import (
        MODEL_CHOICES,
        dollars_per_1000_turns,
    )

    turns = asyncio.run(replay(reference_conversation(), EstimateCounter()))
    hits = prefix_hits(sent_prompts(turns), EstimateCounter().count)
    small, mixed = MODEL_CHOICES
    for choice in (small, mixed):
        none, openai, prefix = (
            dollars_per_1000_turns(turns, hits, choice, cache)
            for cache in ("none", "openai", "prefix")
        )
        assert none > openai > prefix > 0  # the reference's matching prompts pass 1,024 tokens
    # composing on the larger model costs more than on the small one
    assert dollars_per_1000_turns(turns, hits, mixed, "none") > dollars_per_1000_turns(
        turns, hits, small, "none"
    )
