"""The report's tables of what a turn costs: LLM calls, rounds and tokens per turn; the engine's
own overhead and its stages; how both scale with the number of guidelines; the reference's
scenarios side by side with its figures; the offline model's CPU; the overhead's profile."""

from __future__ import annotations

import math
from collections.abc import Callable

from bench.coldstart import REFERENCE_MODULE, reference_import
from bench.harness import BREAKDOWN
from bench.offline_cpu import OfflineCpuRow
from bench.ports import IN_MEMORY, MOTO
from bench.reference_figures import THEIR_IMPORT, THEIRS
from bench.results import BenchResult, OverheadSummary
from bench.table import Table, count_cell, ms_cell

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


def per_turn_table(result: BenchResult) -> Table:
    """LLM calls, rounds and tokens per turn of each agent under the latency model."""
    latency = result.config.get("latency_ms", 0)
    return Table(
        f"Per turn with the latency model ({latency:g} ms per LLM call), in-memory ports",
        [
            "agent",
            "turns",
            "wall p50 ms",
            "wall p95 ms",
            "rounds p50/max",
            "LLM calls mean/max",
            "prompt tokens/turn mean (max)",
            "completion tokens/turn mean (max)",
            "per call: prompt / completion mean (largest answer)",
            "chars/4 mean",
            "turns w/ tools",
            "speculative node selections discarded",
            "saved by the similarity threshold (entered later)",
        ],
        [
            [
                t.agent,
                str(t.turns),
                ms_cell(t.wall_p50_ms, 0),
                ms_cell(t.wall_p95_ms, 0),
                f"{t.rounds_p50:g}/{t.rounds_max}",
                f"{t.calls_mean:.1f}/{t.calls_max}",
                f"{t.prompt_tokens_mean:,.0f} ({t.prompt_tokens_max:,})",
                f"{t.completion_tokens_mean:,.0f} ({t.completion_tokens_max:,})",
                f"{t.prompt_per_call:,.0f} / {t.completion_per_call:,.0f} "
                f"({t.completion_max_call:,})",
                count_cell(t.prompt_est_mean),
                str(t.tool_turns),
                str(t.speculative_discarded),
                f"{t.speculation_saved} ({t.speculation_late})",
            ]
            for t in result.turns
        ],
        [
            f"Tokens: {result.tokenizer}. Rounds = distinct sequential LLM rounds on the "
            "critical path (trace.llm_rounds). Calls, rounds and tokens do not depend on "
            "latency; they are averaged over every in-memory turn of the agent. Completion = "
            "the output tokens of the turn's calls (each call's record in the trace); per call "
            "= the agent's tokens over its calls."
        ],
    )


def overhead_table(result: BenchResult) -> Table:
    """The engine's own time per turn (zero-latency LLM), per agent and port set."""
    return Table(
        "Engine overhead per turn (zero-latency LLM): wall time minus the LLM's own time",
        ["agent", "ports", "turns", "p50 ms", "p95 ms", "max ms", "fake LLM CPU p50 ms"],
        [
            [
                o.agent,
                o.ports,
                str(o.turns),
                ms_cell(o.p50_ms),
                ms_cell(o.p95_ms),
                ms_cell(o.max_ms),
                ms_cell(o.llm_self_p50_ms),
            ]
            for o in result.overhead
        ],
        [
            "One warm-up conversation per agent and port set is not counted; in memory, each "
            "agent runs in a fresh process of its own. On moto the "
            "store load/commit columns measure moto's in-process emulation of DynamoDB, "
            "not network round trips. p95/max include generation-2 garbage-collection "
            "pauses (100–250 ms measured on moto, whose in-memory tables grow as the run "
            "writes items; smaller but present in memory with the large agents)."
        ],
    )


def stages_table(result: BenchResult) -> Table:
    """The overhead split by pipeline stage, per agent and port set."""
    return Table(
        "Overhead by stage, p50 ms (store load/commit measured around TurnEngine; "
        "the rest from trace.stages minus the fake LLM's CPU)",
        ["agent", "ports", *(STAGE_TITLES[s] for s in BREAKDOWN)],
        [
            [o.agent, o.ports, *(ms_cell(o.stages_p50_ms.get(s), 2) for s in BREAKDOWN)]
            for o in result.overhead
        ],
        [
            "turn setup = TurnPipeline.run before the first stage (`TurnState.__init__`: node "
            "views of every journey); other = TurnEngine serializing the trace, the glue "
            "around the stores, and any stage this benchmark does not name."
        ],
    )


def values_table(result: BenchResult) -> Table:
    """What reading and grounding values costs a turn (`engine.values`), per agent."""
    return _part_of_overhead_table(
        result,
        "Values: reading the customer's words as types, binding answers and grounding every "
        "tool argument (trace.values_ms), per turn",
        "values",
        lambda o: (o.values_p50_ms, o.values_p95_ms, o.values_share_p50),
        2,
        "Part of the stages above (match, tools), not added to them: the time inside "
        "`bind_answers` (node selection's values) and `ground_call` (the action gate), "
        "summed over the turn. The share is the median of each turn's values time over its "
        "overhead (zero-latency LLM, the fake's own CPU excluded).",
    )


def language_table(result: BenchResult) -> Table:
    """What detecting each message's language costs a turn (`engine.language`), per agent."""
    return _part_of_overhead_table(
        result,
        "Language detection: each customer message's language, per turn (trace.language_ms)",
        "detection",
        lambda o: (o.language_p50_ms, o.language_p95_ms, o.language_share_p50),
        3,
        "Part of the load stage, not added to it: `detect` over the turn's messages (one "
        "per benchmark turn, so per turn = per message), warm; the warm-up conversation pays "
        "the first message's model load (≈ 40 ms, docs/languages.md). Within a turn a message "
        "costs more than alone (≈ 20–70 µs in `python -m bench languages`): the model's "
        "tables are no longer in the CPU's caches; p95 also catches garbage-collection "
        "pauses. The share is the median of each turn's detection time over its overhead "
        "(zero-latency LLM).",
    )


def _part_of_overhead_table(
    result: BenchResult,
    title: str,
    label: str,
    part: Callable[[OverheadSummary], tuple[float, float, float]],
    digits: int,
    note: str,
) -> Table:
    """A part of each agent's engine overhead: its p50 and p95, and its share of the overhead."""
    rows = []
    for o in result.overhead:
        p50, p95, share = part(o)
        rows.append(
            [
                o.agent,
                o.ports,
                ms_cell(p50, digits),
                ms_cell(p95, digits),
                f"{100 * share:.1f}%",
                ms_cell(o.p50_ms, 1),
            ]
        )
    return Table(
        title,
        [
            "agent",
            "ports",
            f"{label} p50 ms",
            f"{label} p95 ms",
            "share of overhead p50",
            "overhead p50",
        ],
        rows,
        [note],
    )


def scale_table(result: BenchResult) -> Table:
    """The synthetic agents from 10 to 5,000 guidelines, of both shapes: what a turn evaluates,
    asks and costs."""
    rows = []
    for r in result.scale:
        rows.append(
            [
                r.shape,
                f"{r.guidelines:,}",
                str(r.journeys),
                f"{r.global_guidelines:,}",
                f"{r.evaluated_mean:,.0f}",
                f"{r.calls_mean:.1f}",
                str(r.rounds_max),
                f"{r.prompt_tokens_mean:,.0f} ({_per_call(r.prompt_tokens_mean, r.calls_mean)})",
                f"{r.prompt_est_mean:,.0f}",
                "–" if math.isnan(r.ratio_vs_100) else f"{r.ratio_vs_100:.2f}×",
                f"{r.completion_tokens_mean:,.0f} "
                f"({_per_call(r.completion_tokens_mean, r.calls_mean)})",
                f"{r.critical_completion_mean:,.0f}",
                f"{ms_cell(r.overhead_p50_ms.get(IN_MEMORY))} / {ms_cell(r.overhead_p95_ms.get(IN_MEMORY))}",
                f"{ms_cell(r.overhead_p50_ms.get(MOTO))} / {ms_cell(r.overhead_p95_ms.get(MOTO))}",
            ]
        )
    return Table(
        "Scale: synthetic agents of two shapes (most guidelines journey-scoped; all agent-wide)",
        [
            "shape",
            "guidelines",
            "journeys",
            "agent-wide",
            "evaluated/turn",
            "LLM calls/turn",
            "rounds max",
            "prompt tokens/turn (per call)",
            "chars/4/turn",
            "vs 100",
            "completion tokens/turn (per call)",
            "completion on the critical path",
            "overhead p50/p95 ms in-memory",
            "overhead p50/p95 ms moto",
        ],
        rows,
        [
            "Shapes (bench/scale_agents.py): mostly journey-scoped = a share of the guidelines "
            "agent-wide (half at 10, 5% at 5,000), the rest spread over the journeys (as in real "
            "agents); all agent-wide = "
            "no guideline scoped to a journey, so recall ranks every one of them each turn. "
            "vs 100 = prompt tokens against the 100-guideline agent of the same shape. "
            "evaluated/turn = guideline verdicts the matcher produced: agent-wide guidelines and "
            "other journeys' conditions up to the recall caps (guideline_top_k = 30, "
            "condition_top_k = 20, the most similar to the conversation), scoped guidelines of "
            "the active or predicted journey only. Completion tokens on the critical path = the largest answer of each "
            "sequential round, summed: what a per-token latency waits for (see "
            "--latency-per-token-ms)."
        ],
    )


def _per_call(tokens_per_turn: float, calls_per_turn: float) -> str:
    return f"{tokens_per_turn / calls_per_turn:,.0f}" if calls_per_turn else "–"


def tokens_per_call_table(result: BenchResult) -> Table:
    """Prompt and completion tokens of one LLM call, by schema, over the run's turns."""
    calls: dict[str, int] = {}
    prompt: dict[str, int] = {}
    completion: dict[str, int] = {}
    for sample in result.samples:
        for schema, n in sample.calls_by_schema.items():
            calls[schema] = calls.get(schema, 0) + n
            prompt[schema] = prompt.get(schema, 0) + sample.prompt_by_schema.get(schema, 0)
            completion[schema] = completion.get(schema, 0) + sample.completion_by_schema.get(
                schema, 0
            )
    turns = len(result.samples)
    rows = [
        [
            schema,
            f"{n:,}",
            f"{n / turns:.2f}",
            f"{prompt[schema] / n:,.0f}",
            f"{completion[schema] / n:,.0f}",
            f"{prompt[schema] / turns:,.0f} / {completion[schema] / turns:,.0f}",
        ]
        for schema, n in sorted(calls.items(), key=lambda kv: -kv[1])
    ]
    total = sum(calls.values())
    if total:
        rows.append(
            [
                "every call",
                f"{total:,}",
                f"{total / turns:.2f}",
                f"{sum(prompt.values()) / total:,.0f}",
                f"{sum(completion.values()) / total:,.0f}",
                f"{sum(prompt.values()) / turns:,.0f} / {sum(completion.values()) / turns:,.0f}",
            ]
        )
    return Table(
        "Tokens per LLM call, by schema (every turn of the latency-model run)",
        [
            "schema",
            "calls",
            "calls/turn",
            "prompt tokens/call",
            "completion tokens/call",
            "prompt / completion tokens per turn",
        ],
        rows,
        [
            f"Over the {turns:,} turns of the first pass (banking, every synthetic agent, the "
            "reference's scenarios). Completion = the output tokens of each call as its trace "
            f"record counts them ({result.tokenizer}). The fake writes short fixed rationales: "
            "completion here is the structure each schema asks for, not a real model's longer "
            "rationales (docs/prompts.md estimates those)."
        ],
    )


def reference_table(result: BenchResult) -> Table:
    """The reference's scenarios rebuilt as our agents, beside the reference's published figures."""
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
                ms_cell(r.wall_p50_ms, 0),
            ]
        )
    worker = next((i for i in result.imports if i.module == "functions.worker"), None)
    reference = reference_import(result.imports)
    theirs = (
        f"{ms_cell(reference.median_ms, 0)} ms (`import {REFERENCE_MODULE}`, this run)"
        if reference is not None
        else THEIR_IMPORT
    )
    if worker is not None:
        ours = f"{ms_cell(worker.median_ms, 0)} ms" if worker.status == "ok" else worker.status
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


def offline_cpu_table(cpu: OfflineCpuRow) -> Table:
    """The offline model's CPU per call and per turn (what `make demo` and tests pay)."""
    return Table(
        "Offline model: CPU per call and per turn (banking seed conversation, in-memory ports)",
        [
            "status",
            "turns",
            "model calls / turn",
            "CPU per call p50 ms",
            "CPU per call max ms",
            "model CPU per turn ms",
            "whole turn CPU p50 ms",
            "turn on 40,000 characters ms",
        ],
        [
            [
                cpu.status,
                f"{cpu.turns} ({cpu.runs} runs)",
                f"{cpu.calls_per_turn:.1f}",
                ms_cell(cpu.call_p50_ms, 2),
                ms_cell(cpu.call_max_ms, 2),
                ms_cell(cpu.model_per_turn_ms, 2),
                ms_cell(cpu.turn_p50_ms, 1),
                ms_cell(cpu.limit_turn_ms, 0),
            ]
        ],
        [
            "`bench/offline_cpu.py`: the offline model (`infra.offline`) answers every "
            "schema of the turn; a call's CPU is `time.thread_time` around the model "
            "only, a turn's is `time.process_time` around `TurnEngine.handle` (engine, "
            "prompt building, verification, tools and the model). The first run warms "
            "caches and is not counted. What `make demo`, `waypoint chat` and every "
            "offline test pay per turn. The last column: one turn (after the greeting) on a "
            "message at the inbound limit, 40,000 characters of number words — the model "
            "reads in linear time what once took ~110 s (issue #33)."
        ],
    )


def profile_table(result: BenchResult) -> Table:
    """Where the engine's overhead goes, by function, per turn."""
    return Table(
        f"Profile of the engine overhead: {result.profile_label}",
        ["function", "calls/turn", "own ms/turn", "cumulative ms/turn"],
        [
            [p.function, f"{p.calls:,.1f}", ms_cell(p.own_ms, 2), ms_cell(p.cumulative_ms, 2)]
            for p in result.profile
        ],
    )
