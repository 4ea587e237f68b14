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
from engine.ports import Generation, SchematicLLM, ToolDispatcher
from engine.pricing import PriceTable
from engine.prompt_text import stable_chars
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


# The Bedrock model whose cache points the table shows (minimum 1,024 tokens per checkpoint).
CACHE_POINT_MODEL = "anthropic.claude-3-7-sonnet-20250219-v1:0"


@dataclass
class RecordingLLM(BenchLLM):
    """The benchmarks' fake model, keeping every prompt whole (with its mark: an
    `engine.prompt_text.Prompt`) and its schema: a turn that handled a secret keeps no prompt in
    its trace (`masked_trace`), but its requests were sent all the same."""

    sent: list[tuple[type[BaseModel], str]] = field(default_factory=list)
    inner: SchematicLLM | None = None  # answers instead of the fake (a real adapter), if given

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        self.sent.append((schema, prompt))
        if self.inner is not None:
            return await self.inner.generate(prompt, schema, model=model)
        return await super().generate(prompt, schema, model=model)


@dataclass(frozen=True)
class Replayed:
    """A turn's trace and the prompts its calls sent, whole, in the order of its trace records,
    with the request each would be on Bedrock (`CACHE_POINT_MODEL`)."""

    trace: TurnTrace
    prompts: tuple[str, ...]
    schemas: tuple[type[BaseModel] | None, ...] = ()


def _prompts_of(
    trace: TurnTrace, sent: list[tuple[type[BaseModel], str]]
) -> tuple[tuple[str, ...], tuple[type[BaseModel] | None, ...]]:
    """Each trace record's prompt and schema, found among the turn's requests by schema and
    length (the trace's own text, unmarked, when none is found)."""
    left = list(sent)
    prompts: list[str] = []
    schemas: list[type[BaseModel] | None] = []
    for call in trace.llm_calls:
        found = next(
            (
                i
                for i, (schema, text) in enumerate(left)
                if schema.__name__ == call.schema_name and len(text) == call.prompt_chars
            ),
            None,
        )
        if found is None:
            prompts.append(call.prompt)
            schemas.append(None)
        else:
            schema, text = left.pop(found)
            prompts.append(text)
            schemas.append(schema)
    return tuple(prompts), tuple(schemas)


async def replay(
    conversation: Conversation,
    tokens: TokenCounter,
    *,
    session: str | None = None,
    model: SchematicLLM | None = None,
) -> list[Replayed]:
    """One session (`session`, by default one named after the agent) through every message;
    each turn's trace and prompts, in order. `model` answers instead of the benchmarks' fake."""
    embedder = HashingEmbedder()
    llm = RecordingLLM(LatencyModel(0.0), tokens, inner=model)
    runner = TurnRunner(in_memory_ports(embedder), llm, tools=conversation.tools, embedder=embedder)
    await runner.publish(conversation.snapshot)
    session = session or f"cache-{conversation.snapshot.id}"
    state = SessionState(id=session, agent_id=conversation.snapshot.id, customer_id="c")
    await runner.open_session(state)
    turns = []
    for n, text in enumerate(conversation.messages):
        first = len(llm.sent)
        await runner.turn(session, text, agent=conversation.label, turn=n)
        assert runner.last_output is not None
        trace = runner.last_output.trace
        turns.append(Replayed(trace, *_prompts_of(trace, llm.sent[first:])))
    return turns


def cache_point_of(prompt: str, schema: type[BaseModel] | None) -> int | None:
    """Where the Bedrock adapter puts its cache point in `prompt` on `CACHE_POINT_MODEL` (the
    request it builds, the tool definition counted in the prefix), or None."""
    if schema is None:
        return None
    from infra.llm.bedrock_cache import CachePolicy
    from infra.llm.bedrock_llm import converse_request

    request = converse_request(prompt, schema, CACHE_POINT_MODEL, caching=CachePolicy())
    blocks = request["messages"][0]["content"]
    return len(blocks[0]["text"]) if len(blocks) > 1 and "cachePoint" in blocks[1] else None


def sent_prompts(turns: Sequence[Replayed]) -> list[SentPrompt]:
    """Every prompt the turns sent (drafts too: a draft is a request), in order."""
    return [
        SentPrompt(
            turn.trace.session_id,
            call.purpose,
            str(prompt),
            stable_chars(prompt),
            cache_point_of(prompt, schema),
        )
        for turn in turns
        for call, prompt, schema in zip(
            turn.trace.llm_calls,
            turn.prompts,
            turn.schemas or (None,) * len(turn.prompts),
            strict=True,
        )
    ]


def cache_table(rows: Sequence[tuple[str, CacheShares]], tokenizer: str) -> Table:
    return Table(
        title="Prompts that cache: prompt tokens a prefix cache could serve, per purpose",
        headers=[
            "conversation",
            "purpose",
            "calls",
            "prompt tokens",
            "shared prefix",
            "OpenAI",
            "marked",
            "Bedrock cache point",
        ],
        rows=shares_of(rows),
        notes=[
            f"tokens: {tokenizer}. shared prefix: the longest prefix each prompt shares with an "
            "earlier prompt of its purpose in its session (the most any prefix cache could "
            "serve); OpenAI: the same under its rule (prompts of ≥ 1,024 tokens, whole 128-token "
            "steps), so short prompts never cache. marked: the stable prefix each prompt marks "
            "(engine/prompt_text.py: the role, the agent and its glossary, the shared rules), "
            "when an earlier prompt of its purpose in its session had the same; Bedrock cache "
            f"point: the part of it before the cache point the Bedrock adapter sets on "
            f"{CACHE_POINT_MODEL} (only where the tool definition and the marked prefix reach "
            "the model's 1,024-token minimum, estimated at 4 characters a token).",
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
