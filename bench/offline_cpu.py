"""The offline model's own CPU cost: the banking seed conversation, turn by turn, on the real
engine (in-memory ports) with `infra.offline.OfflineLLM`.

Each model call is timed with `time.thread_time` around the offline model only (its parsing,
matching and composing; the engine's prompt building and verification are outside), and each
turn with `time.process_time` around the whole `TurnEngine.handle`. CPU time, not wall time, so
a busy machine inflates it less. The conversation runs `repeats` times on fresh sessions; the
first run warms imports and caches and is not counted. Then one turn on a message at the inbound
limit (40,000 characters), which the offline model must read in linear time."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

from engine.ports import SchematicLLM
from examples.banking import SEED_CONVERSATION
from infra.offline import OfflineLLM


class TimedLLM:
    """The offline model with the CPU time of every call recorded (this thread's time: the
    offline model runs in the caller's thread and awaits nothing)."""

    def __init__(self, inner: OfflineLLM) -> None:
        self.inner = inner
        self.model = getattr(inner, "model", "offline")
        self.calls_ms: list[float] = []

    async def generate(self, *args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return await self.inner.generate(*args, **kwargs)
        finally:
            self.calls_ms.append((time.thread_time() - started) * 1000)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass(frozen=True)
class OfflineCpuRow:
    """CPU per call and per turn of the offline model on the banking conversation."""

    runs: int
    turns: int
    calls_per_turn: float
    call_p50_ms: float
    call_max_ms: float
    model_per_turn_ms: float  # the offline model's CPU per turn (sum of its calls)
    turn_p50_ms: float  # the whole turn's CPU (engine + model), median
    # One turn on a message at the inbound limit (40,000 characters of number words, after the
    # greeting): the offline model reads it in time proportional to its length.
    limit_turn_ms: float = 0.0
    status: str = "ok"


def message_at_the_limit() -> str:
    """40,000 characters (the inbound limit) of number words: a shape the offline model once
    read in quadratic time (issue #33)."""
    from infra.channels.text import MAX_INBOUND_CHARS

    return ("one " * MAX_INBOUND_CHARS)[:MAX_INBOUND_CHARS]


async def _one_run(llm: SchematicLLM, script: tuple[str, ...] = SEED_CONVERSATION) -> list[float]:
    """One conversation on a fresh engine; the CPU milliseconds of each turn."""
    from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
    from engine.sessions.session import InboundMessage, SessionState
    from engine.toolkit import InProcessDispatcher
    from engine.turn import EngineDeps, TurnEngine
    from examples import banking
    from examples.banking.bank import reset_bank
    from examples.banking.tools import registry
    from infra.embeddings import HashingEmbedder

    reset_bank()
    agent = banking.load()
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(agent)
    await sessions.create(SessionState(id="s", agent_id=agent.id, customer_id="c"))
    deps = EngineDeps(llm=llm, embedder=HashingEmbedder(), tools=InProcessDispatcher(registry))
    engine = TurnEngine(agents, sessions, deps)
    turns_ms = []
    for number, text in enumerate(script, start=1):
        started = time.process_time()
        await engine.handle("s", [InboundMessage(event_id=f"m{number}", text=text)])
        turns_ms.append((time.process_time() - started) * 1000)
    return turns_ms


def measure_offline_cpu(repeats: int = 5) -> OfflineCpuRow:
    """Run the banking conversation `repeats` + 1 times (the first to warm up)."""
    llm = TimedLLM(OfflineLLM())
    asyncio.run(_one_run(llm))  # warm-up: imports, caches, compiled patterns
    llm.calls_ms.clear()
    turns_ms: list[float] = []
    for _ in range(max(1, repeats)):
        turns_ms += asyncio.run(_one_run(llm))
    turns = len(turns_ms)
    calls_ms = list(llm.calls_ms)
    limit_turn_ms = asyncio.run(_one_run(llm, ("Hi", message_at_the_limit())))[-1]
    return OfflineCpuRow(
        runs=max(1, repeats),
        turns=turns,
        calls_per_turn=len(calls_ms) / turns,
        call_p50_ms=statistics.median(calls_ms),
        call_max_ms=max(calls_ms),
        model_per_turn_ms=sum(calls_ms) / turns,
        turn_p50_ms=statistics.median(turns_ms),
        limit_turn_ms=limit_turn_ms,
    )


if __name__ == "__main__":
    print(measure_offline_cpu())
