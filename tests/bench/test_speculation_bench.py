"""`python -m bench speculation` (bench/speculation.py) on the reference scenario: it measures
both runs, counts every drafted turn once, and reports its targets with a verdict."""

from __future__ import annotations

import asyncio

from bench import speculation
from bench.compare import MESSAGES


def test_the_reference_scenario_is_measured_off_and_on_with_its_targets() -> None:
    result = asyncio.run(speculation.reference())
    assert len(result.off) == len(result.on) == len(MESSAGES)
    assert all(t.speculation == "" for t in result.off)  # off: nothing drafted
    assert all(t.speculation for t in result.on)  # on: every turn says what came of it
    row = speculation.rows(result)
    assert row["used"] + row["discarded"] + row["skipped"] == row["turns"] == 5
    # a used draft is the reply: that turn took one round where, off, it took two
    assert row["used"] == sum(t.rounds == 1 for t in result.on) > 0
    assert row["one_round_on"] > row["one_round_off"] == 0
    tokens_off = sum(t.prompt_tokens for t in result.off)
    assert sum(t.prompt_tokens for t in result.on) >= tokens_off  # drafts are paid for
    lines = speculation.targets([row])
    assert any("median time to reply" in line for line in lines)
    assert all(line.endswith(("| met |", "| MISS |")) for line in lines[2:])
    assert "reference" in speculation.table([row])
