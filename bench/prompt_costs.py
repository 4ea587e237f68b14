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
from dataclasses import dataclass

from bench.fake_llm import BenchLLM, LatencyModel
from bench.harness import TurnRunner
from bench.ports import in_memory_ports
from bench.prompt_cache import CacheShares, SentPrompt, cached_share, shares_of
from bench.table import Table, render_text
from bench.tokens import TokenCounter, token_counter
from engine.model import AgentSnapshot
from engine.ports import ToolDispatcher
from engine.sessions.session import SessionState
from engine.trace import TurnTrace
from infra.embeddings import HashingEmbedder


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


async def replay(conversation: Conversation, tokens: TokenCounter) -> list[TurnTrace]:
    """One session through every message; each turn's trace, in order."""
    embedder = HashingEmbedder()
    llm = BenchLLM(LatencyModel(0.0), tokens)
    runner = TurnRunner(in_memory_ports(embedder), llm, tools=conversation.tools, embedder=embedder)
    await runner.publish(conversation.snapshot)
    session = f"cache-{conversation.snapshot.id}"
    state = SessionState(id=session, agent_id=conversation.snapshot.id, customer_id="c")
    await runner.open_session(state)
    traces = []
    for n, text in enumerate(conversation.messages):
        await runner.turn(session, text, agent=conversation.label, turn=n)
        assert runner.last_output is not None
        traces.append(runner.last_output.trace)
    return traces


def sent_prompts(traces: Sequence[TurnTrace]) -> list[SentPrompt]:
    """Every prompt the turns sent (drafts too: a draft is a request), in order."""
    return [
        SentPrompt(trace.session_id, call.purpose, call.prompt)
        for trace in traces
        for call in trace.llm_calls
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


async def measure(tokens: TokenCounter) -> list[tuple[str, list[TurnTrace]]]:
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
    return 0
