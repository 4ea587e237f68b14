"""Rendering a `BenchResult`: plain-text tables for the console, Markdown for docs/BENCHMARKS.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.coldstart import REFERENCE_MODULE, reference_import
from bench.harness import BREAKDOWN
from bench.ports import IN_MEMORY, MOTO
from bench.reference_figures import THEIR_IMPORT, THEIRS
from bench.results import BenchResult


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


def _ms(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}"


def _n(value: float, digits: int = 0) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "–"
    return f"{value:,.{digits}f}"


STAGE_TITLES = {
    "store_load": "store load",
    "load": "load",
    "recall": "recall",
    "match_round_1": "match r1",
    "match_supplemental": "suppl.",
    "relationships": "relations",
    "tools": "tools",
    "compose": "compose",
    "persist_prep": "persist prep",
    "pipeline_setup": "turn setup",
    "trace_dump": "other",
    "store_commit": "store commit",
}


def tables(result: BenchResult) -> list[Table]:
    out = [_targets(result)]
    latency = result.config.get("latency_ms", 0)
    if result.turns:
        out.append(
            Table(
                f"Per turn with the latency model ({latency:g} ms per LLM call), in-memory ports",
                [
                    "agent",
                    "turns",
                    "wall p50 ms",
                    "wall p95 ms",
                    "rounds p50/max",
                    "LLM calls mean/max",
                    "prompt tokens mean (max)",
                    "chars/4 mean",
                    "completion mean",
                    "turns w/ tools",
                    "speculative node selections discarded",
                    "saved by the similarity threshold (entered later)",
                ],
                [
                    [
                        t.agent,
                        str(t.turns),
                        _ms(t.wall_p50_ms, 0),
                        _ms(t.wall_p95_ms, 0),
                        f"{t.rounds_p50:g}/{t.rounds_max}",
                        f"{t.calls_mean:.1f}/{t.calls_max}",
                        f"{t.prompt_tokens_mean:,.0f} ({t.prompt_tokens_max:,})",
                        _n(t.prompt_est_mean),
                        _n(t.completion_tokens_mean),
                        str(t.tool_turns),
                        str(t.speculative_discarded),
                        f"{t.speculation_saved} ({t.speculation_late})",
                    ]
                    for t in result.turns
                ],
                [
                    f"Tokens: {result.tokenizer}. Rounds = distinct sequential LLM rounds on the "
                    "critical path (trace.llm_rounds). Calls, rounds and tokens do not depend on "
                    "latency; they are averaged over every in-memory turn of the agent."
                ],
            )
        )
    if result.overhead:
        out.append(
            Table(
                "Engine overhead per turn (zero-latency LLM): wall time minus the LLM's own time",
                ["agent", "ports", "turns", "p50 ms", "p95 ms", "max ms", "fake LLM CPU p50 ms"],
                [
                    [
                        o.agent,
                        o.ports,
                        str(o.turns),
                        _ms(o.p50_ms),
                        _ms(o.p95_ms),
                        _ms(o.max_ms),
                        _ms(o.llm_self_p50_ms),
                    ]
                    for o in result.overhead
                ],
                [
                    "One warm-up conversation per agent and port set is not counted. On moto the "
                    "store load/commit columns measure moto's in-process emulation of DynamoDB, "
                    "not network round trips. p95/max include generation-2 garbage-collection "
                    "pauses (100–250 ms measured on moto, whose in-memory tables grow as the run "
                    "writes items; smaller but present in memory with the large agents)."
                ],
            )
        )
        out.append(
            Table(
                "Overhead by stage, p50 ms (store load/commit measured around TurnEngine; "
                "the rest from trace.stages minus the fake LLM's CPU)",
                ["agent", "ports", *(STAGE_TITLES[s] for s in BREAKDOWN)],
                [
                    [o.agent, o.ports, *(_ms(o.stages_p50_ms.get(s), 2) for s in BREAKDOWN)]
                    for o in result.overhead
                ],
                [
                    "turn setup = TurnPipeline.run before the first stage (`TurnState.__init__`: node "
                    "views of every journey); other = TurnEngine serializing the trace, the glue "
                    "around the stores, and any stage this benchmark does not name."
                ],
            )
        )
    if result.scale:
        out.append(_scale(result))
    if result.reference:
        out.append(_reference(result))
    if result.embeddings:
        out.append(
            Table(
                "Embeddings in S3 (moto): publish, load and top-5",
                [
                    "vectors",
                    "dim",
                    "MB",
                    "write ms",
                    "cold load ms",
                    "revalidated load ms",
                    "warm hit ms",
                    "top-5 p50 ms",
                    "top-5 p95 ms",
                ],
                [
                    [
                        f"{e.vectors:,}",
                        str(e.dimensions),
                        f"{e.megabytes:.1f}",
                        _ms(e.write_ms, 0),
                        _ms(e.cold_load_ms, 1),
                        _ms(e.revalidated_load_ms, 1),
                        _ms(e.warm_hit_ms, 3),
                        _ms(e.topk_p50_ms, 2),
                        _ms(e.topk_p95_ms, 2),
                    ]
                    for e in result.embeddings
                ],
                [
                    "cold = GET + np.load + normalisation, no disk copy; revalidated = conditional "
                    "GET answered 304 + the disk copy; warm = already in this container. Write "
                    "time is publish-time only and dominated by moto's in-process S3 for large "
                    "bodies. Top-k varies between runs (≈0.5–8 ms at 10k on this shared 2-core "
                    "machine: multi-threaded BLAS and the loaded matrix's memory alignment)."
                ],
            )
        )
    if result.imports:
        out.append(
            Table(
                "Cold start: import time in a fresh process (median; .pyc present)",
                [
                    "module",
                    "role",
                    "status",
                    "median ms",
                    "min–max ms",
                    "CPU median ms",
                    "without .pyc, median ms",
                    "heaviest packages (ms)",
                ],
                [
                    [
                        r.module,
                        r.role,
                        r.status,
                        _ms(r.median_ms, 0),
                        f"{_ms(r.min_ms, 0)}–{_ms(r.max_ms, 0)}" if r.runs else "–",
                        _ms(r.cpu_median_ms, 0),
                        _ms(r.source_median_ms, 0),
                        ", ".join(
                            f"{m} {ms:g}" for m, ms in r.heaviest if m != r.module.split(".")[0]
                        )[:90]
                        or "–",
                    ]
                    for r in result.imports
                ],
                [
                    "Runs interleaved across modules. Wall time is the target's measure; CPU time "
                    "(time.process_time) ≈ wall: imports are CPU-bound, and other work on this "
                    "shared VM slows them too (the same module measured up to ~2× apart across "
                    "runs of one day). Heaviest packages: cumulative "
                    "`-X importtime` of each top-level package's first import (inflated "
                    "~1.3–1.5× by the instrumentation; overlapping). Without .pyc: the "
                    "handler imported with no bytecode to load (an empty `pycache_prefix`, `-B`), "
                    "so every module is compiled from source — what each Lambda cold start pays "
                    "when the read-only package ships no .pyc (the layer's Makefile compiles "
                    "them at `sam build`; docs/deploy.md §8)."
                ],
            )
        )
    if result.first_turn is not None:
        f = result.first_turn
        out.append(
            Table(
                "First turn in a fresh process (banking agent, in-memory ports, zero-latency LLM)",
                [
                    "status",
                    "runs",
                    "engine import ms",
                    "agent load ms",
                    "first turn ms",
                    "second turn ms",
                ],
                [
                    [
                        f.status,
                        str(f.runs),
                        _ms(f.import_ms, 0),
                        _ms(f.agent_ms, 0),
                        _ms(f.first_turn_ms, 1),
                        _ms(f.second_turn_ms, 1),
                    ]
                ],
                [
                    "Engine import = the engine, in-memory stores and the fake LLM; agent load = "
                    "the banking YAML parsed and validated; first vs second turn: what a cold container "
                    "pays once inside the turn (lazy imports, schema builds). In Lambda the "
                    "worker's first turn also creates boto3 clients and reads the snapshot and "
                    "embeddings: the next table."
                ],
            )
        )
    if result.cold_turn is not None:
        c = result.cold_turn
        names = ("import", "runtime", "snapshot", "vectors", "session", "turn", "commit")
        out.append(
            Table(
                "Cold turn: the first turn of a fresh worker process on the moto stack (median ms)",
                ["status", "runs", *names, "total without LLM", "fake LLM CPU (left out)"],
                [
                    [
                        c.status,
                        str(c.runs),
                        *(_ms(c.parts_ms.get(f"{n}_ms", 0.0), 0) for n in names),
                        _ms(c.total_ms, 0),
                        f"{_ms(c.llm_fake_ms, 1)} ({c.llm_calls} calls)",
                    ]
                ],
                [
                    "bench/cold_turn.py in a new interpreter against a threaded moto server that "
                    "holds the published banking agent (bench/coldstart.py): import = the worker's "
                    "turn path (engine, infra.runtime, the fake LLM); runtime = "
                    "`infra.runtime.Runtime` building the engine (boto3 imported and its clients "
                    "created here); snapshot = the agent read from DynamoDB; vectors = its "
                    "embeddings downloaded from S3 into an empty disk cache; session = the "
                    "session item created; turn = `TurnEngine.handle` minus the commit and the "
                    "fake LLM's own CPU (parsing its answers stays in); commit = the turn's "
                    "TransactWriteItems. moto answers over local HTTP: no network latency, but "
                    "its Python emulation costs CPU of this machine."
                ],
            )
        )
    if result.offline_cpu is not None:
        cpu = result.offline_cpu
        out.append(
            Table(
                "Offline model: CPU per call and per turn (banking seed conversation, in-memory ports)",
                [
                    "status",
                    "turns",
                    "model calls / turn",
                    "CPU per call p50 ms",
                    "CPU per call max ms",
                    "model CPU per turn ms",
                    "whole turn CPU p50 ms",
                ],
                [
                    [
                        cpu.status,
                        f"{cpu.turns} ({cpu.runs} runs)",
                        f"{cpu.calls_per_turn:.1f}",
                        _ms(cpu.call_p50_ms, 2),
                        _ms(cpu.call_max_ms, 2),
                        _ms(cpu.model_per_turn_ms, 2),
                        _ms(cpu.turn_p50_ms, 1),
                    ]
                ],
                [
                    "`bench/offline_cpu.py`: the offline model (`infra.offline`) answers every "
                    "schema of the turn; a call's CPU is `time.thread_time` around the model "
                    "only, a turn's is `time.process_time` around `TurnEngine.handle` (engine, "
                    "prompt building, verification, tools and the model). The first run warms "
                    "caches and is not counted. What `make demo`, `waypoint chat` and every "
                    "offline test pay per turn."
                ],
            )
        )
    if result.throughput is not None:
        t = result.throughput
        done = t.status.startswith("ok")
        out.append(
            Table(
                "Local throughput: concurrent sessions through the local HTTP server "
                f"(waypoint.local_server, fake LLM at {latency:g} ms per call)",
                [
                    "status",
                    "sessions",
                    "turns",
                    "seconds",
                    "turns/s",
                    "reply p50 ms",
                    "reply p95 ms",
                ],
                [
                    [
                        t.status,
                        str(t.sessions) if done else "–",
                        str(t.turns) if done else "–",
                        _ms(t.seconds) if done else "–",
                        _ms(t.turns_per_second, 2) if done else "–",
                        _ms(t.p50_ms, 0) if done else "–",
                        _ms(t.p95_ms, 0) if done else "–",
                    ]
                ],
                [
                    "Each turn is timed from the signed webhook POST to the signed reply callback "
                    "(generic channel): webhook → DynamoDB inbox → SQS FIFO → worker → outbox → "
                    "reply. Locally one poller feeds one worker, like a single Lambda instance, "
                    "so turns queue behind each other; on AWS the FIFO queue spreads sessions "
                    "(message groups) over concurrent workers."
                ],
            )
        )
    if result.profile:
        out.append(
            Table(
                f"Profile of the engine overhead: {result.profile_label}",
                ["function", "calls/turn", "own ms/turn", "cumulative ms/turn"],
                [
                    [p.function, f"{p.calls:,.1f}", _ms(p.own_ms, 2), _ms(p.cumulative_ms, 2)]
                    for p in result.profile
                ],
            )
        )
    return out


def _targets(result: BenchResult) -> Table:
    return Table(
        "Targets",
        ["target", "limit", "measured", "result", "margin"],
        [[t.name, t.limit, t.measured, t.status, t.margin] for t in result.targets],
    )


def _scale(result: BenchResult) -> Table:
    rows = []
    for r in result.scale:
        rows.append(
            [
                f"{r.guidelines:,}",
                str(r.journeys),
                str(r.global_guidelines),
                f"{r.evaluated_mean:,.0f}",
                f"{r.calls_mean:.1f}",
                str(r.rounds_max),
                f"{r.prompt_tokens_mean:,.0f}",
                f"{r.prompt_est_mean:,.0f}",
                "–" if math.isnan(r.ratio_vs_100) else f"{r.ratio_vs_100:.2f}×",
                f"{r.completion_tokens_mean:,.0f} ({r.critical_completion_mean:,.0f})",
                f"{_ms(r.overhead_p50_ms.get(IN_MEMORY))} / {_ms(r.overhead_p95_ms.get(IN_MEMORY))}",
                f"{_ms(r.overhead_p50_ms.get(MOTO))} / {_ms(r.overhead_p95_ms.get(MOTO))}",
            ]
        )
    return Table(
        "Scale: synthetic agents (most guidelines journey-scoped)",
        [
            "guidelines",
            "journeys",
            "agent-wide",
            "evaluated/turn",
            "LLM calls/turn",
            "rounds max",
            "prompt tokens/turn",
            "chars/4/turn",
            "vs 100",
            "completion tokens/turn (on the critical path)",
            "overhead p50/p95 ms in-memory",
            "overhead p50/p95 ms moto",
        ],
        rows,
        [
            "evaluated/turn = guideline verdicts the matcher produced: agent-wide guidelines and "
            "other journeys' conditions up to the recall caps (guideline_top_k = 30, "
            "condition_top_k = 20, the most similar to the conversation), scoped guidelines of "
            "the active or predicted journey only. Completion tokens on the critical path = the largest answer of each "
            "sequential round, summed: what a per-token latency waits for (see "
            "--latency-per-token-ms)."
        ],
    )


def _reference(result: BenchResult) -> Table:
    rows = []
    for r in result.reference:
        derived = " (derived)" if THEIRS[r.scenario].derived else ""
        rows.append(
            [
                r.scenario,
                f"{r.calls} / {r.theirs_calls}{derived}",
                f"{r.rounds} / {r.theirs_rounds}",
                f"{r.prompt_tokens:,} ({r.prompt_est:,}) / {r.theirs_prompt_tokens}",
                f"{r.completion_tokens:,}",
                _ms(r.wall_p50_ms, 0),
            ]
        )
    worker = next((i for i in result.imports if i.module == "functions.worker"), None)
    reference = reference_import(result.imports)
    theirs = (
        f"{_ms(reference.median_ms, 0)} ms (`import {REFERENCE_MODULE}`, this run)"
        if reference is not None
        else THEIR_IMPORT
    )
    if worker is not None:
        ours = f"{_ms(worker.median_ms, 0)} ms" if worker.status == "ok" else worker.status
        rows.append(
            [
                "import of the turn-serving code",
                "–",
                "–",
                f"{ours} (functions.worker) / {theirs}",
                "–",
                "–",
            ]
        )
    latency = result.config.get("latency_ms", 0)
    return Table(
        "Side by side with the reference implementation (ours / theirs)",
        [
            "scenario",
            "LLM calls",
            "rounds",
            "prompt tokens: ours tokenizer (chars/4) / theirs chars/4",
            "completion tokens (ours)",
            f"our wall p50 ms @ {latency:g} ms/call",
        ],
        rows,
        [
            "Theirs: shared/notes/reference-engine.md §2 (30 guidelines + 1 active journey + 1 "
            "tool call ≈ 19–22 calls, 3 rounds, 60–70k prompt tokens as chars/4; import 4–4.5 s). "
            "'derived' = our arithmetic from that section's per-call prompt sizes (see "
            "bench/reference_figures.py), not a measurement."
        ],
    )


# --------------------------------------------------------------------------------------------------
# Rendering


def render_text(table: Table) -> str:
    widths = [len(h) for h in table.headers]
    for row in table.rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    line = "  ".join("-" * w for w in widths)
    out = [table.title, "=" * len(table.title)]
    out.append("  ".join(h.ljust(w) for h, w in zip(table.headers, widths, strict=True)))
    out.append(line)
    for row in table.rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    out.extend(f"  note: {n}" for n in table.notes)
    return "\n".join(out)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(table: Table, level: str = "###") -> str:
    out = [f"{level} {table.title}", ""]
    out.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
    out.append("|" + "|".join("---" for _ in table.headers) + "|")
    for row in table.rows:
        out.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    if table.notes:
        out.append("")
        out.extend(f"_{n}_" for n in table.notes)
    return "\n".join(out)


def console_report(result: BenchResult, selected: Sequence[str] | None = None) -> str:
    parts = [render_text(t) for t in tables(result)]
    misses = [t for t in result.targets if t.status == "MISS"]
    if misses:
        parts.append("Misses (why / fix): see docs/BENCHMARKS.md")
    parts.append(f"finished in {result.duration_s:.0f} s")
    return "\n\n".join(parts)
