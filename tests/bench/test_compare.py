"""`python -m bench compare` without the reference engine installed: the shared agent spec is the
reference scenario's agent, our side runs the conversation in a fresh process, and the report
puts both sides, their ratios and the not-like-for-like list into the marked block."""

from __future__ import annotations

import json
from pathlib import Path

from bench.blocks import read_block
from bench.compare import MESSAGES, Side, agent_spec, measure_ours
from bench.compare_report import NOT_LIKE_FOR_LIKE, render
from bench.synthetic import reference_agent


def test_the_spec_is_the_reference_scenarios_agent() -> None:
    spec = agent_spec()
    snapshot = reference_agent("tool_via_guideline")
    ids = {g["id"] for g in spec["guidelines"]}
    assert {f"act{i}" for i in range(25)} | {"obs0", "obs1", "applied0", "applied1"} == ids
    assert next(g for g in spec["guidelines"] if g["id"] == "act0")["tools"] == ["lookup_order"]
    assert all(g["action"] is None for g in spec["guidelines"] if g["id"].startswith("obs"))
    (journey,) = spec["journeys"]
    assert journey["conditions"] == list(snapshot.journey("returns").conditions)
    # The edges form the chain the driver rebuilds state by state, from the root down.
    reached = {journey["root"]}
    for edge in journey["edges"]:
        assert edge["source"] in reached
        if edge["target"] is not None:
            reached.add(edge["target"])
    assert {n["id"] for n in journey["nodes"]} == reached
    assert spec["messages"] == list(MESSAGES) and len(MESSAGES) == 5
    json.dumps(spec)  # plain data: the reference's driver reads it as JSON


def test_our_side_runs_the_conversation_in_a_fresh_process(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(agent_spec()), encoding="utf-8")
    ours = measure_ours(spec_path, latency_ms=0.0, runs=1)
    turns = ours.run["turns"]
    assert [t["message"] for t in turns] == list(MESSAGES)
    assert all(t["calls"] >= 2 and 1 <= t["rounds"] <= 3 for t in turns)
    assert all(t["prompt_tokens"] > 0 and t["reply"] for t in turns)
    assert ours.imports["wall_ms"] > 0 and ours.imports["modules"] > 100
    assert ours.run["peak_rss_mb"] > 0


def test_the_report_sets_both_sides_side_by_side_with_ratios(tmp_path: Path) -> None:
    turn = {
        "message": "hi",
        "calls": 4,
        "rounds": 2,
        "prompt_tokens": 3000,
        "wall_ms": 800.0,
        "engine_cpu_ms": 4.0,
    }
    ours = Side("Waypoint", "commit x", imports={"wall_ms": 500.0}, run={"turns": [turn]})
    theirs_turn = {**turn, "calls": 16, "prompt_tokens": 48000, "engine_cpu_ms": 60.0}
    theirs = Side(
        "parlant (reference)",
        "3.3.1",
        imports={"wall_ms": 4000.0},
        run={"turns": [theirs_turn], "boot": {"calls": 102, "seconds": 5.0}},
    )
    context = {"date": "d", "machine": "m", "load": "1", "latency_ms": 400.0, "seconds": 1.0}
    body = render(ours, theirs, context)
    assert "| LLM calls | 4.0 | 16.0 | 4.0× (ours 0.25×) |" in body
    assert "| prompt tokens (chars/4) | 3,000 | 48,000 | 16.0× (ours 0.06×) |" in body
    assert "| import wall ms (median) | 500 | 4,000 | 8.0× (ours 0.12×) |" in body
    assert "102 LLM calls" in body and "3.3.1" in body
    assert all(item in body for item in NOT_LIKE_FOR_LIKE)
    failed = render(ours, Side("parlant (reference)", "?", "install failed: x"), context)
    assert "**Reference side incomplete:** install failed: x" in failed


def test_the_compare_block_survives_a_bench_rewrite(tmp_path: Path) -> None:
    from bench.blocks import update_block
    from bench.config import TINY
    from bench.document import COMPARE_BLOCK, COMPARE_HEADING, write_document
    from bench.machine import describe_machine
    from bench.results import BenchResult

    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n", encoding="utf-8")
    update_block(doc, COMPARE_BLOCK, "side by side, measured", heading=COMPARE_HEADING)
    empty_run = BenchResult(machine=describe_machine(), config=TINY.describe(), started_at="now")
    write_document(empty_run, doc)  # what `python -m bench` does: the whole file rewritten
    text = doc.read_text(encoding="utf-8")
    block = read_block(text, COMPARE_BLOCK)
    assert block is not None and "side by side, measured" in block and COMPARE_HEADING in text
