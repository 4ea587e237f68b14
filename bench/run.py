"""One benchmark run: every section in order, progress lines as it goes, one `BenchResult`."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from bench.coldstart import measure_cold_turn, measure_first_turn, measure_imports
from bench.config import BenchConfig
from bench.embeddings import run_embedding_suite
from bench.fake_llm import LatencyModel
from bench.machine import describe_machine
from bench.offline_cpu import measure_offline_cpu
from bench.profile import profile_overhead
from bench.results import BenchResult
from bench.targets import evaluate
from bench.throughput import measure_throughput
from bench.tokens import token_counter
from bench.turns import run_turn_suite

Progress = Callable[[str], None]


def console_progress(started: float) -> Progress:
    def say(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def run(config: BenchConfig, progress: Progress | None = None) -> BenchResult:
    started = time.perf_counter()
    say = progress or console_progress(started)
    result = BenchResult(
        machine=describe_machine(),
        config=config.describe(),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    tokens = token_counter(config.tokenizer)
    result.tokenizer = tokens.name
    say(f"token counting: {tokens.name}")

    if {"turns", "overhead", "reference"} & set(config.sections):
        suite = asyncio.run(run_turn_suite(config, tokens, say))
        result.turns, result.overhead = suite.turns, suite.overhead
        result.scale, result.reference, result.samples = suite.scale, suite.reference, suite.samples
    if "profile" in config.sections:
        result.profile_label, result.profile = profile_overhead(config.profile_guidelines, say)
    if "embeddings" in config.sections:
        result.embeddings = run_embedding_suite(
            config.embedding_sizes, config.embedding_dimensions, config.topk_queries, say
        )
    if "imports" in config.sections:
        result.imports = measure_imports(
            config.import_runs,
            say,
            warmup=config.import_warmup,
            profile=config.import_profile,
            components=config.import_components,
            parallel=config.import_parallel,
            only=config.import_only,
            source_runs=config.import_source_runs,
        )
        result.first_turn = measure_first_turn(
            config.first_turn_runs, say, warmup=config.import_warmup
        )
        result.cold_turn = measure_cold_turn(
            config.first_turn_runs,
            say,
            warmup=config.import_warmup,
            handler_warm_turns=config.cold_handler_warm_turns,
        )
    if "offline" in config.sections:
        say("offline model: CPU per call and per turn on the banking conversation")
        result.offline_cpu = measure_offline_cpu(config.offline_cpu_repeats)
    if "throughput" in config.sections:
        latency = LatencyModel(config.latency_ms, config.latency_per_token_ms)
        result.throughput = measure_throughput(
            config.throughput_sessions,
            config.throughput_turns,
            latency,
            say,
            warmup=config.throughput_warmup,
        )
        say(f"local throughput: {result.throughput.status}")
    result.targets = evaluate(result)
    result.duration_s = time.perf_counter() - started
    result.machine["load_average_end"] = describe_machine()["load_average"]
    return result
