"""Our side of `python -m bench compare`, in a fresh process: `python -m bench.compare_ours
SPEC.json LATENCY_MS`.

The reference scenario's agent (the one the spec was exported from), a new session, the spec's
customer messages one turn each through the real `TurnEngine` on in-memory ports, the fake LLM
at the latency model. Prints one JSON line: per turn calls, rounds, prompt tokens (chars/4, the
reference's unit), wall ms and engine CPU ms (process CPU minus the fake's own), and what the
engine decided (`decisions`: the script the reference's fake follows); the process's own peak
RSS (VmHWM, bench/peak_memory.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.fake_llm import BenchLLM, LatencyModel
from bench.harness import TurnRunner
from bench.peak_memory import peak_rss_mb
from bench.ports import in_memory_ports
from bench.synthetic_tools import SyntheticTools
from bench.tokens import EstimateCounter
from bench.worked_example import reference_agent
from engine.model import AgentSnapshot
from engine.sessions.session import SessionState
from engine.trace import TraceTitles
from engine.turn import TurnOutput
from infra.embeddings import HashingEmbedder

# Tool statuses of a call that ran (the others were refused, asked about or left for later).
RAN = ("ok", "error", "interrupted")


def _step(agent: AgentSnapshot, journey_id: str, node_id: str) -> dict[str, Any]:
    node = next(n for n in agent.journey(journey_id).nodes if n.id == node_id)
    return {"id": node.id, "action": node.action, "tools": list(node.tools)}


def decisions(output: TurnOutput, agent: AgentSnapshot) -> dict[str, Any]:
    """What the engine decided on one turn, from its trace: the guidelines that matched (ids
    and conditions: the reference has ids of its own), the actions it applied, where each
    active journey went (the steps it passed this turn, in order, the last being where it is,
    and how), the tools that ran with their arguments, and the reply."""
    trace = output.trace
    titles = TraceTitles(agent)
    guidelines = [
        {"id": gid, "condition": titles.condition(gid)}
        for gid in trace.matched_guideline_ids
        if titles.condition(gid)
    ]
    applied = [
        agent.guideline(gid).action
        for gid in trace.applied_guideline_ids
        if agent.has_guideline(gid) and agent.guideline(gid).action
    ]
    journeys = []
    for journey_id in dict.fromkeys(t.journey_id for t in trace.journeys):
        moves = [t for t in trace.journeys if t.journey_id == journey_id]
        before, after = moves[0].previous_path, moves[-1].new_path
        passed = [n for n in after[len(before) :] if n is not None]
        if after[: len(before)] != before:  # went back: only where it is now says anything
            passed = [n for n in after[-1:] if n is not None]
        if not passed and moves[-1].node_id is not None:  # stayed at its step
            passed = [moves[-1].node_id]
        journeys.append(
            {
                "id": journey_id,
                "title": agent.journey(journey_id).title,
                "steps": [_step(agent, journey_id, n) for n in passed],
                "node": moves[-1].node_id,
                "how": moves[-1].how,
            }
        )
    tools = [
        {"name": c.tool, "arguments": c.arguments} for c in trace.tool_calls if c.status in RAN
    ]
    reply = output.reply.text or "" if output.reply else ""
    return {
        "guidelines": guidelines,
        "applied_actions": applied,
        "journeys": journeys,
        "tools": tools,
        "reply": reply,
    }


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
        assert runner.last_output is not None
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
                "decisions": decisions(runner.last_output, snapshot),
            }
        )
    return {
        "turns": turns,
        "peak_rss_mb": peak_rss_mb(),
    }


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(json.dumps(asyncio.run(converse(spec, float(sys.argv[2])))))
