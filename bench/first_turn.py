"""Run in a fresh process by the cold-start benchmark: `python -m bench.first_turn`.

Prints one JSON line: how long it took to import the engine, load the banking agent from its
YAML, and run the first and the second turn (in-memory ports, zero-latency fake LLM). The gap
between the first and the second turn is what a cold container pays once, on top of imports.
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()

import asyncio  # noqa: E402
import json  # noqa: E402

from bench.fake_llm import BenchLLM, LatencyModel  # noqa: E402
from bench.tokens import EstimateCounter  # noqa: E402
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore  # noqa: E402
from engine.sessions.session import InboundMessage, SessionState  # noqa: E402
from engine.toolkit import InProcessDispatcher  # noqa: E402
from engine.turn import EngineDeps, TurnEngine  # noqa: E402
from infra.embeddings import HashingEmbedder  # noqa: E402

_IMPORTED = time.perf_counter()


async def main() -> dict[str, float]:
    from examples import banking
    from examples.banking.tools import registry

    started = time.perf_counter()
    snapshot = banking.load()
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(snapshot)
    await sessions.create(SessionState(id="s", agent_id=snapshot.id, customer_id="c"))
    engine = TurnEngine(
        agents,
        sessions,
        EngineDeps(
            llm=BenchLLM(LatencyModel(0.0), EstimateCounter()),
            embedder=HashingEmbedder(),
            tools=InProcessDispatcher(registry),
        ),
    )
    loaded = time.perf_counter()
    await engine.handle(
        "s", [InboundMessage(event_id="m1", text="What is the price of Apple stock?")]
    )
    first = time.perf_counter()
    await engine.handle("s", [InboundMessage(event_id="m2", text="Apple")])
    second = time.perf_counter()
    return {
        "import_ms": (_IMPORTED - _STARTED) * 1000,
        "agent_ms": (loaded - started) * 1000,
        "first_turn_ms": (first - loaded) * 1000,
        "second_turn_ms": (second - first) * 1000,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
