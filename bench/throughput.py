"""Local throughput: N concurrent sessions through the local HTTP server.

`waypoint.local_server.LocalServer` runs the deployment in one process: moto's threaded server for
DynamoDB / S3 / SQS, the webhook (+ management) app over HTTP, and a poller that feeds the SQS
FIFO turn queue to `functions.worker.handler` like Lambda's event source mapping. N customers on
the generic channel (`GenericChatClient`, one thread each) send the banking conversation's first
turns concurrently; each turn is timed from the signed webhook POST to the signed reply callback.
The runtime's LLM is the benchmark's fake (same latency model), installed with
`infra.runtime.install_runtime(Runtime(llm=...))`.

One poller means one worker at a time, as one Lambda instance would be; on AWS the FIFO queue
spreads message groups (sessions) over concurrent worker instances. When the functions layer or
the local server is missing (or fails to start), the row says "pending" and why.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from bench.fake_llm import BenchLLM, LatencyModel
from bench.results import ThroughputRow
from bench.scenarios import BANKING_CONVERSATION
from bench.stats import median, p95
from bench.tokens import EstimateCounter

Progress = Callable[[str], None]
FUNCTIONS = ("functions.webhook", "functions.worker")
SERVER = "waypoint.local_server"
TOOLS_MODULE = "examples.banking.tools"
REPLY_TIMEOUT_S = 90.0


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def missing_parts() -> list[str]:
    return [m for m in (*FUNCTIONS, SERVER) if not _present(m)]


def measure_throughput(
    sessions: int,
    turns: int,
    latency: LatencyModel,
    progress: Progress,
    *,
    warmup: bool = True,
) -> ThroughputRow:
    missing = missing_parts()
    if missing:
        return ThroughputRow(status="pending: not present yet: " + ", ".join(missing))
    failure = ""
    for _attempt in range(2):  # one retry, on a fresh server: the local server is young
        try:
            row = _measure(sessions, turns, latency, progress, warmup)
        except Exception as exc:  # a local server still being written must not sink the run
            failure = f"{type(exc).__name__}: {str(exc)[:160]}"
            progress(f"local server attempt failed: {failure}")
            continue
        if failure:
            row.status = f"ok (second attempt; the first failed: {failure})"
        return row
    return ThroughputRow(status=f"pending: the local server did not complete the run ({failure})")


def _measure(
    sessions: int, turns: int, latency: LatencyModel, progress: Progress, warmup: bool
) -> ThroughputRow:
    from examples import banking
    from examples.banking import bank
    from infra.runtime import Runtime, install_runtime
    from waypoint.local_server import GenericChatClient, LocalServer

    bank.BANK = bank.Bank()
    messages = BANKING_CONVERSATION[1 : 1 + turns]  # stock price: a journey and two tool steps
    with LocalServer(banking.load(), tools_module=TOOLS_MODULE) as server:
        install_runtime(Runtime(llm=BenchLLM(latency, EstimateCounter())))
        if warmup:  # builds the worker's runtime before the clock starts
            warm = GenericChatClient(server, "bench-warmup", "warmup")
            try:
                warm.send(messages[0], timeout=REPLY_TIMEOUT_S)
            finally:
                warm.close()

        def customer(n: int) -> list[float]:
            client = GenericChatClient(server, f"bench-{n}", f"customer-{n}")
            times = []
            try:
                for text in messages:
                    started = time.perf_counter()
                    reply = client.send(text, timeout=REPLY_TIMEOUT_S)
                    if not reply:
                        raise RuntimeError(f"empty reply to {text!r}")
                    times.append((time.perf_counter() - started) * 1000)
            finally:
                client.close()
            return times

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=sessions) as pool:
            per_session = list(pool.map(customer, range(sessions)))
        seconds = time.perf_counter() - started
    latencies = [ms for times in per_session for ms in times]
    row = ThroughputRow(
        status="ok",
        sessions=sessions,
        turns=len(latencies),
        seconds=seconds,
        turns_per_second=len(latencies) / seconds,
        p50_ms=median(latencies),
        p95_ms=p95(latencies),
    )
    progress(
        f"local server: {sessions} sessions x {turns} turns in {seconds:.1f} s = "
        f"{row.turns_per_second:.2f} turns/s; reply p50 {row.p50_ms:.0f} ms, p95 {row.p95_ms:.0f} ms"
    )
    return row
