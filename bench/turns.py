"""Per-turn cost, engine overhead and scale: every workload through the real `TurnEngine`.

Three passes over the workloads (banking, synthetic agents of each size, reference scenarios):
1. with the latency model, in-memory ports: wall time per turn as a customer would see it;
2. with a zero-latency LLM, in-memory ports: the engine's own overhead, split by stage;
3. with a zero-latency LLM on the moto stack (DynamoDB + S3 adapters): the same, with stores.
LLM calls, rounds and tokens do not depend on latency; they come from the in-memory passes.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from bench.config import BenchConfig
from bench.fake_llm import BenchLLM, LatencyModel
from bench.harness import BREAKDOWN, TurnRunner, TurnSample
from bench.ports import IN_MEMORY, MOTO, in_memory_ports, moto_ports
from bench.reference_figures import THEIRS
from bench.results import OverheadSummary, ReferenceRow, ScaleRow, TurnSummary
from bench.scale_agents import ScaleAgent, scale_agent
from bench.scenarios import (
    BANKING_LABEL,
    REFERENCE_LABEL,
    Workload,
    banking_workload,
    reference_workload,
    replay,
    scale_workload,
)
from bench.stats import mean, median, p95
from bench.tokens import TokenCounter, token_counter
from bench.worked_example import REFERENCE_VARIANTS
from infra.embeddings import HashingEmbedder

Progress = Callable[[str], None]

EXACT = "tool_via_guideline"  # the reference's worked example, shape for shape


@dataclass
class TurnSuite:
    turns: list[TurnSummary] = field(default_factory=list)
    overhead: list[OverheadSummary] = field(default_factory=list)
    scale: list[ScaleRow] = field(default_factory=list)
    reference: list[ReferenceRow] = field(default_factory=list)
    samples: list[TurnSample] = field(default_factory=list)


@dataclass
class _Workloads:
    banking: Workload
    scale: list[tuple[ScaleAgent, Workload]]
    reference: list[Workload]

    def all(self) -> list[Workload]:
        return [self.banking, *(w for _, w in self.scale), *self.reference]


def _workloads(config: BenchConfig, progress: Progress) -> _Workloads:
    scale = []
    for shape in config.shapes:
        agent = scale_agent(shape)
        progress(
            f"built synthetic agent: {shape.label} ({len(agent.snapshot.guidelines)} "
            "guidelines in the snapshot incl. journey conditions)"
        )
        scale.append((agent, scale_workload(agent)))
    reference = [reference_workload(v) for v in REFERENCE_VARIANTS]
    return _Workloads(banking_workload(), scale, reference)


SINGLE_TURN_FACTOR = 4  # a reference scenario is one turn: run 4x the sessions for overhead stats


def _conversations(workload: Workload, config: BenchConfig, *, pass_: str) -> int:
    """How many conversations of a workload each pass runs ("latency", "memory", "moto")."""
    if pass_ != "latency":
        base = config.overhead_conversations if pass_ == "memory" else config.moto_conversations
        return base * (SINGLE_TURN_FACTOR if workload.kind == "reference" else 1)
    if workload.kind == "reference":
        return config.reference_repeats
    if workload.kind == "banking":
        return config.latency_repeats
    return config.scale_conversations * config.latency_repeats


async def run_turn_suite(
    config: BenchConfig, tokens: TokenCounter, progress: Progress
) -> TurnSuite:
    suite = TurnSuite()
    work = _workloads(config, progress)
    embedder = HashingEmbedder()

    # 1. the latency model, in-memory; one workload at a time, so no turn waits for another's CPU
    latency = LatencyModel(config.latency_ms, config.latency_per_token_ms)
    runner = TurnRunner(in_memory_ports(embedder), BenchLLM(latency, tokens), embedder=embedder)
    latency_samples: dict[str, list[TurnSample]] = {}
    for workload in work.all():
        conversations = _conversations(workload, config, pass_="latency")
        what = f"latency {config.latency_ms:g} ms/call"
        samples = await _run(runner, workload, conversations, "lat", progress, what)
        latency_samples[workload.label] = samples
        suite.samples += samples

    # 2. zero latency, in-memory. Each agent in a fresh process of its own, as a deployment's
    # container runs it: the agent alone in the heap, fresh ports, and what the process built
    # before its turns frozen out of the garbage collector's way, as the worker's init does
    # (functions/worker_init.py). Measured in this process instead, the agents ran in a heap
    # holding the other workloads and the first pass's store of every session and trace: their
    # overhead came out 1.4–2.8× what the same agent measured alone (before fresh ports), then
    # still ≈ 1.3–1.6× (fresh ports, this process; docs/BENCHMARKS.md, History).
    memory_samples: dict[str, list[TurnSample]] = {}
    spawn = multiprocessing.get_context("spawn")
    for workload in work.all():
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            samples, said = pool.submit(_zero_latency_alone, config, workload.label).result()
        for line in said:
            progress(line)
        memory_samples[workload.label] = samples
        suite.overhead.append(_overhead(workload.label, IN_MEMORY, samples))

    # 3. zero latency, moto
    moto_samples: dict[str, list[TurnSample]] = {}
    named = config.moto_named_workloads
    moto_work = [
        *([work.banking] if named else []),
        *(w for a, w in work.scale if a.shape.guidelines in config.moto_shapes),
        *(w for w in work.reference if named and w.label == f"reference: {EXACT}"),
    ]
    async with moto_ports(embedder) as (ports, stack):
        runner = TurnRunner(ports, BenchLLM(LatencyModel(0.0), tokens), embedder=embedder)
        for workload in moto_work:
            await stack.publish_embeddings(workload.snapshot)
            samples = await _warm_then_run(runner, workload, config, progress, pass_="moto")
            moto_samples[workload.label] = samples
            suite.overhead.append(_overhead(workload.label, MOTO, samples))

    for workload in work.all():
        counted = memory_samples[workload.label] + latency_samples[workload.label]
        suite.turns.append(_summary(workload.label, latency_samples[workload.label], counted))
    suite.scale = _scale_rows(work.scale, memory_samples, latency_samples, moto_samples)
    suite.reference = _reference_rows(work.reference, latency_samples)
    return suite


def _workload_labelled(config: BenchConfig, label: str) -> Workload:
    """The workload `_workloads` builds under `label`, built alone."""
    if label == BANKING_LABEL:
        return banking_workload()
    for shape in config.shapes:
        if shape.label == label:
            return scale_workload(scale_agent(shape))
    for variant in REFERENCE_VARIANTS:
        if label == f"{REFERENCE_LABEL}{variant}":
            return reference_workload(variant)
    raise ValueError(f"no workload is labelled {label!r}")


def _zero_latency_alone(config: BenchConfig, label: str) -> tuple[list[TurnSample], list[str]]:
    """The zero-latency in-memory pass of one workload, in a fresh (spawned) process: build it,
    freeze what was built, warm up, measure. Returns the samples and the progress lines."""
    said: list[str] = []
    workload = _workload_labelled(config, label)
    embedder = HashingEmbedder()
    runner = TurnRunner(
        in_memory_ports(embedder),
        BenchLLM(LatencyModel(0.0), token_counter(config.tokenizer)),
        embedder=embedder,
    )
    gc.collect()
    gc.freeze()
    samples = asyncio.run(_warm_then_run(runner, workload, config, said.append, pass_="memory"))
    return samples, said


_ZERO_LATENCY_PASSES = {  # pass → (session prefix, what the progress line says)
    "memory": ("zero", "zero latency, in-memory"),
    "moto": ("moto", "zero latency, moto"),
}


async def _warm_then_run(
    runner: TurnRunner,
    workload: Workload,
    config: BenchConfig,
    progress: Progress,
    *,
    pass_: str,
) -> list[TurnSample]:
    """One uncounted warm-up, then the measured conversations of a zero-latency pass."""
    await _run(runner, workload, config.warmup_conversations, "warm", progress, "", quiet=True)
    prefix, what = _ZERO_LATENCY_PASSES[pass_]
    conversations = _conversations(workload, config, pass_=pass_)
    return await _run(runner, workload, conversations, prefix, progress, what)


async def _run(
    runner: TurnRunner,
    workload: Workload,
    conversations: int,
    prefix: str,
    progress: Progress,
    what: str,
    *,
    quiet: bool = False,
) -> list[TurnSample]:
    gc.collect()
    await runner.publish(workload.snapshot)
    runner.use_tools(workload.tools)
    samples = await replay(
        runner, workload, conversations, session_prefix=f"{prefix}-{workload.label}"
    )
    if not quiet:
        walls = [s.wall_ms for s in samples]
        progress(
            f"{workload.label}: {len(samples)} turns ({what}); wall p50 {median(walls):.1f} ms, "
            f"overhead p50 {median(s.overhead_ms for s in samples):.1f} ms"
        )
    return samples


def _summary(label: str, timed: Sequence[TurnSample], counted: Sequence[TurnSample]) -> TurnSummary:
    return TurnSummary(
        agent=label,
        turns=len(timed),
        wall_p50_ms=median(s.wall_ms for s in timed),
        wall_p95_ms=p95(s.wall_ms for s in timed),
        rounds_p50=median(s.llm_rounds for s in counted),
        rounds_max=max(s.llm_rounds for s in counted),
        calls_mean=mean(s.llm_calls for s in counted),
        calls_max=max(s.llm_calls for s in counted),
        prompt_tokens_mean=mean(s.prompt_tokens for s in counted),
        prompt_tokens_max=max(s.prompt_tokens for s in counted),
        prompt_est_mean=mean(s.prompt_tokens_est for s in counted),
        completion_tokens_mean=mean(s.completion_tokens for s in counted),
        tool_turns=sum(1 for s in timed if s.used_tools),
        budget_skips=sum(s.budget_skips for s in counted),
        speculative_discarded=sum(s.speculative_discarded for s in timed),
        speculation_saved=sum(s.speculation_saved for s in timed),
        speculation_late=sum(s.speculation_late for s in timed),
        completion_tokens_max=max(s.completion_tokens for s in counted),
        prompt_per_call=_per_call([(s.prompt_tokens, s.llm_calls) for s in counted]),
        completion_per_call=_per_call([(s.completion_tokens, s.llm_calls) for s in counted]),
        completion_max_call=max(s.completion_max_call for s in counted),
    )


def _per_call(turns: Sequence[tuple[int, int]]) -> float:
    """Tokens per LLM call over turns of (tokens, calls): their total over their calls."""
    calls = sum(c for _, c in turns)
    return sum(t for t, _ in turns) / calls if calls else 0.0


def _overhead(label: str, ports: str, samples: Sequence[TurnSample]) -> OverheadSummary:
    return OverheadSummary(
        agent=label,
        ports=ports,
        turns=len(samples),
        p50_ms=median(s.overhead_ms for s in samples),
        p95_ms=p95(s.overhead_ms for s in samples),
        max_ms=max(s.overhead_ms for s in samples),
        stages_p50_ms={k: median(s.breakdown_ms.get(k, 0.0) for s in samples) for k in BREAKDOWN},
        stages_p95_ms={k: p95(s.breakdown_ms.get(k, 0.0) for s in samples) for k in BREAKDOWN},
        llm_self_p50_ms=median(s.llm_self_ms for s in samples),
        values_p50_ms=median(s.values_ms for s in samples),
        values_p95_ms=p95(s.values_ms for s in samples),
        values_share_p50=median(s.values_ms / s.overhead_ms for s in samples if s.overhead_ms),
        language_p50_ms=median(s.language_ms for s in samples),
        language_p95_ms=p95(s.language_ms for s in samples),
        language_share_p50=median(s.language_ms / s.overhead_ms for s in samples if s.overhead_ms),
    )


def _scale_rows(
    scale: Sequence[tuple[ScaleAgent, Workload]],
    memory: dict[str, list[TurnSample]],
    latency: dict[str, list[TurnSample]],
    moto: dict[str, list[TurnSample]],
) -> list[ScaleRow]:
    rows = []
    for agent, workload in scale:
        counted = memory[workload.label] + latency[workload.label]
        row = ScaleRow(
            label=agent.shape.label,
            shape=agent.shape.kind,
            guidelines=agent.shape.guidelines,
            journeys=agent.shape.journeys,
            global_guidelines=agent.shape.global_guidelines,
            snapshot_guidelines=len(agent.snapshot.guidelines),
            evaluated_mean=mean(s.guidelines_evaluated for s in counted),
            calls_mean=mean(s.llm_calls for s in counted),
            rounds_max=max(s.llm_rounds for s in counted),
            prompt_tokens_mean=mean(s.prompt_tokens for s in counted),
            prompt_est_mean=mean(s.prompt_tokens_est for s in counted),
            completion_tokens_mean=mean(s.completion_tokens for s in counted),
            critical_completion_mean=mean(s.critical_completion_tokens for s in counted),
            ratio_vs_100=float("nan"),
        )
        row.overhead_p50_ms[IN_MEMORY] = median(s.overhead_ms for s in memory[workload.label])
        row.overhead_p95_ms[IN_MEMORY] = p95(s.overhead_ms for s in memory[workload.label])
        if workload.label in moto:
            row.overhead_p50_ms[MOTO] = median(s.overhead_ms for s in moto[workload.label])
            row.overhead_p95_ms[MOTO] = p95(s.overhead_ms for s in moto[workload.label])
        rows.append(row)
    for r in rows:  # against the 100-guideline agent of the same shape
        base = next((b for b in rows if b.guidelines == 100 and b.shape == r.shape), None)
        if base is not None and base.prompt_tokens_mean:
            r.ratio_vs_100 = r.prompt_tokens_mean / base.prompt_tokens_mean
    return rows


def _reference_rows(
    workloads: Sequence[Workload], latency: dict[str, list[TurnSample]]
) -> list[ReferenceRow]:
    rows = []
    for workload in workloads:
        variant = workload.label.removeprefix("reference: ")
        samples = latency[workload.label]
        first = samples[0]
        theirs = THEIRS[variant]
        rows.append(
            ReferenceRow(
                scenario=variant,
                description=REFERENCE_VARIANTS[variant],
                calls=first.llm_calls,
                rounds=first.llm_rounds,
                prompt_tokens=first.prompt_tokens,
                prompt_est=first.prompt_tokens_est,
                completion_tokens=first.completion_tokens,
                wall_p50_ms=median(s.wall_ms for s in samples),
                calls_by_schema=first.calls_by_schema,
                theirs_calls=theirs.calls,
                theirs_rounds=theirs.rounds,
                theirs_prompt_tokens=theirs.prompt_tokens,
            )
        )
    return rows
