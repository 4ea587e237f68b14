"""Reporting a `BenchResult`: its tables in report order — the targets, what a turn costs
(`bench.turn_tables`), what the deployment pays around the turns (`bench.deployment_tables`) —
and the console's plain-text report (`bench.table` renders them; docs/BENCHMARKS.md is
`bench.document`)."""

from __future__ import annotations

from collections.abc import Sequence

from bench.deployment_tables import (
    cold_turn_table,
    embeddings_table,
    first_turn_table,
    imports_table,
    throughput_table,
)
from bench.results import BenchResult
from bench.table import Table, render_text
from bench.turn_tables import (
    language_table,
    offline_cpu_table,
    overhead_table,
    per_turn_table,
    profile_table,
    reference_table,
    scale_table,
    stages_table,
    tokens_per_call_table,
    values_table,
)


def tables(result: BenchResult) -> list[Table]:
    """The tables of every section the run measured, the targets first."""
    out = [_targets(result)]
    latency = result.config.get("latency_ms", 0)
    if result.turns:
        out.append(per_turn_table(result))
    if result.samples:
        out.append(tokens_per_call_table(result))
    if result.overhead:
        out.append(overhead_table(result))
        out.append(stages_table(result))
        out.append(values_table(result))
        out.append(language_table(result))
    if result.scale:
        out.append(scale_table(result))
    if result.reference:
        out.append(reference_table(result))
    if result.embeddings:
        out.append(embeddings_table(result))
    if result.imports:
        out.append(imports_table(result))
    if result.first_turn is not None:
        out.append(first_turn_table(result.first_turn))
    if result.cold_turn is not None:
        out.append(cold_turn_table(result.cold_turn))
    if result.offline_cpu is not None:
        out.append(offline_cpu_table(result.offline_cpu))
    if result.throughput is not None:
        out.append(throughput_table(result.throughput, latency))
    if result.profile:
        out.append(profile_table(result))
    return out


def _targets(result: BenchResult) -> Table:
    return Table(
        "Targets",
        ["target", "limit", "measured", "result", "margin"],
        [[t.name, t.limit, t.measured, t.status, t.margin] for t in result.targets],
    )


def console_report(result: BenchResult, selected: Sequence[str] | None = None) -> str:
    """Every table as plain text, a pointer to the misses' explanations, the run's duration."""
    parts = [render_text(t) for t in tables(result)]
    misses = [t for t in result.targets if t.status == "MISS"]
    if misses:
        parts.append("Misses (why / fix): see docs/BENCHMARKS.md")
    parts.append(f"finished in {result.duration_s:.0f} s")
    return "\n\n".join(parts)
