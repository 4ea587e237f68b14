"""The report's tables of what a deployment pays around its turns: the agent's embeddings in S3,
the cold start (each handler's import, a fresh process's first turn, a fresh worker's first turn
on the moto stack) and the local stack's throughput."""

from __future__ import annotations

from bench.results import BenchResult, ColdTurnRow, FirstTurnRow, ImportRow, ThroughputRow
from bench.table import Table, ms_cell
from bench.targets import (
    HANDLER_IMPORT_SHARE,
    MANAGEMENT_IMPORT_SHARE,
    handler_import_share,
    reference_import_ms,
)


def embeddings_table(result: BenchResult) -> Table:
    """Publishing an agent's vectors to S3, loading them cold, revalidated and warm, and top-5."""
    return Table(
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
                ms_cell(e.write_ms, 0),
                ms_cell(e.cold_load_ms, 1),
                ms_cell(e.revalidated_load_ms, 1),
                ms_cell(e.warm_hit_ms, 3),
                ms_cell(e.topk_p50_ms, 2),
                ms_cell(e.topk_p95_ms, 2),
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


def imports_table(result: BenchResult) -> Table:
    """Each module's import in a fresh process (with and without .pyc), its share of the
    reference SDK's import against its target, and its heaviest packages."""
    theirs, basis = reference_import_ms(result.imports)

    def share(r: ImportRow) -> str:
        if not r.module.startswith("functions.") or r.median_ms is None:
            return "–"
        return f"{r.median_ms / theirs:.3f}× (≤ {handler_import_share(r.module):g}×)"

    return Table(
        "Cold start: import time in a fresh process (median; .pyc present)",
        [
            "module",
            "role",
            "status",
            "median ms",
            "min–max ms",
            "CPU median ms",
            "share of the reference's import (target)",
            "without .pyc, median ms",
            "heaviest packages (ms)",
        ],
        [
            [
                r.module,
                r.role,
                r.status,
                ms_cell(r.median_ms, 0),
                f"{ms_cell(r.min_ms, 0)}–{ms_cell(r.max_ms, 0)}" if r.runs else "–",
                ms_cell(r.cpu_median_ms, 0),
                share(r),
                ms_cell(r.source_median_ms, 0),
                ", ".join(f"{m} {ms:g}" for m, ms in r.heaviest if m != r.module.split(".")[0])[:90]
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
            "them at `sam build`; docs/deploy.md §8). Share = the handler's median over "
            f"{basis}; targets (bench/targets.py): the customer's path (webhook, turn worker, "
            f"tool task and the other handlers) ≤ {HANDLER_IMPORT_SHARE:g}×, the management "
            f"API, which only operators call, ≤ {MANAGEMENT_IMPORT_SHARE:g}×."
        ],
    )


def first_turn_table(first: FirstTurnRow) -> Table:
    """A fresh process's engine import, agent load and first two turns (in-memory ports)."""
    return Table(
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
                first.status,
                str(first.runs),
                ms_cell(first.import_ms, 0),
                ms_cell(first.agent_ms, 0),
                ms_cell(first.first_turn_ms, 1),
                ms_cell(first.second_turn_ms, 1),
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


def cold_turn_table(cold: ColdTurnRow) -> Table:
    """A fresh worker's first turn on the moto stack: through the real handler in a Lambda
    container (init phase, then the first invocation), and the engine's path alone, part by
    part."""
    rows = []
    handler = cold.handler
    if handler is not None:
        rows.append(
            [
                "handler: functions.worker.handler in a Lambda container",
                handler.status,
                str(handler.runs),
                ms_cell(handler.init_ms, 0),
                ms_cell(handler.invocation_ms, 0),
                ms_cell(handler.model_ms, 0),
                ms_cell(handler.total_ms, 0),
                f"CPU: init {ms_cell(handler.init_cpu_ms, 0)}, first invocation "
                f"{ms_cell(handler.invocation_cpu_ms, 0)}; openai imported in the first "
                f"invocation: {'yes' if handler.openai_in_invocation else 'no'}",
            ]
        )
    names = ("import", "runtime", "snapshot", "vectors", "session", "turn", "commit")
    parts = ", ".join(f"{n} {ms_cell(cold.parts_ms.get(f'{n}_ms', 0.0), 0)}" for n in names)
    rows.append(
        [
            "engine path (bench/cold_turn.py): no handler, no openai, no channel",
            cold.status,
            str(cold.runs),
            ms_cell(cold.parts_ms.get("import_ms", 0.0) + cold.parts_ms.get("runtime_ms", 0.0), 0),
            ms_cell(
                cold.total_ms
                - cold.parts_ms.get("import_ms", 0.0)
                - cold.parts_ms.get("runtime_ms", 0.0),
                0,
            ),
            f"{ms_cell(cold.llm_fake_ms, 1)} (fake's CPU, {cold.llm_calls} calls)",
            ms_cell(cold.total_ms, 0),
            parts,
        ]
    )
    notes = [
        "Handler: bench/cold_worker.py is a fresh process with AWS_LAMBDA_FUNCTION_NAME set, "
        "as Lambda runs the worker (bench/cold_handler.py serves it): init = the import of "
        "functions.worker, where the worker pauses the garbage collector, builds its runtime "
        "(stores and boto3 clients, the real openai client imported and connected, the "
        "engine, the generic channel's HTTP client, the language model, the banking agent's "
        "snapshot and vectors read ahead) with one OpenBLAS thread, freezes what it built and "
        "resumes collection; first invocation = the handler on an SQS FIFO event "
        "received from moto's queue as the event source mapping delivers it: the session "
        "read, the turn (the query embedded and every schema answered over HTTP by a fake OpenAI-compatible server, zero latency), the commit, "
        "and the reply POSTed by the generic channel to a local callback receiver. Model = "
        "the time the fake server was busy with a request during the invocation, left out "
        "of the total. The process imports only what the Lambda layer ships "
        "(bench/lambda_package.py): this machine's development packages (trio, which "
        "httpcore2 imports when present; httpx's CLI: rich, click) are refused.",
        "Engine path: bench/cold_turn.py against the same kind of moto server: import = "
        "the worker's turn path (engine, infra.runtime, the fake LLM); runtime = "
        "`infra.runtime.Runtime` building the engine (botocore imported and its clients "
        "created here); snapshot = the agent read from DynamoDB; vectors = its embeddings "
        "downloaded from S3 into an empty disk cache; session = the session item created; "
        "turn = `TurnEngine.handle` minus the commit and the fake LLM's own CPU (parsing "
        "its answers stays in); commit = the turn's TransactWriteItems. Its init column is "
        "import + runtime, its first invocation the rest. moto answers over local HTTP: no "
        "network latency, but its Python emulation costs CPU of this machine.",
    ]
    if handler is not None and handler.status == "ok":
        notes.append(
            f"After the cold turn, {handler.warm_turns} warm turns per container: worker CPU "
            f"per turn p50 {ms_cell(handler.turn_cpu_p50_ms)} / p95 "
            f"{ms_cell(handler.turn_cpu_p95_ms)} ms with the init's gc.freeze(), "
            f"{ms_cell(handler.unfrozen_turn_cpu_p50_ms)} / "
            f"{ms_cell(handler.unfrozen_turn_cpu_p95_ms)} ms in twin containers unfrozen after "
            f"the cold invocation (as before the freeze); automatic full collections during "
            f"them: {handler.full_collections} frozen, {handler.unfrozen_full_collections} "
            f"unfrozen. One full collection, timed after them (CPU, the turn it falls in pays "
            f"it): {ms_cell(handler.full_pass_ms)} ms frozen, "
            f"{ms_cell(handler.unfrozen_full_pass_ms)} ms unfrozen."
        )
    return Table(
        "Cold turn: a fresh worker's first turn on the moto stack, model time left out (median ms)",
        [
            "path",
            "status",
            "runs",
            "init",
            "first invocation",
            "model (left out)",
            "total without model",
            "parts",
        ],
        rows,
        notes,
    )


def throughput_table(throughput: ThroughputRow, latency: float) -> Table:
    """Concurrent sessions through the local HTTP server: turns per second and reply times."""
    done = throughput.status.startswith("ok")
    return Table(
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
                throughput.status,
                str(throughput.sessions) if done else "–",
                str(throughput.turns) if done else "–",
                ms_cell(throughput.seconds) if done else "–",
                ms_cell(throughput.turns_per_second, 2) if done else "–",
                ms_cell(throughput.p50_ms, 0) if done else "–",
                ms_cell(throughput.p95_ms, 0) if done else "–",
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
