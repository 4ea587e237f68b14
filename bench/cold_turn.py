"""Run in a fresh process by the cold-turn benchmark: `python -m bench.cold_turn`.

The first turn of a cold worker container on the moto stack, each part timed: the imports the
worker's turn path needs, the runtime (`infra.runtime.Runtime`: botocore clients and the stores),
the agent snapshot read from DynamoDB, its vectors downloaded from S3 (an empty disk cache), the
turn itself, and the commit (DynamoDB TransactWriteItems). The parent (`bench.coldstart`) runs
a threaded moto server, publishes the banking agent to it and points this process at it with
`WAYPOINT_AWS_ENDPOINT_URL`, so nothing here is warm. The LLM is the zero-latency fake; its own
CPU is reported apart and left out of the total (LLM-answer parsing stays in).

Prints one JSON line of milliseconds.
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()

import asyncio  # noqa: E402
import json  # noqa: E402
from typing import Any  # noqa: E402

from bench.fake_llm import BenchLLM, LatencyModel  # noqa: E402
from bench.tokens import EstimateCounter  # noqa: E402
from engine.sessions.session import InboundMessage, SessionState  # noqa: E402
from infra.runtime import Runtime  # noqa: E402

_IMPORTED = time.perf_counter()

AGENT_ID = "bank"
MESSAGE = "What is the price of Apple stock?"


def _ms(start: float, end: float) -> float:
    return (end - start) * 1000


async def main(session_id: str) -> dict[str, float]:
    from engine.toolkit import InProcessDispatcher
    from examples.banking.tools import registry
    from infra.embeddings import HashingEmbedder

    llm = BenchLLM(LatencyModel(0.0), EstimateCounter())
    started = time.perf_counter()
    runtime = Runtime(llm=llm, embedder=HashingEmbedder(), tools=InProcessDispatcher(registry))
    engine = runtime.engine  # the botocore session, clients and the stores
    built = time.perf_counter()
    snapshot = await runtime.agents.get(AGENT_ID)
    loaded = time.perf_counter()
    index = await runtime.index_for(snapshot)  # downloads the vectors: the disk cache is empty
    if index is None:
        raise RuntimeError("the banking agent's vectors were not found in S3")
    vectors = time.perf_counter()
    await runtime.sessions.create(SessionState(id=session_id, agent_id=AGENT_ID, customer_id="c"))
    session = time.perf_counter()

    commit_ms = 0.0
    inner_commit = runtime.sessions.commit

    async def timed_commit(*args: Any, **kwargs: Any) -> Any:
        nonlocal commit_ms
        t = time.perf_counter()
        try:
            return await inner_commit(*args, **kwargs)
        finally:
            commit_ms += _ms(t, time.perf_counter())

    runtime.sessions.commit = timed_commit  # type: ignore[method-assign]
    turn_started = time.perf_counter()
    output = await engine.handle(session_id, [InboundMessage(event_id="m1", text=MESSAGE)])
    turn_done = time.perf_counter()
    if output.reply is None:
        raise RuntimeError("the cold turn produced no reply")
    llm_ms = sum(c.self_ms for c in llm.calls)
    turn_ms = _ms(turn_started, turn_done) - commit_ms - llm_ms
    parts = {
        "import_ms": _ms(_STARTED, _IMPORTED),
        "runtime_ms": _ms(started, built),
        "snapshot_ms": _ms(built, loaded),
        "vectors_ms": _ms(loaded, vectors),
        "session_ms": _ms(vectors, session),
        "turn_ms": turn_ms,
        "commit_ms": commit_ms,
    }
    parts["total_ms"] = sum(parts.values())
    parts["llm_fake_ms"] = llm_ms
    parts["llm_calls"] = float(len(llm.calls))
    runtime.close()
    return parts


if __name__ == "__main__":
    import sys

    print(json.dumps(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "cold"))))
