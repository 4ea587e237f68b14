"""The monthly cost in docs/deploy.md can be checked: its table is exactly what
bench/monthly_cost.py computes, each row's per-turn cost is its quantity times its price, the
model's tokens and calls are the ones docs/BENCHMARKS.md measured, and the AWS quantities still
match a fresh measurement of a conversation through the real handlers (`bench.turn_requests`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import monthly_cost as cost
from bench.turn_requests import TurnRequests, measure

pytestmark = pytest.mark.long(15)  # about that many seconds: scheduled first (tests/conftest.py)

BENCHMARKS = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"


def test_the_documented_table_is_the_computed_one() -> None:
    assert cost.documented() == cost.table(), "run `python -m bench monthly-cost --write`"


def test_a_month_is_the_per_turn_cost_times_the_turns_plus_what_is_paid_anyway() -> None:
    rows = {row.service: row for row in cost.lines()}
    model = rows["OpenAI gpt-4o-mini (model)"]
    assert model.per_turn == pytest.approx(4_142 * 0.15e-6 + 219 * 0.60e-6)
    assert model.month(1_000_000) == pytest.approx(752.70, abs=0.01)
    dynamodb = rows["DynamoDB requests (on-demand)"]
    assert dynamodb.month(100_000) == pytest.approx(100_000 * (55.4 * 0.625 + 6.05 * 0.125) / 1e6)
    fixed = rows["CloudWatch metrics + alarms"]
    assert fixed.month(1_000) == fixed.month(1_000_000) == pytest.approx(8 * 0.30 + 2 * 0.10)
    total = sum(row.month(1_000_000) for row in rows.values())
    assert f"**${total:,.2f}**" in cost.table()


def test_the_model_figures_are_the_benchmarks_measured_ones() -> None:
    lines = BENCHMARKS.read_text().splitlines()
    [at] = [n for n, line in enumerate(lines) if line.startswith("| banking concierge | 20 |")]
    header = [cell.strip() for cell in lines[at - 2].strip("|").split("|")]
    cells = dict(
        zip(header, (cell.strip() for cell in lines[at].strip("|").split("|")), strict=True)
    )
    calls = cells["LLM calls mean/max"]
    prompt = cells["prompt tokens/turn mean (max)"]
    completion = cells["completion tokens/turn mean (max)"]
    assert float(calls.split("/")[0]) == cost.LLM_CALLS
    assert int(re.sub(r"[^\d]", "", prompt.split(" ")[0])) == cost.PROMPT_TOKENS
    assert int(re.sub(r"[^\d]", "", completion.split(" ")[0])) == cost.COMPLETION_TOKENS


@pytest.fixture(scope="module")
def measured() -> TurnRequests:
    return measure()


@pytest.mark.timeout(180)
def test_the_aws_quantities_match_a_fresh_measurement(measured: TurnRequests) -> None:
    per = measured.per_message
    functions = measured.functions
    webhook, worker = functions["WebhookFunction"], functions["WorkerFunction"]
    assert per(webhook.invocations) == per(worker.invocations) == 1.0
    assert per(measured.queued) == 1.0  # one turn-queue message per customer message
    assert per(webhook.calls["sqs.SendMessage"]) == 1.0
    assert per(worker.calls["dynamodb.TransactWriteItems"]) == 1.0  # one commit per turn
    assert per(measured.tool_batches) == pytest.approx(cost.TOOL_BATCHES, rel=0.15)
    assert per(measured.tool_calls) == pytest.approx(cost.TOOL_CALLS, rel=0.15)
    reads = per(webhook.read_units + worker.read_units)
    writes = per(webhook.write_units + worker.write_units)
    assert reads == pytest.approx(cost.DYNAMODB_READ_UNITS, rel=0.15)
    assert writes == pytest.approx(cost.DYNAMODB_WRITE_UNITS, rel=0.15)
    logged = per(webhook.log_bytes + worker.log_bytes)
    assert logged == pytest.approx(cost.APP_LOG_BYTES, rel=0.15)
    assert per(measured.embedded_chars) / 4 == pytest.approx(cost.RECALL_EMBEDDING_TOKENS, rel=0.15)
    assert per(worker.stored["TRACE"]) == pytest.approx(cost.TRACE_BYTES, rel=0.15)
    assert per(worker.stored["EVENT"]) < cost.KEPT_BYTES
