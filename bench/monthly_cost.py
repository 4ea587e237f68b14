"""What a month of Waypoint costs at 1k, 100k and 1M turns: the table of docs/deploy.md §9, with
its arithmetic. `python -m bench monthly-cost` prints it; `--write` rewrites that block of the
document (tests/bench/test_monthly_cost.py checks the two agree, and that the measured inputs
still match a fresh measurement).

Every figure is (quantity per turn) × (list price), times the turns of the month, plus what a
deployment pays whatever its traffic. The quantities come from three places, each named:

- measured by `python -m bench` (docs/BENCHMARKS.md, banking concierge: model calls and tokens);
- measured by `python -m bench turn-requests` (`bench.turn_requests`: AWS requests, DynamoDB
  units, bytes logged, tool batches, recall embedding);
- assumed (function durations in AWS, log lines of the Lambda platform, idle queue polling): no
  local run can measure them, so each is stated with its reasoning.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "deploy.md"
BEGIN, END = "<!-- monthly-cost:begin -->", "<!-- monthly-cost:end -->"
SCALES = (1_000, 100_000, 1_000_000)
M = 1_000_000
GB = 1024**3

# -- list prices, us-east-1, on-demand, without free tiers (read 2026-11-28) -------------------
PRICES_DATE = "2026-11-28"
LAMBDA_GB_SECOND_ARM = 0.0000133334  # first 7.5 billion GB-s a month
LAMBDA_REQUEST = 0.20 / M
HTTP_API_REQUEST = 1.00 / M  # first 300 million a month, per 512 KB
SQS_FIFO_REQUEST = 0.50 / M  # per 64 KB chunk
DYNAMODB_WRITE_UNIT = 0.625 / M  # on-demand
DYNAMODB_READ_UNIT = 0.125 / M
DYNAMODB_GB_MONTH = 0.25  # standard table class
DYNAMODB_PITR_GB_MONTH = 0.20  # continuous backups (the template enables them)
EXPRESS_REQUEST = 1.00 / M  # Step Functions Express
EXPRESS_GB_SECOND = 0.00001667  # first 1,000 GB-hours; 64 MB chunks, 100 ms rounding
LOGS_INGESTED_GB = 0.50  # CloudWatch Logs, standard class
CUSTOM_METRIC_MONTH = 0.30  # first 10,000 metrics
ALARM_MONTH = 0.10  # standard resolution
XRAY_TRACE = 5.00 / M  # traces recorded
GPT_4O_MINI_INPUT = 0.15 / M  # OpenAI list price per token
GPT_4O_MINI_OUTPUT = 0.60 / M
EMBEDDING_3_SMALL = 0.02 / M

# -- per turn ---------------------------------------------------------------------------------
# docs/BENCHMARKS.md, "Per turn with the latency model", banking concierge (Tekken BPE tokens).
LLM_CALLS = 4.1  # with the secret reading beside matching (the banking agent declares a password)
PROMPT_TOKENS = 4_142
COMPLETION_TOKENS = 219
# `python -m bench turn-requests` (2026-11-28, commit of this file): per customer message.
RECALL_EMBEDDING_TOKENS = 65
TOOL_BATCHES = 0.70  # Step Functions Express executions
TOOL_CALLS = 0.70  # tool-function invocations
DYNAMODB_READ_UNITS = 6.05  # webhook 0.20 + worker 5.85
DYNAMODB_WRITE_UNITS = 55.4  # webhook 2.2 + worker 53.2 (the turn's transaction: 2 × per KB)
APP_LOG_BYTES = 1_598  # webhook 420 + worker 1,178 (Powertools JSON lines and EMF metrics)
# Stored per turn (same run): the trace (≈ 16.6 KB, kept TraceRetentionDays = 30) and what is
# kept SessionIdleDays / EventRetentionDays = 365 days (events, turn marker, outbox: ≈ 1.6 KB).
TRACE_BYTES = 16_600
KEPT_BYTES = 1_600

# Assumed, with their reasons.
WEBHOOK_SECONDS, WEBHOOK_GB = 0.1, 0.5  # 4 DynamoDB writes + 1 SendMessage, 512 MB
WORKER_SECONDS, WORKER_GB = 3.0, 1.0  # two sequential model rounds (≈ 1.2 s each) + AWS + reply
TOOL_SECONDS, TOOL_GB = 0.1, 0.5  # the example agents' tools answer from memory
EXPRESS_SECONDS, EXPRESS_GB = 0.3, 64 / 1024  # one Map over the calls, one 64 MB chunk
PLATFORM_LOG_BYTES = 330  # START, END and REPORT lines of each invocation
ACCESS_LOG_BYTES = 330  # the webhook API's access log line (template.yaml's format)
SQS_REQUESTS = 3.0  # SendMessage; the event source mapping's ReceiveMessage and DeleteMessage
INVOCATIONS = 2 + TOOL_CALLS  # webhook, worker, tools
# Whatever the traffic.
SWEEP_RUNS, SWEEP_SECONDS, SWEEP_GB = 8_640, 0.2, 0.5  # HandoffSweepFunction, every 5 minutes
IDLE_POLL_REQUESTS = 650_000  # ≈ 5 long polls of 20 s by the event source mapping, all month
ALWAYS_EMITTED_METRICS = 8  # TurnLatency, MessagesPerTurn, LLMCalls, PromptTokens, ToolErrors,
# RepliesSent, RecordsFailed, ColdStart (the others only in a month something fails)
ALARMS = 2  # TurnDeadLetterAlarm, DeliveryFailedAlarm


@dataclass(frozen=True)
class Line:
    """One row: what it is, its arithmetic per turn (or per month), and its cost."""

    service: str
    arithmetic: str
    per_turn: float = 0.0  # dollars per turn
    per_month: float = 0.0  # dollars per month, whatever the traffic
    storage_gb_per_turn: float = 0.0  # GB stored per turn in the month (priced per GB-month)
    storage_price: float = 0.0

    def month(self, turns: int) -> float:
        storage = self.storage_gb_per_turn * turns * self.storage_price
        return self.per_turn * turns + self.per_month + storage


def lines() -> list[Line]:
    """The cost model, row by row."""
    lambda_gb_s = (
        WEBHOOK_SECONDS * WEBHOOK_GB
        + WORKER_SECONDS * WORKER_GB
        + TOOL_CALLS * TOOL_SECONDS * TOOL_GB
    )
    log_bytes = APP_LOG_BYTES + PLATFORM_LOG_BYTES * INVOCATIONS + ACCESS_LOG_BYTES
    stored_gb = (TRACE_BYTES + KEPT_BYTES) / GB
    return [
        Line(
            "OpenAI gpt-4o-mini (model)",
            f"{PROMPT_TOKENS:,} prompt × ${GPT_4O_MINI_INPUT * M:.2f}/M + {COMPLETION_TOKENS} "
            f"completion × ${GPT_4O_MINI_OUTPUT * M:.2f}/M ({LLM_CALLS} calls)",
            PROMPT_TOKENS * GPT_4O_MINI_INPUT + COMPLETION_TOKENS * GPT_4O_MINI_OUTPUT,
        ),
        Line(
            "OpenAI text-embedding-3-small",
            f"{RECALL_EMBEDDING_TOKENS} tokens (recall query) × ${EMBEDDING_3_SMALL * M:.2f}/M",
            RECALL_EMBEDDING_TOKENS * EMBEDDING_3_SMALL,
        ),
        Line(
            "Lambda (arm64)",
            f"{WEBHOOK_SECONDS} s × {WEBHOOK_GB} GB + {WORKER_SECONDS} s × {WORKER_GB} GB + "
            f"{TOOL_CALLS} × {TOOL_SECONDS} s × {TOOL_GB} GB = {lambda_gb_s:.3f} GB-s × "
            f"${LAMBDA_GB_SECOND_ARM:.10f}; {INVOCATIONS} requests × $0.20/M",
            lambda_gb_s * LAMBDA_GB_SECOND_ARM + INVOCATIONS * LAMBDA_REQUEST,
        ),
        Line(
            "DynamoDB requests (on-demand)",
            f"{DYNAMODB_WRITE_UNITS} write units × $0.625/M + {DYNAMODB_READ_UNITS} read units "
            "× $0.125/M",
            DYNAMODB_WRITE_UNITS * DYNAMODB_WRITE_UNIT + DYNAMODB_READ_UNITS * DYNAMODB_READ_UNIT,
        ),
        Line(
            "DynamoDB storage + PITR (first month)",
            f"{(TRACE_BYTES + KEPT_BYTES) / 1000:.1f} KB per turn × (${DYNAMODB_GB_MONTH:.2f} + "
            f"${DYNAMODB_PITR_GB_MONTH:.2f})/GB-month",
            storage_gb_per_turn=stored_gb,
            storage_price=DYNAMODB_GB_MONTH + DYNAMODB_PITR_GB_MONTH,
        ),
        Line(
            "API Gateway (HTTP API)",
            "1 webhook request × $1.00/M",
            HTTP_API_REQUEST,
        ),
        Line(
            "SQS FIFO",
            f"{SQS_REQUESTS:.0f} requests × $0.50/M; idle long polling "
            f"{IDLE_POLL_REQUESTS / M:.2f} M requests a month",
            SQS_REQUESTS * SQS_FIFO_REQUEST,
            IDLE_POLL_REQUESTS * SQS_FIFO_REQUEST,
        ),
        Line(
            "Step Functions (Express)",
            f"{TOOL_BATCHES} executions × ($1.00/M + {EXPRESS_SECONDS} s × 64 MB × "
            f"${EXPRESS_GB_SECOND:.8f}/GB-s)",
            TOOL_BATCHES * (EXPRESS_REQUEST + EXPRESS_SECONDS * EXPRESS_GB * EXPRESS_GB_SECOND),
        ),
        Line(
            "S3",
            "embeddings read once per warm container, bodies only of very long sessions",
        ),
        Line(
            "CloudWatch Logs",
            f"{log_bytes:,.0f} bytes ingested ({APP_LOG_BYTES:,} by the handlers + "
            f"{PLATFORM_LOG_BYTES} × {INVOCATIONS} platform lines + {ACCESS_LOG_BYTES} access "
            "log) × $0.50/GB",
            log_bytes / GB * LOGS_INGESTED_GB,
        ),
        Line(
            "CloudWatch metrics + alarms",
            f"{ALWAYS_EMITTED_METRICS} custom metrics × $0.30 + {ALARMS} alarms × $0.10, a month",
            per_month=ALWAYS_EMITTED_METRICS * CUSTOM_METRIC_MONTH + ALARMS * ALARM_MONTH,
        ),
        Line(
            "X-Ray",
            f"≤ {INVOCATIONS} traces (one per invocation, Tracing: Active) × $5.00/M",
            INVOCATIONS * XRAY_TRACE,
        ),
        Line(
            "Handoff sweep (Lambda)",
            f"{SWEEP_RUNS:,} runs × {SWEEP_SECONDS} s × {SWEEP_GB} GB, a month",
            per_month=SWEEP_RUNS
            * (SWEEP_SECONDS * SWEEP_GB * LAMBDA_GB_SECOND_ARM + LAMBDA_REQUEST),
        ),
    ]


def money(value: float) -> str:
    if value == 0:
        return "$0"
    if value < 0.01:
        return "< $0.01"
    return f"${value:,.2f}"


def per_turn(value: float) -> str:
    return f"${value:.7f}".rstrip("0").rstrip(".") if value else "—"


def table() -> str:
    """The Markdown block of docs/deploy.md §9 (between its markers)."""
    rows = lines()
    head = "| service | per turn: quantity × price | per turn | " + " | ".join(
        f"{n:,} turns" for n in SCALES
    )
    out = [
        f"_Generated by `python -m bench monthly-cost --write` from bench/monthly_cost.py; list "
        f"prices of {PRICES_DATE}, us-east-1, no free tier._",
        "",
        head + " |",
        "|---|---|---:|" + "---:|" * len(SCALES),
    ]
    for row in rows:
        if row.per_turn:
            unit = per_turn(row.per_turn)
        elif row.storage_gb_per_turn:
            unit = per_turn(row.storage_gb_per_turn * row.storage_price)
        elif row.per_month:
            unit = "a month"
        else:
            unit = "≈ 0"
        months = " | ".join(money(row.month(n)) for n in SCALES)
        out.append(f"| {row.service} | {row.arithmetic} | {unit} | {months} |")
    model = [r for r in rows if r.service.startswith("OpenAI")]
    aws = [r for r in rows if not r.service.startswith("OpenAI")]
    for label, group in (("**AWS**", aws), ("**model (OpenAI)**", model), ("**total**", rows)):
        months = " | ".join(f"**{money(sum(r.month(n) for r in group))}**" for n in SCALES)
        out.append(f"| {label} | | | {months} |")
    per_thousand = " | ".join(money(sum(r.month(n) for r in rows) / n * 1000) for n in SCALES)
    out.append(f"| per 1,000 turns | | | {per_thousand} |")
    return "\n".join(out)


def write(doc: Path = DOC) -> None:
    """Replace the block between the markers of `doc` with `table()`."""
    text = doc.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{doc} has no {BEGIN} … {END} block")
    doc.write_text(pattern.sub(lambda _: f"{BEGIN}\n{table()}\n{END}", text), encoding="utf-8")


def documented(doc: Path = DOC) -> str:
    """The block as docs/deploy.md has it."""
    text = doc.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench monthly-cost",
        description="The monthly cost table of docs/deploy.md, from bench/monthly_cost.py.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the block in docs/deploy.md")
    args = parser.parse_args(argv)
    if args.write:
        write()
    print(table())
    return 0
