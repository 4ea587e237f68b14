"""`python -m bench scale`: what binds first at 10,000 concurrent conversations, and what customers
see — the scale model (`bench.scale_model`) run on three deployments and a sweep of loads, checked
first against the local stack at small scale (`bench.scale_check`). `--write-doc` rewrites the
"simulation" block of docs/capacity.md and its plot (docs/img/capacity-reply-time.png).

Every run is seeded: the same arguments print the same tables.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.blocks import update_block
from bench.monthly_cost import lines as cost_lines
from bench.scale_model import Quotas, Result, Service, Workload, binding, simulate

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "capacity.md"
PLOT = ROOT / "docs" / "img" / "capacity-reply-time.png"
CONVERSATIONS = 10_000
SWEEP = (100, 300, 1_000, 3_000, 10_000)
SERVICE = Service()
CALLS_PER_TURN = sum(SERVICE.rounds)


def safe_worker_cap(quotas: Quotas, service: Service = SERVICE) -> int:
    """The most concurrent workers the model's quota sustains: each worker runs one turn at a
    time, a turn asks `CALLS_PER_TURN` calls and lasts at least its engine time plus its rounds at
    the model's median latency (faster turns would ask more often)."""
    turn_s = service.engine_ms / 1000 + len(service.rounds) * service.model_median_ms / 1000
    by_requests = quotas.model_rpm / 60 * turn_s / CALLS_PER_TURN
    by_tokens = quotas.model_tpm / 60 * turn_s / (CALLS_PER_TURN * service.tokens_per_call)
    return max(1, math.floor(0.8 * min(by_requests, by_tokens)))  # 20 % headroom for bursts


@dataclass(frozen=True)
class Deployment:
    name: str
    quotas: Quotas
    how: str


DEFAULTS = Quotas()
RAISED_MODEL = replace(
    DEFAULTS,
    api_rate=2_000.0,
    api_burst=4_000.0,
    lambda_concurrency=3_000,
    model_rpm=60_000.0,
    model_tpm=150_000_000.0,
    send_rate=500.0,
)
DEPLOYMENTS = (
    Deployment(
        "template defaults",
        DEFAULTS,
        "API 100 req/s (burst 200), account concurrency 1,000, workers ≤ 50, model 10k RPM / "
        "10M TPM, channel 40 replies/s (one WhatsApp number at 80 messages/s, inbound and "
        "outbound)",
    ),
    Deployment(
        "raised, workers capped to the model's quota",
        replace(RAISED_MODEL, worker_max_concurrency=safe_worker_cap(RAISED_MODEL)),
        f"API 2,000 req/s, account concurrency 3,000, model 60k RPM / 150M TPM, channel 500 "
        f"replies/s (a number upgraded to 1,000 messages/s), workers ≤ {safe_worker_cap(RAISED_MODEL)} (`WorkerMaxConcurrency` from "
        "the model's quota, 20 % headroom)",
    ),
    Deployment(
        "a model quota for 10,000",
        replace(
            RAISED_MODEL,
            model_rpm=120_000.0,
            model_tpm=300_000_000.0,
            worker_max_concurrency=safe_worker_cap(
                replace(RAISED_MODEL, model_rpm=120_000.0, model_tpm=300_000_000.0)
            ),
        ),
        "the same with 120k RPM / 300M TPM at the model, workers capped to it",
    ),
    Deployment(
        "raised, workers not capped",
        replace(RAISED_MODEL, worker_max_concurrency=1_000),
        "the same, workers ≤ 1,000: more turns at once than the model's quota answers",
    ),
)


def cost_per_1000_turns() -> float:
    """AWS and model per 1,000 turns at the measured quantities (docs/deploy.md), fixed monthly
    costs and storage left out."""
    return 1000 * sum(line.per_turn for line in cost_lines())


def _seconds(value: float) -> str:
    if math.isnan(value):
        return "—"
    return f"{value:,.1f} s" if value < 100 else f"{value / 60:,.1f} min"


def scenario_table(results: Sequence[tuple[Deployment, Result]]) -> str:
    out = [
        "| deployment | replies / sent | lost | out of order | p50 wait | p99 wait | "
        "peak queue | peak workers | webhook 429s | model 429s (deferred) | one-moment lines "
        "| binds first |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for deployment, r in results:
        out.append(
            f"| {deployment.name} | {r.replies:,} / {r.sent:,} | {r.lost:,} | {r.out_of_order} | "
            f"{_seconds(r.percentile(0.5))} | {_seconds(r.percentile(0.99))} | "
            f"{r.peak_queue:,} | {r.peak_workers:,} | {r.webhook_retries:,} | "
            f"{r.model_429s:,} ({r.deferrals:,}) | {r.one_moment_lines:,} | {binding(r)} |"
        )
    return "\n".join(out)


def sweep_table(sweep: dict[str, list[Result]]) -> str:
    names = list(sweep)
    head = "| conversations | " + " | ".join(f"{n}: p50 / p99, binds" for n in names) + " |"
    out = [head, "|---:|" + "---|" * len(names)]
    for i, conversations in enumerate(SWEEP):
        cells = []
        for name in names:
            r = sweep[name][i]
            lost = f", {r.lost:,} lost" if r.lost else ""
            cells.append(
                f"{_seconds(r.percentile(0.5))} / {_seconds(r.percentile(0.99))}, "
                f"{binding(r)}{lost}"
            )
        out.append(f"| {conversations:,} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def plot(sweep: dict[str, list[Result]], path: Path) -> bool:
    """Reply time against load, one line per deployment (p50 solid, p99 dashed); False when
    matplotlib (the `bench` extra) is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    for name, results in sweep.items():
        (line,) = axes.plot(
            SWEEP, [r.percentile(0.5) for r in results], marker="o", label=f"{name}: p50"
        )
        axes.plot(
            SWEEP,
            [r.percentile(0.99) for r in results],
            linestyle="--",
            marker="x",
            color=line.get_color(),
            label=f"{name}: p99",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("concurrent conversations (5 messages each, first ones over 60 s)")
    axes.set_ylabel("time to reply (s)")
    axes.set_title("Simulated time to reply against load (python -m bench scale)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)
    return True


def check_table(calibration: object, checks: Sequence[object]) -> str:
    from bench.scale_check import TOLERANCE, Calibration, Check

    assert isinstance(calibration, Calibration)
    turns = ", ".join(f"{t * 1000:.0f}" for t in calibration.turn_s)
    out = [
        f"Calibrated on one customer alone: the worker's time per message {turns} ms, the rest "
        f"of a reply (webhook, pick-up, callback) {calibration.outside_s * 1000:.0f} ms.",
        "",
        "| customers at once | measured p50 / p95 | model p50 / p95 | in order (both) | lost | "
        f"within ±{TOLERANCE:.0%} |",
        "|---:|---:|---:|---|---:|---|",
    ]
    for c in checks:
        assert isinstance(c, Check)
        out.append(
            f"| {c.customers} | {c.measured_p50_s:.2f} / {c.measured_p95_s:.2f} s | "
            f"{c.model_p50_s:.2f} / {c.model_p95_s:.2f} s | "
            f"{'yes' if c.measured_in_order and not c.model_out_of_order else 'NO'} | "
            f"{c.lost} | {'yes' if c.within else 'NO'} |"
        )
    return "\n".join(out)


def document(
    scenarios: str, sweep: str, checked: str, plotted: bool, seconds: float, cost: float
) -> str:
    parts = [
        f"Run: `python -m bench scale --write-doc` ({seconds:.0f} s on this 2-core machine; "
        "seeded, so the same run prints the same figures).",
        "",
        "**The model checked against the local stack** (`bench/scale_check.py`): one worker, "
        "batches of 10, the banking agent's first three messages per customer, the benchmark's "
        "fake model at 150 ms per call.",
        "",
        checked,
        "",
        f"**{CONVERSATIONS:,} concurrent conversations**, 5 messages each, the first ones spread "
        "over 60 s, then a reply every 20 s on average (exponential think time); a turn is 150 ms "
        "of its own plus two model rounds (2 calls, then 1; 1,500 tokens a call; latency "
        "lognormal, median 700 ms); a throttled webhook is retried by the platform after 1 s, "
        "60 s and 300 s; a model 429 gives the turn back to the queue (visibility back-off 2 s, "
        "doubling, at most 60 s; dead-lettered after 8 receives), as the worker's default "
        "`ModelRateLimit: defer` does — here at the first 429, where the worker first retries "
        "within the turn (see above).",
        "",
        scenarios,
        "",
        "Deployments: " + "; ".join(f"**{d.name}** — {d.how}" for d in DEPLOYMENTS) + ".",
        "",
        "**Time to reply against load** (same conversations, more of them):",
        "",
        sweep,
        "",
    ]
    if plotted:
        parts += ["![Simulated time to reply against load](img/capacity-reply-time.png)", ""]
    parts.append(
        f"Cost per 1,000 turns at the measured quantities (docs/deploy.md's table: gpt-4o-mini, "
        f"Lambda, DynamoDB, SQS, Step Functions, API Gateway, S3, CloudWatch; fixed monthly "
        f"costs and storage left out): **${cost:.2f}**, whatever the load — the deployment has "
        "no servers to size; waiting is what a campaign changes."
    )
    return "\n".join(parts)


def run(write_doc: bool, check: bool) -> int:
    started = time.perf_counter()
    checked = "(not run: `--no-check`)"
    if check:
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        from bench.scale_check import check as run_check
        from functions.worker_telemetry import logger

        logger.setLevel("WARNING")  # created at INFO when `python -m bench` imported it first

        print(">> the model against the local stack (about a minute)", flush=True)
        calibration, checks = run_check(lambda line: print(f"   {line}", flush=True))
        checked = check_table(calibration, checks)
        print(checked, flush=True)
    print(f">> {CONVERSATIONS:,} conversations on {len(DEPLOYMENTS)} deployments", flush=True)
    results = []
    for deployment in DEPLOYMENTS:
        results.append((deployment, simulate(Workload(CONVERSATIONS), deployment.quotas, SERVICE)))
        print(f"   {deployment.name}: done", flush=True)
    scenarios = scenario_table(results)
    print(scenarios, flush=True)
    print(">> the load sweep", flush=True)
    sweep = {
        d.name: [simulate(Workload(n), d.quotas, SERVICE) for n in SWEEP] for d in DEPLOYMENTS[:3]
    }
    swept = sweep_table(sweep)
    print(swept, flush=True)
    cost = cost_per_1000_turns()
    print(f"cost per 1,000 turns: ${cost:.2f}")
    if write_doc:
        plotted = plot(sweep, PLOT)
        if not plotted:
            print("matplotlib is not installed (pip install -e '.[bench]'): no plot written")
        body = document(scenarios, swept, checked, plotted, time.perf_counter() - started, cost)
        update_block(DOC, "simulation", body, heading="## The simulation")
        print(
            f"wrote {DOC.relative_to(ROOT)}" + (f" and {PLOT.relative_to(ROOT)}" if plotted else "")
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench scale",
        description="The scale model: what binds first at 10,000 concurrent conversations "
        "(docs/capacity.md).",
    )
    parser.add_argument("--write-doc", action="store_true", help="rewrite docs/capacity.md's block")
    parser.add_argument(
        "--no-check", action="store_true", help="skip the check against the local stack"
    )
    parser.add_argument(
        "--safe-cap",
        nargs=2,
        type=float,
        metavar=("RPM", "TPM"),
        help="print the template's WorkerMaxConcurrency for a model quota (requests and tokens "
        "per minute) and exit",
    )
    args = parser.parse_args(argv)
    if args.safe_cap is not None:
        rpm, tpm = args.safe_cap
        cap = safe_worker_cap(replace(DEFAULTS, model_rpm=rpm, model_tpm=tpm))
        print(f"WorkerMaxConcurrency={min(1_000, max(2, cap))}")  # the mapping's bounds: 2-1000
        return 0
    return run(args.write_doc, not args.no_check)


__all__ = ["DEPLOYMENTS", "cost_per_1000_turns", "main", "safe_worker_cap"]
