"""The scale model (`bench.scale_model`) checked against the local stack at small scale.

`waypoint.local_server.LocalServer` is the deployment in one process: moto (DynamoDB, S3, SQS
FIFO), the webhook over HTTP and one poller feeding the real `functions.worker.handler` in
batches of 10, as one worker instance would be fed. N customers on the generic channel send K
messages each, all starting together, each message as soon as the previous reply arrived; the
model is the benchmark's fake with a fixed latency per call.

First one customer alone calibrates the model's inputs: the worker's time for each message of
the conversation (the handler's invocations, timed around it) and the rest of a reply's time
(webhook, queue pick-up, callback). Then N = 2, 4, 8 customers run on the local stack and in the
model with those inputs and the local stack's limits (one worker, batches of 10, no throttles),
and the model's median and p95 wait are compared with the measured ones: within
`TOLERANCE` (relative) or `FLOOR_S` (absolute, for waits too short for a ratio to mean much).
Same ordering (every reply in its conversation's order) and no loss are checked on both sides.

What the model cannot see here: the local stack shares one Python process (the GIL) between the
webhook, moto, the worker and the customers' threads, so the worker's time grows a little with
the number of customers; on AWS each of them is its own process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.fake_llm import BenchLLM, LatencyModel
from bench.scale_model import Quotas, Result, Service, Workload, simulate
from bench.scenarios import BANKING_CONVERSATION
from bench.stats import median, p95
from bench.tokens import EstimateCounter

Progress = Callable[[str], None]
MESSAGES = BANKING_CONVERSATION[:3]  # a greeting, a stock-price question and its answer
LATENCY_MS = 150.0
CUSTOMERS = (2, 4, 8)
TOLERANCE = 0.30
FLOOR_S = 0.25
UNLIMITED = Quotas(
    api_rate=1e9,
    api_burst=1e9,
    lambda_concurrency=10**6,
    worker_max_concurrency=1,
    batch_size=10,
    model_rpm=1e12,
    model_tpm=1e15,
    send_rate=1e9,
)


@dataclass
class Check:
    customers: int
    measured_p50_s: float
    measured_p95_s: float
    model_p50_s: float
    model_p95_s: float
    measured_in_order: bool
    model_out_of_order: int
    lost: int

    @property
    def within(self) -> bool:
        return all(
            abs(model - measured) <= max(FLOOR_S, TOLERANCE * measured)
            for model, measured in (
                (self.model_p50_s, self.measured_p50_s),
                (self.model_p95_s, self.measured_p95_s),
            )
        )


@dataclass
class Calibration:
    turn_s: tuple[float, ...]  # the worker's time per message of the conversation
    outside_s: float  # the rest of a reply's time: webhook, pick-up, callback


def _run_local(customers: int, progress: Progress) -> tuple[list[list[float]], list[float]]:
    """Waits per customer (s, in message order) and the worker invocations' durations."""
    from examples import banking
    from examples.banking import bank
    from functions import worker
    from infra.runtime import Runtime, install_runtime
    from waypoint.local_server import GenericChatClient, LocalServer

    bank.BANK = bank.Bank()
    invocations: list[float] = []
    real = worker.handler

    def timed(event: dict[str, Any], context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            return real(event, context)
        finally:
            invocations.append(time.perf_counter() - started)

    with LocalServer(banking.load(), tools_module="examples.banking.tools") as server:
        install_runtime(Runtime(llm=BenchLLM(LatencyModel(LATENCY_MS), EstimateCounter())))
        warm = GenericChatClient(server, "scale-warmup", "warmup")
        try:
            warm.send(MESSAGES[0], timeout=120)
        finally:
            warm.close()
        worker.handler = timed  # type: ignore[assignment]
        try:

            def customer(n: int) -> list[float]:
                client = GenericChatClient(server, f"scale-{customers}-{n}", f"customer-{n}")
                waits = []
                try:
                    for text in MESSAGES:
                        started = time.perf_counter()
                        if not client.send(text, timeout=120):
                            raise RuntimeError(f"no reply to {text!r}")
                        waits.append(time.perf_counter() - started)
                finally:
                    client.close()
                return waits

            with ThreadPoolExecutor(max_workers=customers) as pool:
                waits = list(pool.map(customer, range(customers)))
        finally:
            worker.handler = real  # type: ignore[assignment]
    progress(
        f"local stack, {customers} customer(s) × {len(MESSAGES)} messages: wait p50 "
        f"{median([w for ws in waits for w in ws]):.2f} s"
    )
    return waits, invocations


def calibrate(progress: Progress) -> Calibration:
    waits, invocations = _run_local(1, progress)
    (alone,) = waits
    turn_s = tuple(invocations[: len(MESSAGES)])
    outside = median([w - t for w, t in zip(alone, turn_s, strict=True)])
    return Calibration(turn_s=turn_s, outside_s=max(0.0, outside))


def modelled(customers: int, calibration: Calibration) -> Result:
    service = Service(
        webhook_ms=calibration.outside_s * 1000,
        engine_ms=0.0,
        cold_start_ms=0.0,
        rounds=(),
        turn_s_by_index=calibration.turn_s,
    )
    workload = Workload(customers, messages=len(MESSAGES), ramp_s=0.0, think_s=0.0)
    return simulate(workload, UNLIMITED, service)


def check(progress: Progress) -> tuple[Calibration, list[Check]]:
    calibration = calibrate(progress)
    checks = []
    for customers in CUSTOMERS:
        waits, _invocations = _run_local(customers, progress)
        flat = [w for ws in waits for w in ws]
        model = modelled(customers, calibration)
        checks.append(
            Check(
                customers=customers,
                measured_p50_s=median(flat),
                measured_p95_s=p95(flat),
                model_p50_s=model.percentile(0.50),
                model_p95_s=model.percentile(0.95),
                measured_in_order=all(len(ws) == len(MESSAGES) for ws in waits),
                model_out_of_order=model.out_of_order,
                lost=model.lost + sum(len(MESSAGES) - len(ws) for ws in waits),
            )
        )
    return calibration, checks


__all__ = ["CUSTOMERS", "TOLERANCE", "Calibration", "Check", "calibrate", "check", "modelled"]
