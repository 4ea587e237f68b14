"""`python -m bench offline-agents`: the pass rate of the offline model on agents written for the
measurement (bench/offline_agents/*/), per agent — how it does on agents it was not tuned on.

Each conversation test states what a reasonable model would do (README.md here). With
`--write-doc` the table goes into docs/BENCHMARKS.md (the `offline-agents` block)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.paraphrase import AgentRate, Conversation, console_table, pass_rates
from infra.conversation_tests import Models, TestOutcome, load_file, run_tests

FOLDER = Path(__file__).resolve().parent
AGENTS = ("shop", "returns", "clinic", "travel")
BLOCK = "offline-agents"
HEADING = "## The offline model on agents it was not written for (`python -m bench offline-agents`)"


def load_conversations() -> list[Conversation]:
    """Every conversation test of every agent, agent by agent, in file order."""
    return [
        Conversation(agent, test)
        for agent in AGENTS
        for file in sorted((FOLDER / agent / "tests").glob("*.conv.yaml"))
        for test in load_file(file)
    ]


def measure(models: Models | None = None) -> tuple[list[AgentRate], list[TestOutcome], float]:
    """Run every conversation once: the rates per agent, each outcome, and the seconds taken."""
    conversations = load_conversations()
    started = time.perf_counter()
    outcomes = run_tests([c.test for c in conversations], models=models)
    seconds = time.perf_counter() - started
    rates = pass_rates((c, o.passed) for c, o in zip(conversations, outcomes, strict=True))
    return rates, outcomes, seconds


def markdown_table(rates: list[AgentRate]) -> str:
    total = sum(r.total for r in rates)
    passed = sum(r.passed for r in rates)
    lines = ["| agent | conversations | passed | pass rate |", "|---|---|---|---|"]
    lines += [f"| {r.agent} | {r.total} | {r.passed} | {r.rate:.0%} |" for r in rates]
    lines.append(f"| all | {total} | {passed} | {passed / total:.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench offline-agents [--failures]`."""
    parser = argparse.ArgumentParser(
        prog="python -m bench offline-agents",
        description="The offline model on agents written for the measurement: pass rate per agent.",
    )
    parser.add_argument("--failures", action="store_true", help="print each failure's block")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    rates, outcomes, seconds = measure()
    if args.failures:
        for outcome in outcomes:
            failure = outcome.first_failure()
            if failure is not None:
                print(f"✗ {outcome.test.name}\n{failure.describe_failure()}", file=sys.stderr)
    print(markdown_table(rates) if args.markdown else console_table(rates))
    print(f"{sum(r.total for r in rates)} conversations in {seconds:.1f} s")
    return 0
