"""`trace_record` is what a turn commits: `TurnTrace.model_dump(mode="json")`, with a long list of
held-back ids copied instead of serialized one by one (#34, sixth pass). Same dict, same keys in
the same order, same JSON, whatever the list's length."""

from __future__ import annotations

import json
import random

import pytest

from engine.trace import (
    LLMCallRecord,
    MatchRecord,
    StageTiming,
    ToolCallRecord,
    TurnTrace,
    trace_record,
)


def _trace(held: int, seed: int) -> TurnTrace:
    generator = random.Random(seed)
    trace = TurnTrace(
        turn_id=f"t{seed}",
        session_id="s1",
        agent_id="bank",
        agent_version="v1",
        matches=[
            MatchRecord(guideline_id=f"g{i}", batch="actionable", matched=i % 2 == 0, score=i)
            for i in range(generator.randint(0, 40))
        ],
        stages=[StageTiming(stage="recall", ms=1.25), StageTiming(stage="match", ms=0.5)],
        high_probability_journeys=["j1", "j2"],
        collected={"transfer.amount": "40"},
        notes=["a note"],
        handoff={"trigger": "x", "why": None} if seed % 2 else None,
        tool_calls=[ToolCallRecord(call_id="c1", tool="lookup", arguments={"n": 1.5}, status="ok")]
        if seed % 3
        else [],
        llm_calls=[LLMCallRecord(purpose="match", schema_name="Match", model="m", prompt_tokens=12)]
        if seed % 2
        else [],
    )
    trace.held_back_guideline_ids = [f"g{generator.randint(0, 9_999)}" for _ in range(held)]
    return trace


@pytest.mark.parametrize("held", [0, 1, 999, 1_000, 1_001, 5_149])
def test_the_record_is_the_traces_json_dump(held: int) -> None:
    for seed in range(4):
        trace = _trace(held, seed)
        expected = trace.model_dump(mode="json")
        record = trace_record(trace)
        assert record == expected
        assert list(record) == list(expected)
        assert json.dumps(record) == json.dumps(expected)
        assert record["held_back_guideline_ids"] is not trace.held_back_guideline_ids
