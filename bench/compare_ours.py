"""Our side of `python -m bench compare`, in a fresh process: `python -m bench.compare_ours
SPEC.json LATENCY_MS`.

The reference scenario's agent (the one the spec was exported from), a new session, the spec's
customer messages one turn each through the real `TurnEngine` on in-memory ports, the fake LLM
at the latency model. Prints one JSON line: per turn calls, rounds, prompt tokens (chars/4, the
reference's unit), wall ms and engine CPU ms (process CPU minus the fake's own); peak RSS.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from bench.fake_llm import BenchLLM, LatencyModel
from bench.harness import TurnRunner
from bench.ports import in_memory_ports
from bench.synthetic import SyntheticTools, reference_agent
from bench.tokens import EstimateCounter
from engine.session import SessionState
from infra.embeddings import HashingEmbedder


async def converse(spec: dict[str, Any], latency_ms: float) -> dict[str, Any]:
    embedder = HashingEmbedder()
    llm = BenchLLM(LatencyModel(latency_ms), EstimateCounter())
    runner = TurnRunner(in_memory_ports(embedder), llm, tools=SyntheticTools(), embedder=embedder)
    snapshot = reference_agent("tool_via_guideline")
    await runner.publish(snapshot)
    await runner.open_session(SessionState(id="cmp", agent_id=snapshot.id, customer_id="c"))
    turns = []
    for n, text in enumerate(spec["messages"]):
        first = len(llm.calls)
        cpu = time.process_time()
        sample = await runner.turn("cmp", text, agent="compare", turn=n)
        cpu_ms = (time.process_time() - cpu) * 1000
        fake_ms = sum(c.self_cpu_ms for c in llm.calls[first:])
        turns.append(
            {
                "message": text,
                "calls": sample.llm_calls,
                "rounds": sample.llm_rounds,
                "prompt_tokens": sample.prompt_tokens_est,
                "wall_ms": sample.wall_ms,
                "engine_cpu_ms": max(0.0, cpu_ms - fake_ms),
                "schemas": sample.calls_by_schema,
                "reply": sample.reply[:120],
            }
        )
    return {
        "turns": turns,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(json.dumps(asyncio.run(converse(spec, float(sys.argv[2])))))
