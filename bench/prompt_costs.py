"""`python -m bench prompt-cache`: how much of each prompt a prefix cache could serve, per purpose,
on the reference scenario (bench/compare.py's MESSAGES on bench/worked_example.py's agent) and the
banking concierge (examples/banking) — and what 1,000 turns cost in dollars with two example
model choices, with and without cache hits (`engine.pricing`).

The conversations run through the real `TurnEngine` on in-memory ports with the benchmarks' fake
model (`bench.fake_llm.BenchLLM`, no latency); the prompts are read back from each turn's trace.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from bench.fake_llm import BenchLLM, LatencyModel
from bench.harness import TurnRunner
from bench.ports import in_memory_ports
from bench.prompt_cache import (
    CacheShares,
    PrefixHit,
    SentPrompt,
    cached_share,
    prefix_hits,
    shares_of,
)
from bench.table import Table, render_text
from bench.tokens import TokenCounter, token_counter
from engine.model import AgentSnapshot
from engine.ports import Generation, ToolDispatcher
from engine.pricing import PriceTable
from engine.sessions.session import SessionState
from engine.trace import TurnTrace
from infra.embeddings import HashingEmbedder

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Conversation:
    """An agent, its tools and the customer's messages, replayed `sessions` times."""

    label: str
    snapshot: AgentSnapshot
    tools: ToolDispatcher | None
    messages: Sequence[str]


def reference_conversation() -> Conversation:
    from bench.compare import MESSAGES
    from bench.synthetic_tools import SyntheticTools
    from bench.worked_example import reference_agent

    snapshot = reference_agent("tool_via_guideline")
    return Conversation("reference scenario", snapshot, SyntheticTools(), MESSAGES)


def banking_conversation() -> Conversation:
    from bench.scenarios import BANKING_CONVERSATION, banking_workload

    workload = banking_workload()
    workload.reset()
    return Conversation(
        "banking concierge", workload.snapshot, workload.tools, BANKING_CONVERSATION
    )


@dataclass
class RecordingLLM(BenchLLM):
    """The benchmarks' fake model, keeping every prompt whole: a turn that handled a secret keeps
    none in its trace (`masked_trace`), but its requests were sent all the same."""

    sent: list[tuple[str, str]] = field(default_factory=list)  # (schema name, prompt)

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        self.sent.append((schema.__name__, prompt))
        return await super().generate(prompt, schema, model=model)


@dataclass(frozen=True)
class Replayed:
    """A turn's trace and the prompts its calls sent, whole, in the order of its trace records."""

    trace: TurnTrace
    prompts: tuple[str, ...]


def _prompts_of(trace: TurnTrace, sent: list[tuple[str, str]]) -> tuple[str, ...]:
    """Each trace record's prompt, found among the turn's requests by schema and length."""
    left = list(sent)
    prompts = []
    for call in trace.llm_calls:
        found = next(
            (
                i
                for i, (name, text) in enumerate(left)
                if name == call.schema_name and len(text) == call.prompt_chars
            ),
            None,
        )
        prompts.append(left.pop(found)[1] if found is not None else call.prompt)
    return tuple(prompts)


async def replay(conversation: Conversation, tokens: TokenCounter) -> list[Replayed]:
    """One session through every message; each turn's trace and prompts, in order."""
    embedder = HashingEmbedder()
    llm = RecordingLLM(LatencyModel(0.0), tokens)
    runner = TurnRunner(in_memory_ports(embedder), llm, tools=conversation.tools, embedder=embedder)
    await runner.publish(conversation.snapshot)
    session = f"cache-{conversation.snapshot.id}"
    state = SessionState(id=session, agent_id=conversation.snapshot.id, customer_id="c")
    await runner.open_session(state)
    turns = []
    for n, text in enumerate(conversation.messages):
        first = len(llm.sent)
        await runner.turn(session, text, agent=conversation.label, turn=n)
        assert runner.last_output is not None
        trace = runner.last_output.trace
        turns.append(Replayed(trace, _prompts_of(trace, llm.sent[first:])))
    return turns


def sent_prompts(turns: Sequence[Replayed]) -> list[SentPrompt]:
    """Every prompt the turns sent (drafts too: a draft is a request), in order."""
    return [
        SentPrompt(turn.trace.session_id, call.purpose, prompt)
        for turn in turns
        for call, prompt in zip(turn.trace.llm_calls, turn.prompts, strict=True)
    ]


def cache_table(rows: Sequence[tuple[str, CacheShares]], tokenizer: str) -> Table:
    return Table(
        title="Prompts that cache: prompt tokens a prefix cache could serve, per purpose",
        headers=["conversation", "purpose", "calls", "prompt tokens", "shared prefix", "OpenAI"],
        rows=shares_of(rows),
        notes=[
            f"tokens: {tokenizer}. shared prefix: the longest prefix each prompt shares with an "
            "earlier prompt of its purpose in its session (what a Bedrock cache point placed "
            "there would serve); OpenAI: the same under its rule (prompts of ≥ 1,024 tokens, "
            "whole 128-token steps), so short prompts never cache.",
        ],
    )


@dataclass(frozen=True)
class ModelChoice:
    """Which model answers each purpose: `default`, except where `routes` says otherwise."""

    label: str
    default: str
    routes: dict[str, str] = field(default_factory=dict)

    def model_for(self, purpose: str) -> str:
        return self.routes.get(purpose, self.default)

    @property
    def text(self) -> str:
        routed = ", ".join(f"{p}: {m}" for p, m in self.routes.items())
        return f"{self.default}" + (f" ({routed})" if routed else "")


MODEL_CHOICES = (
    ModelChoice("one small model", "gpt-4o-mini"),
    ModelChoice("small + larger for the reply", "gpt-4o-mini", {"compose": "gpt-4o"}),
)
CACHES = ("none", "openai", "prefix")  # no hit, OpenAI's rule, every shared prefix


def dollars_per_1000_turns(
    turns: Sequence[Replayed], hits: Sequence[PrefixHit], choice: ModelChoice, cache: str
) -> float:
    """What the turns' calls cost on `choice`'s models at the example prices, per 1,000 turns;
    cached prompt tokens as `cache` says a cache would serve them."""
    prices = PriceTable()
    calls = [call for turn in turns for call in turn.trace.llm_calls]
    total = 0.0
    for call, hit in zip(calls, hits, strict=True):
        cached = {"none": 0, "openai": hit.openai_tokens, "prefix": hit.prefix_tokens}[cache]
        cost = prices.cost(
            choice.model_for(call.purpose), hit.prompt_tokens, cached, call.completion_tokens
        )
        assert cost is not None, f"no example price for {choice.model_for(call.purpose)}"
        total += cost
    return total / len(turns) * 1000


def dollars_table(runs: Sequence[tuple[str, list[Replayed]]], tokens: TokenCounter) -> Table:
    rows = []
    for label, turns in runs:
        hits = prefix_hits(sent_prompts(turns), tokens.count)
        for choice in MODEL_CHOICES:
            cells = [f"${dollars_per_1000_turns(turns, hits, choice, c):.2f}" for c in CACHES]
            rows.append([label, choice.label, choice.text, *cells])
    return Table(
        title="Dollars per 1,000 turns at example list prices (engine/pricing.py)",
        headers=[
            "conversation",
            "model choice",
            "models",
            "no cache hit",
            "OpenAI automatic cache",
            "every shared prefix cached",
        ],
        rows=rows,
        notes=[
            "Example list prices dated in engine/pricing.py (check them against the providers' "
            "pages). Prompt tokens counted as in the table above; completion tokens are the "
            "benchmark fake's answers, whose rationales are shorter than a real model's, so "
            "output cost is a floor. 'every shared prefix cached' prices every shared prefix "
            "as cached whatever its length: the most a Bedrock cache point could reach (Bedrock "
            "also has a minimum length per model, and charges cache writes above input).",
        ],
    )


async def measure(tokens: TokenCounter) -> list[tuple[str, list[Replayed]]]:
    runs = []
    for conversation in (reference_conversation(), banking_conversation()):
        runs.append((conversation.label, await replay(conversation, tokens)))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench prompt-cache", description=__doc__)
    parser.add_argument("--estimate", action="store_true", help="count chars/4, no tokenizer")
    args = parser.parse_args(argv)
    tokens = token_counter(not args.estimate)
    runs = asyncio.run(measure(tokens))
    rows = [(label, cached_share(sent_prompts(traces), tokens.count)) for label, traces in runs]
    print(render_text(cache_table(rows, tokens.name)))
    print()
    print(render_text(dollars_table(runs, tokens)))
    return 0
