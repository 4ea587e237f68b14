"""Speculation (`engine.stages.speculation`), measured: `python -m bench speculation`.

The same conversations run twice through the real `TurnEngine` on in-memory ports — speculation
off, then on — and per turn: the sequential LLM rounds, the time a customer waits for the reply
at a fixed latency per call (the slowest call of each round, summed, plus the engine's own CPU,
the predictor's included), and the prompt tokens of every call (discarded drafts included).

Two models answer, and they are not the same: the *model* stands in for the real one, the
*predictor* is the offline model (`infra.llm.factory.OfflinePredictor`) — so a draft is used
only when two different deciders agree on the whole reply prompt, as a real model and the
predictor would have to. Workloads:

- `reference` — the comparison's scenario (`python -m bench compare`: its agent and messages),
  the benchmark's fake model (`bench.fake_llm.BenchLLM`); its `lookup_order` is declared
  `speculative` (it only reads), so a predicted lookup runs ahead (`engine.stages.tools_ahead`),
  its `submit_return` (a write) is not;
- `banking` — the banking demo's conversations (examples/banking/tests), the same fake model;
  the agent declares a secret (the password), so it does not speculate; the same conversations
  run again with the password not declared secret, to show what an agent without one gets;
- `paraphrase` — the paraphrase suite's conversations (tests/paraphrase; three agents, many
  wordings), the offline model answering and the benchmark's fake predicting, roles swapped:
  the fake is the one that was not written for those agents.

What it leaves out: a real model's latency varies per call and grows with its output; a real
model and the offline predictor may agree more or less often than these two fakes do.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fake_llm import BenchLLM, LatencyModel
from bench.harness import TurnRunner
from bench.ports import in_memory_ports
from bench.synthetic_tools import SyntheticTools
from bench.tokens import EstimateCounter
from engine.agent_config import Speculation
from engine.model import AgentSnapshot
from engine.ports import SchematicLLM, ToolDispatcher
from engine.sessions.session import SessionState
from infra.embeddings import HashingEmbedder
from infra.llm.factory import OfflinePredictor

ROOT = Path(__file__).resolve().parents[1]
LATENCY_MS = 400.0


@dataclass
class Turn:
    rounds: int
    wait_ms: float  # rounds × latency + engine CPU
    prompt_tokens: int
    speculation: str
    # the calls run ahead (`engine.stages.tools_ahead`): "tool status", status used/discarded/failed
    ahead: tuple[str, ...] = ()


@dataclass
class Result:
    workload: str
    off: list[Turn] = field(default_factory=list)
    on: list[Turn] = field(default_factory=list)


def _speculating(agent: AgentSnapshot) -> AgentSnapshot:
    config = agent.config.model_copy(update={"speculation": Speculation(mode="on")})
    return agent.model_copy(update={"config": config})


async def _conversation(
    agent: AgentSnapshot,
    messages: Sequence[str],
    model: SchematicLLM,
    predictor: SchematicLLM | None,
    tools: ToolDispatcher | None,
) -> list[Turn]:
    embedder = HashingEmbedder()
    counting = model if isinstance(model, BenchLLM) else None
    runner = TurnRunner(
        in_memory_ports(embedder),
        counting or BenchLLM(LatencyModel(0.0), EstimateCounter()),
        tools=tools,
        embedder=embedder,
    )
    runner.deps.llm = model
    runner.deps.predictor = predictor
    snapshot = _speculating(agent) if predictor is not None else agent
    await runner.publish(snapshot)
    await runner.open_session(SessionState(id="s", agent_id=snapshot.id, customer_id="c"))
    turns = []
    for n, text in enumerate(messages):
        first = len(counting.calls) if counting else 0
        cpu = time.process_time()
        await runner.turn("s", text, agent=agent.id, turn=n)
        cpu_ms = (time.process_time() - cpu) * 1000
        model_ms = sum(c.self_cpu_ms for c in counting.calls[first:]) if counting else 0.0
        output = runner.last_output
        assert output is not None
        calls = output.trace.llm_calls
        rounds = len({c.round for c in calls})
        turns.append(
            Turn(
                rounds=rounds,
                wait_ms=rounds * LATENCY_MS + max(0.0, cpu_ms - model_ms),
                prompt_tokens=sum(max(c.prompt_tokens, c.prompt_chars // 4) for c in calls),
                speculation=output.trace.speculation,
                ahead=tuple(f"{c.tool} {c.status}" for c in output.trace.tools_ahead),
            )
        )
    return turns


def _bench_model() -> BenchLLM:
    return BenchLLM(LatencyModel(0.0), EstimateCounter())


async def reference() -> Result:
    from bench.compare import MESSAGES
    from bench.worked_example import reference_agent

    result = Result("reference")
    agent = reference_agent("tool_via_guideline")
    for predictor, into in ((None, result.off), (OfflinePredictor(), result.on)):
        into += await _conversation(agent, MESSAGES, _bench_model(), predictor, SyntheticTools())
    return result


def _conversations(paths: Sequence[Path]) -> list[tuple[AgentSnapshot, Any, list[str], Any]]:
    """(agent, tools registry, customer messages, setup) of each conversation file's tests."""
    import importlib

    from engine.authoring import load_agent
    from engine.toolkit import registry_from_module
    from infra.conversation_tests import load_file

    found = []
    for path in paths:
        for test in load_file(path):
            registry = registry_from_module(test.tools) if test.tools else None
            agent = load_agent(test.agent, tools=registry.specs if registry else None)
            setup = None
            if test.setup:
                module, _, function = test.setup.partition(":")
                setup = getattr(importlib.import_module(module), function)
            messages = [t.customer for t in test.turns if t.customer]
            found.append((agent, registry, messages, setup))
    return found


def secrets_undeclared(agent: AgentSnapshot) -> AgentSnapshot:
    """The agent with no field or parameter declared secret (an agent that declares one does
    not speculate: `engine.stages.speculation`); tests/hostile/test_speculation.py runs the
    hostile suite's agents this way too."""
    data = agent.model_dump()
    for journey in data["journeys"]:
        for node in journey["nodes"]:
            for collected in node["collects"]:
                collected["secret"] = False
    for tool in data["tools"]:
        for parameter in tool["parameters"]:
            parameter["secret"] = False
    return AgentSnapshot.model_validate(data).with_content_version()


async def _run_files(
    name: str, paths: Sequence[Path], model: Any, predictor: Any, *, undeclared: bool = False
) -> Result:
    from engine.toolkit import InProcessDispatcher

    result = Result(name)
    for agent, registry, messages, setup in _conversations(paths):
        agent = secrets_undeclared(agent) if undeclared else agent
        for speculating, into in ((None, result.off), (predictor(), result.on)):
            if setup is not None:
                setup()
            tools = InProcessDispatcher(registry) if registry is not None else None
            into += await _conversation(agent, messages, model(), speculating, tools)
    return result


BANKING = sorted((ROOT / "examples" / "banking" / "tests").glob("*.conv.yaml"))


async def banking() -> Result:
    return await _run_files("banking", BANKING, _bench_model, OfflinePredictor)


async def banking_undeclared() -> Result:
    """The same conversations with the password not declared secret: what an agent without a
    secret gets."""
    return await _run_files(
        "banking, password not declared secret",
        BANKING,
        _bench_model,
        OfflinePredictor,
        undeclared=True,
    )


async def paraphrase() -> Result:
    from bench.paraphrase import AGENT_FILES
    from infra.offline import OfflineLLM

    paths = [p for files in AGENT_FILES.values() for p in files]
    return await _run_files("paraphrase", paths, OfflineLLM, _bench_model)


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def rows(result: Result) -> dict[str, Any]:
    off, on = result.off, result.on
    tokens_off = sum(t.prompt_tokens for t in off)
    tokens_on = sum(t.prompt_tokens for t in on)
    return {
        "workload": result.workload,
        "turns": len(on),
        "one_round_off": sum(t.rounds == 1 for t in off) / len(off),
        "one_round_on": sum(t.rounds == 1 for t in on) / len(on),
        "median_off": statistics.median(t.wait_ms for t in off),
        "median_on": statistics.median(t.wait_ms for t in on),
        "p95_off": _p95([t.wait_ms for t in off]),
        "p95_on": _p95([t.wait_ms for t in on]),
        "extra_tokens": tokens_on / tokens_off - 1 if tokens_off else 0.0,
        "used": sum(t.speculation == "used" for t in on),
        "discarded": sum(t.speculation == "discarded" for t in on),
        "skipped": sum(t.speculation.startswith("skipped") for t in on),
        "ahead": sum(len(t.ahead) for t in on),
        "ahead_used": sum(a.endswith(" used") for t in on for a in t.ahead),
    }


async def measure() -> list[dict[str, Any]]:
    workloads = (reference, banking, banking_undeclared, paraphrase)
    return [rows(await workload()) for workload in workloads]


def table(measured: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"Time to reply at {LATENCY_MS:.0f} ms per LLM call (rounds × latency + engine CPU), "
        "speculation off → on; prompt tokens include discarded drafts.",
        "",
        "| workload | turns | one-round turns | median wait | p95 wait | extra prompt tokens "
        "| drafts used / discarded / skipped | calls run ahead (taken) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in measured:
        lines.append(
            f"| {r['workload']} | {r['turns']} "
            f"| {r['one_round_off']:.0%} → {r['one_round_on']:.0%} "
            f"| {r['median_off']:.0f} → {r['median_on']:.0f} ms "
            f"| {r['p95_off']:.0f} → {r['p95_on']:.0f} ms "
            f"| {r['extra_tokens']:+.0%} "
            f"| {r['used']} / {r['discarded']} / {r['skipped']} "
            f"| {r['ahead']} ({r['ahead_used']}) |"
        )
    return "\n".join(lines)


# The targets (issue #34), on the reference scenario with speculation on.
MEDIAN_TARGET = 1.3  # × one call's latency
EXTRA_TOKENS_TARGET = 0.30  # extra prompt tokens, discarded drafts included
BLOCK = "speculation"
HEADING = "## Speculation: the reply in the same round as matching (`python -m bench speculation`)"


def targets(measured: Sequence[dict[str, Any]]) -> list[str]:
    """The targets on the reference scenario, each with its margin (MISS when missed)."""
    ref = next(r for r in measured if r["workload"] == "reference")
    limit = MEDIAN_TARGET * LATENCY_MS
    rows = [
        ("median time to reply", ref["median_on"], limit, f"{ref['median_on']:.0f} ms",
         f"≤ {limit:.0f} ms ({MEDIAN_TARGET}× one call)"),
        ("extra prompt tokens", ref["extra_tokens"], EXTRA_TOKENS_TARGET,
         f"{ref['extra_tokens']:+.0%}", f"≤ +{EXTRA_TOKENS_TARGET:.0%}"),
    ]  # fmt: skip
    lines = ["| reference scenario, speculation on | measured | target | |", "|---|---:|---:|---|"]
    for name, value, limit_value, shown, wanted in rows:
        verdict = "met" if value <= limit_value else "MISS"
        lines.append(f"| {name} | {shown} | {wanted} | {verdict} |")
    return lines


def document(measured: Sequence[dict[str, Any]], seconds: float) -> str:
    ref = next(r for r in measured if r["workload"] == "reference")
    return "\n".join(
        [
            "Each workload runs twice through the real `TurnEngine` (in-memory ports): "
            "speculation off, then on (`engine.stages.speculation`). The model and the predictor "
            "are different deciders — the benchmark's fake model with the offline model "
            "predicting (reference, banking), and the offline model with the fake predicting "
            "(paraphrase) — so a draft is used only when two different models agree on the whole "
            "reply prompt. Time to reply = sequential rounds × "
            f"{LATENCY_MS:.0f} ms + the engine's CPU (the predictor's included); real models vary "
            "per call and with their output, which this leaves out.",
            "",
            table(measured),
            "",
            *targets(measured),
            "",
            f"Of the reference scenario's {ref['turns']} turns, {ref['used']} took their draft "
            'and replied in one round — among them the turn that looks the order up ("what is '
            'the shipment status of ORD-5521?"): `lookup_order` is declared `speculative` (it '
            "only reads), so the lookup the predicted decisions call for runs ahead, beside round "
            "1, and the reply is drafted with its result; the verified turn takes that outcome "
            "only for the very same call (tool, arguments, context), and runs any other call "
            f"itself (`engine.stages.tools_ahead`; {ref['ahead']} call(s) ran ahead, "
            f"{ref['ahead_used']} taken). {ref['skipped']} turn(s) were not drafted (a call "
            "to a tool not declared speculative is predicted: `submit_return`, a write, never "
            f"runs on a prediction) and {ref['discarded']} had its draft discarded (the two "
            "models matched different guidelines). The examples' tools (banking, paraphrase) "
            "are not declared speculative. The benchmark's tools answer at once; a real "
            "lookup's time is on the critical path either way (after round 1 without "
            "speculation, before the draft with it).",
            "",
            "An agent that declares a secret (banking's password, the shop's PIN) does not "
            "speculate: a draft's prompt would quote the turn's words before the turn recognised "
            "a secret in them, and no reply prompt sees a secret.",
            "",
            f"Measured in {seconds:.0f} s on this machine.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m bench speculation [--write-doc]`."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m bench speculation",
        description="Speculation off and on over three workloads: rounds, time to reply, tokens.",
    )
    parser.add_argument("--write-doc", action="store_true", help="refresh docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    print(">> speculation: three workloads, speculation off then on (about 20 s)")
    started = time.perf_counter()
    measured = asyncio.run(measure())
    seconds = time.perf_counter() - started
    print(table(measured))
    print("\n".join(targets(measured)))
    if args.write_doc:
        from bench.blocks import update_block
        from bench.document import DOC

        update_block(DOC, BLOCK, document(measured, seconds), heading=HEADING)
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
