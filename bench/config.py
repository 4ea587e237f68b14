"""Benchmark settings: the default run (< 10 minutes on 2 cores), `--quick` (~1 minute), and the
tiny configuration of the smoke test."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from bench.scale_agents import SCALE_SHAPES, Shape

SECTIONS = (
    "turns",
    "overhead",
    "reference",
    "embeddings",
    "imports",
    "throughput",
    "profile",
    "offline",
)


@dataclass(frozen=True)
class BenchConfig:
    latency_ms: float = 400.0  # per LLM call in the per-turn runs
    latency_per_token_ms: float = 0.0
    tokenizer: bool = True  # a real tokenizer when installed (else chars/4)
    shapes: tuple[Shape, ...] = SCALE_SHAPES
    latency_repeats: int = 2  # passes over each agent's conversations with the latency model
    scale_conversations: int = 2  # conversations (4 turns each) per synthetic agent, with latency
    overhead_conversations: int = 12  # zero-latency conversations per agent, in-memory
    moto_conversations: int = 5  # zero-latency conversations per agent on moto
    warmup_conversations: int = 1  # unmeasured, per agent and port set, before the overhead runs
    moto_shapes: tuple[int, ...] = (10, 100, 1_000, 5_000)  # guideline counts run on moto
    moto_named_workloads: bool = True  # banking and the reference's exact scenario on moto too
    reference_repeats: int = 5
    embedding_sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    embedding_dimensions: int = 384
    topk_queries: int = 50
    import_runs: int = 7
    import_warmup: bool = True  # one unmeasured run per module first (.pyc, page cache)
    import_profile: bool = True  # `-X importtime` of each handler for its heaviest packages
    import_components: bool = True  # also engine / boto3 / openai modules, to explain handlers
    import_parallel: bool = False  # measure modules concurrently (smoke test only: skews times)
    import_only: tuple[str, ...] = ()  # measure just these modules (others: "skipped"); () = all
    import_source_runs: int = 3  # each handler imported with no .pyc (compiled from source)
    first_turn_runs: int = 5
    cold_handler_warm_turns: int = 20  # warm turns per cold worker container (CPU, gc.freeze)
    throughput_sessions: int = 20
    throughput_turns: int = 3  # per session: the banking conversation's stock-price turns
    throughput_warmup: bool = True  # one unmeasured turn first (builds the worker's runtime)
    profile_guidelines: int = 5_000  # the agent size profiled for the overhead analysis
    offline_cpu_repeats: int = 5  # banking conversations timed on the offline model
    sections: tuple[str, ...] = SECTIONS
    quick: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        data = asdict(self)
        data["shapes"] = [s.label for s in self.shapes]
        data.pop("extra")
        return data


DEFAULT = BenchConfig()

QUICK = replace(
    DEFAULT,
    latency_repeats=1,
    scale_conversations=1,
    overhead_conversations=4,
    moto_conversations=2,
    moto_shapes=(100, 1_000),
    reference_repeats=1,
    embedding_sizes=(1_000, 10_000),
    topk_queries=20,
    import_runs=2,
    import_source_runs=1,
    import_profile=False,
    import_components=False,
    first_turn_runs=2,
    cold_handler_warm_turns=5,
    throughput_sessions=3,
    throughput_turns=2,
    profile_guidelines=1_000,
    quick=True,
)

# The smoke test: a few turns at zero latency on a 10-guideline agent; every section runs once.
TINY = replace(
    DEFAULT,
    latency_ms=0.0,
    tokenizer=False,
    shapes=(SCALE_SHAPES[0],),
    latency_repeats=1,
    scale_conversations=1,
    overhead_conversations=1,
    moto_conversations=1,
    warmup_conversations=0,
    moto_shapes=(10,),
    moto_named_workloads=False,
    reference_repeats=1,
    embedding_sizes=(1_000,),
    topk_queries=5,
    import_runs=1,
    import_source_runs=1,
    import_warmup=False,
    import_profile=False,
    import_components=False,
    import_parallel=True,
    import_only=("functions.webhook", "functions.worker"),
    first_turn_runs=1,
    cold_handler_warm_turns=2,
    throughput_sessions=2,
    throughput_turns=1,
    throughput_warmup=False,
    profile_guidelines=10,
    offline_cpu_repeats=1,
    quick=True,
)
