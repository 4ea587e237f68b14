"""The quality bars of shared/DESIGN.md as numbers, checked against a run.

Each target reports PASS / MISS with the margin; a MISS carries why (from profiling and the
traces) and what would fix it. The explanations are written against the engine as it stood when
this benchmark was written — the numbers in them are filled from the run.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.coldstart import FASTAPI_FLOOR, REFERENCE_MODULE, reference_import
from bench.harness import TurnSample
from bench.ports import IN_MEMORY, MOTO
from bench.reference_figures import THEIR_IMPORT, THEIR_IMPORT_MS
from bench.results import BenchResult, ImportRow, TargetResult

OVERHEAD_AT = 1_000
OVERHEAD_LIMIT_MS = 40.0
# At 5,000 guidelines recall must cost what it keeps (per-version index): 11.6 / 19.3 ms before;
# for both shapes of the synthetic agents (all agent-wide: ≈ 14 ms p50 before preselection
# was answered from the index, engine.recall.preselection).
LARGE_AT = 5_000
LARGE_P50_MS = 5.0
LARGE_P95_MS = 10.0
ROUNDS_WITHOUT_TOOLS = 2
ROUNDS_WITH_TOOLS = 3
SCENARIO_CALLS = 3  # issue #22: one packed matching call, node selection, composition
SCENARIO_TOKENS = 5_000  # issue #23: the judgement guidance must stay this compact
GROWTH_LIMIT = 2.0
# Speculative node selections the turn did not use, per turn over the banking and synthetic
# runs (0.14 before the similarity threshold: 12 in 84 turns).
DISCARDED_PER_TURN = 0.1
COLD_TURN_MS = 1_000.0
# A cold Lambda container of the worker: init phase + the handler's first invocation, model time
# left out (issue #34).
COLD_HANDLER_MS = 1_000.0
WEBHOOK_IMPORT_MS = 600.0
WORKER_IMPORT_MS = 350.0
# A handler imports in at most a share of the reference SDK's `import parlant.sdk`: measured in
# the same run when `python -m bench compare` has installed it, else the low end of its last
# measurements here (`THEIR_IMPORT_MS`), so the limit is the stricter one. The customer's path
# (webhook, turn worker, tool task — and every other handler but the management API) is held to
# 0.15×; the management API, which only operators call, to 0.25× (decided in #34: its floor,
# FastAPI + Mangum, is ≈ 0.13× by itself).
HANDLER_IMPORT_SHARE = 0.15
MANAGEMENT_MODULE = "functions.management"
MANAGEMENT_IMPORT_SHARE = 0.25


def handler_import_share(module: str) -> float:
    """The share of the reference's import a handler module may take."""
    return MANAGEMENT_IMPORT_SHARE if module == MANAGEMENT_MODULE else HANDLER_IMPORT_SHARE


def reference_import_ms(imports: Sequence[ImportRow]) -> tuple[float, str]:
    """What the handler-import targets divide by, and where it comes from."""
    measured = reference_import(imports)
    if measured is not None and measured.median_ms:
        theirs = measured.median_ms
        return theirs, f"`import {REFERENCE_MODULE}` measured in this run: {theirs:,.0f} ms median"
    return THEIR_IMPORT_MS[0], (
        f"`import {REFERENCE_MODULE}`, {THEIR_IMPORT} — not measured in this run: "
        "`python -m bench compare` installs it"
    )


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _margin(value: float, limit: float, unit: str = "") -> str:
    if limit == 0:
        return ""
    delta = value - limit
    pct = abs(delta) / limit * 100
    if delta == 0:
        return "at the limit"
    if delta < 0:
        return f"{_number(-delta)}{unit} under the limit ({pct:.0f}% headroom)"
    return f"{_number(delta)}{unit} over the limit (+{pct:.0f}%)"


def _status(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def evaluate(result: BenchResult) -> list[TargetResult]:
    return [
        t
        for t in (
            _overhead(result),
            *_large_overhead(result),
            _rounds(result.samples, tools=False),
            _rounds(result.samples, tools=True),
            *_scenario(result),
            _speculation(result),
            *_growth(result),
            _cold_turn(result),
            _cold_handler(result),
            _import(result, "functions.webhook", WEBHOOK_IMPORT_MS),
            _import(result, "functions.worker", WORKER_IMPORT_MS),
            *_handlers_vs_reference(result),
        )
        if t is not None
    ]


def _overhead(result: BenchResult) -> TargetResult | None:
    label = next((r.label for r in result.scale if r.guidelines == OVERHEAD_AT), None)
    row = next((o for o in result.overhead if o.agent == label and o.ports == IN_MEMORY), None)
    if row is None:
        return None
    moto = next((o for o in result.overhead if o.agent == label and o.ports == MOTO), None)
    measured = f"p50 {row.p50_ms:.1f} ms (p95 {row.p95_ms:.1f} ms)"
    if moto is not None:
        measured += f"; on moto p50 {moto.p50_ms:.1f} ms"
    ok = row.p50_ms <= OVERHEAD_LIMIT_MS
    return TargetResult(
        name=f"engine overhead per turn at {OVERHEAD_AT:,} guidelines (in-memory ports)",
        limit=f"p50 ≤ {OVERHEAD_LIMIT_MS:g} ms",
        measured=measured,
        status=_status(ok),
        margin=_margin(row.p50_ms, OVERHEAD_LIMIT_MS, " ms"),
        why="" if ok else WHY["overhead"],
        fix="" if ok else FIX["overhead"],
    )


def _large_overhead(result: BenchResult) -> list[TargetResult]:
    """One target per shape of the 5,000-guideline agents (mostly journey-scoped; all
    agent-wide)."""
    out = []
    for scale in (r for r in result.scale if r.guidelines == LARGE_AT):
        row = next(
            (o for o in result.overhead if o.agent == scale.label and o.ports == IN_MEMORY), None
        )
        if row is None:
            continue
        ok = row.p50_ms <= LARGE_P50_MS and row.p95_ms <= LARGE_P95_MS
        recall = row.stages_p50_ms.get("recall", 0.0)
        out.append(
            TargetResult(
                name=f"engine overhead per turn at {LARGE_AT:,} guidelines, {scale.shape} "
                "(in-memory ports)",
                limit=f"p50 ≤ {LARGE_P50_MS:g} ms, p95 ≤ {LARGE_P95_MS:g} ms",
                measured=f"p50 {row.p50_ms:.1f} ms, p95 {row.p95_ms:.1f} ms (recall p50 "
                f"{recall:.2f} ms)",
                status=_status(ok),
                margin=f"p50 {_margin(row.p50_ms, LARGE_P50_MS, ' ms')}; "
                f"p95 {_margin(row.p95_ms, LARGE_P95_MS, ' ms')}",
                why="" if ok else WHY["overhead"],
                fix="" if ok else FIX["overhead"],
            )
        )
    return out


def _describe(sample: TurnSample) -> str:
    rounds = "; ".join(sample.rounds_detail)
    return f"{sample.agent} turn {sample.turn + 1} {sample.message!r}: {sample.llm_rounds} rounds ({rounds})"


def _rounds(samples: Sequence[TurnSample], *, tools: bool) -> TargetResult | None:
    chosen = [s for s in samples if s.used_tools == tools]
    if not chosen:
        return None
    limit = ROUNDS_WITH_TOOLS if tools else ROUNDS_WITHOUT_TOOLS
    worst = max(s.llm_rounds for s in chosen)
    over = [s for s in chosen if s.llm_rounds > limit]
    distinct = list({(s.agent, s.turn): s for s in over}.values())
    measured = f"max {worst} over {len(chosen)} turns"
    if over:
        measured += f"; {len(over)} turns above: " + "; ".join(_describe(s) for s in distinct[:3])
    key = "rounds_tools" if tools else "rounds"
    return TargetResult(
        name="sequential LLM rounds per turn " + ("with tools" if tools else "without tools"),
        limit=f"≤ {limit}",
        measured=measured,
        status=_status(not over),
        margin=_margin(worst, limit, " rounds"),
        why=WHY[key] if over else "",
        fix=FIX[key] if over else "",
    )


def _scenario(result: BenchResult) -> list[TargetResult]:
    row = next((r for r in result.reference if r.scenario == "tool_via_guideline"), None)
    if row is None:
        return []
    calls_ok = row.calls <= SCENARIO_CALLS
    tokens_ok = row.prompt_tokens <= SCENARIO_TOKENS
    schemas = ", ".join(f"{n} {k}" for k, n in sorted(row.calls_by_schema.items()))
    return [
        TargetResult(
            name="the reference's 30-guideline scenario: LLM calls per turn",
            limit=f"≤ {SCENARIO_CALLS}",
            measured=f"{row.calls} ({schemas}); reference: {row.theirs_calls}",
            status=_status(calls_ok),
            margin=_margin(row.calls, SCENARIO_CALLS, " calls"),
            why="" if calls_ok else WHY["scenario_calls"],
            fix="" if calls_ok else FIX["scenario_calls"],
        ),
        TargetResult(
            name="the reference's 30-guideline scenario: prompt tokens per turn",
            limit=f"≤ {SCENARIO_TOKENS:,}",
            measured=f"{row.prompt_tokens:,} ({row.prompt_est:,} as chars/4); reference: "
            f"{row.theirs_prompt_tokens} (chars/4)",
            status=_status(tokens_ok),
            margin=_margin(row.prompt_tokens, SCENARIO_TOKENS, " tokens"),
        ),
    ]


def _speculation(result: BenchResult) -> TargetResult | None:
    rows = [t for t in result.turns if not t.agent.startswith("reference")]
    turns = sum(t.turns for t in rows)
    if not turns:
        return None
    discarded = sum(t.speculative_discarded for t in rows)
    saved = sum(t.speculation_saved for t in rows)
    late = sum(t.speculation_late for t in rows)
    rate = discarded / turns
    ok = rate <= DISCARDED_PER_TURN
    return TargetResult(
        name="speculative node selections discarded (banking + synthetic runs)",
        limit=f"≤ {DISCARDED_PER_TURN:g} per turn",
        measured=f"{rate:.3f} per turn ({discarded} in {turns} turns); the similarity threshold "
        f"saved {saved} calls, {late} unpredicted journeys entered in a later round",
        status=_status(ok),
        margin=_margin(rate, DISCARDED_PER_TURN, " per turn"),
        why="" if ok else WHY["speculation"],
        fix="" if ok else FIX["speculation"],
    )


def _growth(result: BenchResult) -> list[TargetResult]:
    """Prompt tokens at 5,000 guidelines vs 100, for each shape of the synthetic agents."""
    out = []
    for big in (r for r in result.scale if r.guidelines == 5_000):
        small = next(
            (r for r in result.scale if r.guidelines == 100 and r.shape == big.shape), None
        )
        if small is None or not small.prompt_tokens_mean:
            continue
        ratio = big.prompt_tokens_mean / small.prompt_tokens_mean
        ok = ratio <= GROWTH_LIMIT
        out.append(
            TargetResult(
                name=f"prompt tokens per turn at 5,000 guidelines vs 100, {big.shape}",
                limit=f"≤ {GROWTH_LIMIT:g}×",
                measured=f"{ratio:.2f}× ({big.prompt_tokens_mean:,.0f} vs "
                f"{small.prompt_tokens_mean:,.0f} tokens, {big.completion_tokens_mean:,.0f} vs "
                f"{small.completion_tokens_mean:,.0f} completion; {big.calls_mean:.1f} vs "
                f"{small.calls_mean:.1f} calls; the matcher saw {big.evaluated_mean:,.0f} vs "
                f"{small.evaluated_mean:,.0f} guidelines per turn)",
                status=_status(ok),
                margin=_margin(ratio, GROWTH_LIMIT, "×"),
                why="" if ok else WHY["growth"],
                fix="" if ok else FIX["growth"],
            )
        )
    return out


def _import(result: BenchResult, module: str, limit: float) -> TargetResult:
    row = next((r for r in result.imports if r.module == module), None)
    name = f"import {module} in a fresh process"
    if row is None or row.status != "ok" or row.median_ms is None:
        status = row.status if row is not None else "not measured"
        return TargetResult(name, f"≤ {limit:g} ms", status, "PENDING", "")
    ok = row.median_ms <= limit
    heavy = ", ".join(f"{m} {ms:g}" for m, ms in row.heaviest[:4])
    return TargetResult(
        name=name,
        limit=f"≤ {limit:g} ms (median of {row.runs})",
        measured=f"{row.median_ms:.0f} ms (min {row.min_ms:.0f}, max {row.max_ms:.0f}; CPU "
        f"{row.cpu_median_ms or 0:.0f} ms)",
        status=_status(ok),
        margin=_margin(row.median_ms, limit, " ms"),
        why="" if ok else WHY["import"].format(module=module, heavy=heavy),
        fix="" if ok else IMPORT_FIX.get(module, ""),
    )


def _cold_turn(result: BenchResult) -> TargetResult | None:
    row = result.cold_turn
    if row is None:
        return None
    name = "cold turn on moto: a fresh worker process's first turn, without LLM time"
    if row.status != "ok":
        return TargetResult(name, f"≤ {COLD_TURN_MS:,.0f} ms", row.status, "PENDING", "")
    ok = row.total_ms <= COLD_TURN_MS
    parts = ", ".join(f"{p[:-3]} {ms:.0f}" for p, ms in row.parts_ms.items())
    return TargetResult(
        name=name,
        limit=f"≤ {COLD_TURN_MS:,.0f} ms (median of {row.runs})",
        measured=f"{row.total_ms:,.0f} ms ({parts} ms)",
        status=_status(ok),
        margin=_margin(row.total_ms, COLD_TURN_MS, " ms"),
        why="" if ok else WHY["cold_turn"],
        fix="" if ok else FIX["cold_turn"],
    )


def _cold_handler(result: BenchResult) -> TargetResult | None:
    row = result.cold_turn.handler if result.cold_turn is not None else None
    if row is None:
        return None
    name = (
        "cold turn through the worker handler: Lambda init + first invocation, without model time"
    )
    if row.status != "ok":
        return TargetResult(name, f"≤ {COLD_HANDLER_MS:,.0f} ms", row.status, "PENDING", "")
    ok = row.total_ms <= COLD_HANDLER_MS
    return TargetResult(
        name=name,
        limit=f"≤ {COLD_HANDLER_MS:,.0f} ms (median of {row.runs})",
        measured=f"{row.total_ms:,.0f} ms (init {row.init_ms:,.0f}, first invocation "
        f"{row.invocation_ms:,.0f} − model {row.model_ms:,.0f} ms)",
        status=_status(ok),
        margin=_margin(row.total_ms, COLD_HANDLER_MS, " ms"),
        why="" if ok else WHY["cold_handler"],
        fix="" if ok else FIX["cold_handler"],
    )


def _handlers_vs_reference(result: BenchResult) -> list[TargetResult]:
    """The customer's path (every handler but the management API) and the management API, each
    against its share of the reference SDK's import."""
    rows = [
        r
        for r in result.imports
        if r.module.startswith("functions.") and r.status == "ok" and r.median_ms is not None
    ]
    if not rows:
        return []
    theirs, basis = reference_import_ms(result.imports)
    floor = next(
        (r.median_ms for r in result.imports if r.module == FASTAPI_FLOOR and r.median_ms),
        None,
    )
    customers = [r for r in rows if r.module != MANAGEMENT_MODULE]
    management = [r for r in rows if r.module == MANAGEMENT_MODULE]
    out = []
    if customers:
        out.append(
            _import_share_target(
                f"the customer's path: each handler's import vs the reference SDK's ({basis})",
                customers,
                theirs,
                HANDLER_IMPORT_SHARE,
            )
        )
    if management:
        floor_note = (
            f"; floor, a one-route FastAPI + Mangum + Logger app: {floor:.0f} ms = "
            f"{floor / theirs:.3f}×"
            if floor
            else ""
        )
        out.append(
            _import_share_target(
                f"the management API's import (operators only) vs the reference SDK's ({basis})",
                management,
                theirs,
                MANAGEMENT_IMPORT_SHARE,
                floor_note,
            )
        )
    return out


def _import_share_target(
    name: str, rows: Sequence[ImportRow], theirs: float, share: float, note: str = ""
) -> TargetResult:
    limit = share * theirs
    worst = max(rows, key=lambda r: r.median_ms or 0.0)
    worst_ms = worst.median_ms or 0.0
    ok = worst_ms <= limit
    each = ", ".join(f"{r.module.split('.')[-1]} {r.median_ms:.0f}" for r in rows)
    measured = f"{worst.module} {worst_ms:.0f} ms = {worst_ms / theirs:.3f}×"
    if len(rows) > 1:
        measured = f"worst {measured} ({each} ms)"
    return TargetResult(
        name=name,
        limit=f"≤ {share:g}× = {limit:,.0f} ms (median)",
        measured=measured + note,
        status=_status(ok),
        margin=_margin(worst_ms, limit, " ms"),
        why="" if ok else WHY["import"].format(module=worst.module, heavy=worst.heaviest[:4]),
        fix="" if ok else IMPORT_FIX.get(worst.module, ""),
    )


# --------------------------------------------------------------------------------------------------
# Why a target is missed and what would fix it. Written from the traces and a cProfile of the
# engine as it stood when this benchmark was written (see the "Findings" section of the report).

WHY: dict[str, str] = {
    "overhead": (
        "See the profile table: the functions with the largest cumulative time per turn. Costs "
        "that grow with the agent rather than the turn (all guidelines, all journeys, all "
        "relationships walked per turn) are the usual cause; the first version of this "
        "benchmark found `relations.resolve` rebuilding its indexes on every call and node "
        "views of every journey built per turn (fixed in 6ac8dbb)."
    ),
    "rounds": (
        "Each extra round is listed above with what it asked. The usual causes: a journey entered "
        "with a node-selection call although the graph leaves no choice (a prerequisite, or a "
        "journey resumed after one); supplemental matching for a journey activated outside the "
        "round-1 prediction. The first version of this benchmark found the banking transfer's "
        "prerequisite (authenticate) entered in a supplemental round (fixed in 3ee74d0)."
    ),
    "rounds_tools": (
        "Rounds after the tools come from node selections the graph cannot decide alone — a "
        "tool step followed by a fork whose exits depend on the tool's result, a journey entered "
        "or resumed with an LLM call after a prerequisite completes — and from tool planning "
        "calls. The rounds of the offending turns are listed above."
    ),
    "scenario_calls": (
        "The calls are listed above by schema. Matching packs the observational, actionable and "
        "previously-applied guidelines into one `GuidelineMatchBatch` call only while together "
        "they fit `batch_prompt_budget_chars`; above it each kind gets its own parallel batches. "
        "Customer-dependent and disambiguation batches have their own schemas and calls."
    ),
    "growth": (
        "More is evaluated per turn than recall's caps suggest: check `guideline_top_k` and "
        "`condition_top_k` of the synthetic agents (bench/scale_agents.py) and the always-matched "
        "guidelines (pending, continuous applied, high criticality) in the traces; each batch "
        "also re-sends the shared context (conversation, variables, glossary)."
    ),
    "speculation": (
        "Predicted journeys the turn did not enter: see the per-turn table's discarded column. "
        "A prediction above `journey_min_similarity` that the turn does not enter is usually a "
        "journey whose prerequisite starts first, or an embedder whose similarities run higher "
        "than the offline one's."
    ),
    "cold_turn": (
        "See the cold-turn table: the imports and the runtime build (botocore imported, its "
        "DynamoDB/S3 service models loaded and clients created) dominate; the turn itself and "
        "the store round trips are tens of ms. On a loaded shared machine (see the load "
        "average) every part stretches alike."
    ),
    "import": "{module}: the heaviest packages it pulls in are {heavy} (ms, `-X importtime`).",
    "cold_handler": (
        "See the cold-turn table's handler row: the init is imports (the engine with pydantic "
        "and numpy; openai's client, ≈ 160 modules with its HTTP stack and ≈ 90 ms of CPU with "
        "the TLS context, its requests posted through the client rather than its chat and "
        "embeddings resources and its type packages and `openai.lib` deferred by "
        "`infra.llm.openai_import`; botocore, its models read into plain dicts and looked up "
        "per service by `infra.aws.service_models`; Powertools, its event classes deferred by "
        "`infra.deferred_init`) and client builds; the first invocation is the turn's store "
        "round trips and HTTP calls. On a loaded shared machine (see the load average) every "
        "part stretches alike: compare the CPU columns."
    ),
}

FIX: dict[str, str] = {
    "overhead": (
        "Keep per-turn work proportional to the turn: index what depends only on the agent "
        "version once (as `engine.matching.projection.projected_guidelines` and 6ac8dbb's caches do) and "
        "walk only the active entities per turn."
    ),
    "rounds": (
        "Enter journeys with `entry_step` wherever the graph leaves no choice and the customer's "
        "message cannot already answer the first step (prerequisites, resumed journeys); when "
        "the activated journey has unmet prerequisites, predict its first runnable prerequisite "
        "in round 1 instead of the journey itself."
    ),
    "rounds_tools": (
        "Use `entry_step` wherever a journey is entered or resumed after tools and the graph "
        "leaves no choice (`_resume_suspended` already does). A fork right after a tool step is "
        "a real judgement about the tool's result and keeps its round."
    ),
    "scenario_calls": (
        "Check the trace's batch labels: `packed[n]` is the single matching call; separate "
        "`observational[n]`/`actionable[n]` batches mean the guideline lines outgrew "
        "`batch_prompt_budget_chars` (raise it, or lower the recall caps)."
    ),
    "speculation": (
        "Raise `journey_min_similarity` for the embedder in use (calibrate it on the agent's own "
        "requests and closings), or predict a journey's first runnable prerequisite instead."
    ),
    "cold_turn": (
        "Create the boto3 clients during the Lambda init phase (module level in the worker, "
        "where Lambda gives a boosted CPU) rather than in the first invocation, and keep the "
        "vectors' disk cache in /tmp across invocations (it is)."
    ),
    "growth": (
        "Lower the recall caps (`guideline_top_k`, `condition_top_k`), or pack the batch kinds "
        "into fewer calls so the shared context is sent fewer times."
    ),
    "import": "",
    "cold_handler": (
        "Profile the init (`python -X importtime -m bench.cold_worker`) for imports the worker "
        "does not need. Measured and left when this was written (CPU, quiet machine): the TLS "
        "context's CA bundle (25–36 ms: `ssl.create_default_context` parses the system bundle; "
        "production's HTTPS needs it), the channels' `httpx` beside `openai`'s `httpx2` (54 "
        "modules, ≈ 18 ms), Waypoint's own classes at import (87 dataclasses ≈ 53 ms, 70 of "
        "them frozen; ≈ 70 pydantic models ≈ 80 ms), numpy (≈ 44 ms), botocore's endpoint data "
        "and S3 model parsed (1.25 + 1.4 MB of JSON, ≈ 16 ms), `botocore.docs` (≈ 8 ms), "
        "anyio's asyncio backend imported by the first request (≈ 12 ms). SnapStart or "
        "provisioned concurrency take the init off the customer's path entirely."
    ),
}

IMPORT_FIX = {
    "functions.webhook": (
        "The webhook is a Starlette app with Mangum (FastAPI's own toolkit, without `fastapi`'s "
        "import: its `routing` → `params` → `openapi.models` built ≈ 40 pydantic models, ≈ 200 "
        "ms); what is left is Starlette, pydantic, asyncio, the Powertools Logger and the channel "
        "and session models (`python -X importtime -c 'import functions.webhook'`). Look for a "
        "module it imports that a request does not need, or a model built at import that only a "
        "rare request validates."
    ),
    "functions.management": (
        "The management API's target is 0.25× (operators call it, not customers; decided in "
        "#34) because its floor under the fixed choice (FastAPI + Mangum on Lambda) is the "
        "cold-start table's `bench.fastapi_floor`, a one-route app with Mangum and the "
        "Powertools Logger: ≈ 0.13× of the reference's import by itself (FastAPI's `routing` → "
        "`params` → `openapi.models` and, at the first route, its `pydantic.v1` check). The "
        "management API adds its 21 routes' dependants and response fields (each route built "
        "once, its error responses declared by reference: `functions.route_table`, "
        "`management_errors.documented_response`), the models its responses name and its "
        "modules — ≈ 0.04× more. The agent model and builders, the handoff rules, value reading, "
        "the outbox, the platform adapters and PyYAML load with the requests that use them "
        "(tests/functions/test_management_openapi.py). Past 0.25×, look for what else a request "
        "does not need imported at module level."
    ),
    "functions.worker": (
        "The largest single item is the module-level `Tracer(service=...)`: constructing "
        "Powertools' Tracer "
        "imports `aws_xray_sdk` (≈ 400 ms alone on this machine; `auto_patch=False` and "
        "`disabled=True` do not avoid it). Build the tracer lazily on the first invocation and "
        "only when tracing is wanted, or rely on Lambda's active tracing (`Tracing: Active`, no "
        "SDK in the function) for the invocation segment. Measured when this benchmark was "
        "written: the worker module imports in ≈ 200–340 ms without a Tracer vs ≈ 450–550 ms "
        "with it (same machine, same minute)."
    ),
}
