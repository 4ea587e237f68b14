"""Where the engine's overhead goes: cProfile over zero-latency turns of a synthetic agent.

Profiles whole turns (in-memory ports) and reports the engine functions with the largest
cumulative time per turn, so the report can say *why* a stage costs what it costs.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import pstats
from collections.abc import Callable

from bench.fake_llm import BenchLLM, LatencyModel
from bench.harness import TurnRunner
from bench.ports import in_memory_ports
from bench.results import ProfileRow
from bench.scale_agents import SCALE_SHAPES, Shape, scale_agent
from bench.scenarios import replay, scale_workload
from bench.tokens import EstimateCounter
from infra.embeddings import HashingEmbedder

Progress = Callable[[str], None]
CONVERSATIONS = 3  # x 4 turns


def shape_for(guidelines: int) -> Shape:
    return next((s for s in SCALE_SHAPES if s.guidelines == guidelines), SCALE_SHAPES[0])


def profile_overhead(
    guidelines: int, progress: Progress, top: int = 14
) -> tuple[str, list[ProfileRow]]:
    return asyncio.run(_profile(shape_for(guidelines), progress, top))


async def _profile(shape: Shape, progress: Progress, top: int) -> tuple[str, list[ProfileRow]]:
    agent = scale_agent(shape)
    workload = scale_workload(agent)
    embedder = HashingEmbedder()
    runner = TurnRunner(
        in_memory_ports(embedder), BenchLLM(LatencyModel(0.0), EstimateCounter()), embedder=embedder
    )
    await runner.publish(workload.snapshot)
    runner.use_tools(workload.tools)
    await replay(runner, workload, 1, session_prefix="profile-warm")
    gc.collect()
    profiler = cProfile.Profile()
    profiler.enable()
    samples = await replay(runner, workload, CONVERSATIONS, session_prefix="profile", first=1)
    profiler.disable()
    turns = len(samples)
    stats = pstats.Stats(profiler)
    rows = []
    for (path, line, name), (_cc, calls, own, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "/engine/" not in path:
            continue
        where = path.split("/engine/", 1)[1].removesuffix(".py").replace("/", ".")
        rows.append(
            ProfileRow(
                function=f"engine.{where}.{name}:{line}",
                calls=calls / turns,
                own_ms=own * 1000 / turns,
                cumulative_ms=cumulative * 1000 / turns,
            )
        )
    rows.sort(key=lambda r: -r.cumulative_ms)
    label = f"{shape.label}, {turns} zero-latency turns, in-memory ports, cProfile (per turn)"
    progress(f"profiled {label}")
    return label, rows[:top]
