"""The paraphrase suite (tests/paraphrase): three agents, many wordings, judged by outcomes.

`python -m bench paraphrase [--write-doc]` runs every conversation once on the offline model (or
the model the environment selects), prints the pass rate per agent and, with `--write-doc`,
writes it into docs/BENCHMARKS.md (the `paraphrase` block). `tests/paraphrase/test_paraphrase.py`
runs the same conversations under pytest, one test each.

Every turn of every conversation also must not show a raw structure (`RAW_MARKERS`): whatever a
tool returned is told in sentences, never as a dict or a list."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from engine.conversations.spec import ConversationTest
from infra.conversation_tests import Models, TestOutcome, load_file, run_tests

ROOT = Path(__file__).resolve().parents[1]
SUITE_DIR = ROOT / "tests" / "paraphrase"
SEED = ROOT / "examples" / "banking" / "tests" / "seed_transfer.conv.yaml"
# agent → the files holding its conversations (the seed conversation counts for banking)
AGENT_FILES: dict[str, tuple[Path, ...]] = {
    "banking": (SEED, SUITE_DIR / "conversations" / "banking.yaml"),
    "shop": (SUITE_DIR / "conversations" / "shop.yaml",),
    "clinic": (SUITE_DIR / "conversations" / "clinic.yaml",),
}
KNOWN_FAILURES = SUITE_DIR / "known_failures.yaml"
# What a reply shows when a structure leaks into it: the braces and brackets of a dict or a list,
# a quoted key ("'id': "). Checked on every turn of every conversation.
RAW_MARKERS = ("{", "}", "[", "]", "': ")
BLOCK = "paraphrase"
HEADING = "## Paraphrase suite (`python -m bench paraphrase`)"


@dataclass(frozen=True)
class Conversation:
    """One conversation of the suite: its agent, its test, and why it may fail (known failure)."""

    agent: str
    test: ConversationTest
    known_failure: str | None = None

    @property
    def id(self) -> str:
        return f"{self.agent}::{self.test.name}"


def with_raw_guard(test: ConversationTest) -> ConversationTest:
    """`test` with every turn also expecting a reply free of raw structures."""
    turns = []
    for turn in test.turns:
        kept = [m for m in RAW_MARKERS if m not in turn.expect.reply_not_contains]
        expect = turn.expect.model_copy(
            update={"reply_not_contains": [*turn.expect.reply_not_contains, *kept]}
        )
        turns.append(turn.model_copy(update={"expect": expect}))
    return test.model_copy(update={"turns": turns})


def known_failures(path: Path = KNOWN_FAILURES) -> dict[str, str]:
    """`agent::test name` → the reason it fails today (tests/paraphrase/known_failures.yaml)."""
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(k): str(v) for k, v in data.items()}


def load_suite() -> list[Conversation]:
    """Every conversation of the suite, agent by agent, in file order."""
    reasons = known_failures()
    suite = [
        Conversation(agent, with_raw_guard(test), reasons.get(f"{agent}::{test.name}"))
        for agent, files in AGENT_FILES.items()
        for file in files
        for test in load_file(file)
    ]
    names = {c.id for c in suite}
    stale = sorted(set(reasons) - names)
    if stale:
        raise ValueError(f"{KNOWN_FAILURES.name} names conversations that do not exist: {stale}")
    return suite


@dataclass
class AgentRate:
    """How one agent did: conversations passed of all, and the failures by name."""

    agent: str
    passed: int = 0
    total: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def pass_rates(results: Iterable[tuple[Conversation, bool]]) -> list[AgentRate]:
    """Per-agent pass rates from (conversation, passed) pairs, agents in suite order."""
    rates: dict[str, AgentRate] = {}
    for conversation, passed in results:
        rate = rates.setdefault(conversation.agent, AgentRate(conversation.agent))
        rate.total += 1
        rate.passed += passed
        if not passed:
            rate.failed.append(conversation.test.name)
    return list(rates.values())


def run_suite(models: Models | None = None) -> tuple[list[AgentRate], list[TestOutcome], float]:
    """Run every conversation once; the rates, each outcome, and the seconds it took."""
    suite = load_suite()
    started = time.perf_counter()
    outcomes = run_tests([c.test for c in suite], models=models)
    seconds = time.perf_counter() - started
    rates = pass_rates((c, o.passed) for c, o in zip(suite, outcomes, strict=True))
    return rates, outcomes, seconds


def console_table(rates: list[AgentRate]) -> str:
    lines = [f"{'agent':<10} {'passed':>9} {'rate':>6}"]
    for r in rates:
        lines.append(f"{r.agent:<10} {r.passed:>4}/{r.total:<4} {r.rate:>6.0%}")
    return "\n".join(lines)


def markdown_section(rates: list[AgentRate], seconds: float, model: str) -> str:
    """The BENCHMARKS.md block: what the suite is, the rate per agent, what still fails."""
    lines = [
        "Three agents in different domains, each with at least 40 conversations that vary wording, "
        "order of information, corrections, refusals and off-topic turns "
        "(`tests/paraphrase/conversations/*.yaml`; the shop is `examples/pizza`, the clinic "
        "`tests/paraphrase/clinic`). Each is judged by outcomes through the real engine turn: "
        "the right tool called with the right values, or correctly not called, and no reply "
        "showing a raw structure. The banking seed conversation "
        "(`examples/banking/tests/seed_transfer.conv.yaml`) is part of the banking set and must "
        "always pass. `make test` runs it (`tests/paraphrase/test_paraphrase.py`); known "
        "failures are listed with their reason in `tests/paraphrase/known_failures.yaml`.",
        "",
        f"Model: `{model}`; the whole suite took {seconds:.1f} s. Target: ≥ 90% per agent.",
        "",
        "| agent | conversations | passed | pass rate | target |",
        "|---|---|---|---|---|",
    ]
    for r in rates:
        verdict = "met" if r.rate >= 0.9 else "**MISS**"
        lines.append(f"| {r.agent} | {r.total} | {r.passed} | {r.rate:.0%} | {verdict} |")
    failing = [(r.agent, name) for r in rates for name in r.failed]
    seed = {t.name for t in load_file(SEED)}
    seed_failed = seed & {name for agent, name in failing if agent == "banking"}
    lines += ["", f"Seed conversation: **{'FAILED' if seed_failed else 'passed'}** (must pass)."]
    if failing:
        causes = known_failures()
        lines += ["", "Failing today, with the cause (`tests/paraphrase/known_failures.yaml`):", ""]
        for agent, name in failing:
            cause = causes.get(f"{agent}::{name}", "not a known failure: a regression").split(
                ". Seen:"
            )[0]
            lines.append(f"- {agent}: {name} — {cause}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench paraphrase [--write-doc] [--failures]`."""
    parser = argparse.ArgumentParser(
        prog="python -m bench paraphrase",
        description="Run the paraphrase suite and report the pass rate per agent.",
    )
    parser.add_argument("--write-doc", action="store_true", help="refresh docs/BENCHMARKS.md")
    parser.add_argument("--failures", action="store_true", help="print each failure's block")
    args = parser.parse_args(argv)
    from bench.blocks import update_block
    from bench.document import DOC
    from infra.conversation_tests import models_from_environment

    models = models_from_environment()
    rates, outcomes, seconds = run_suite(models)
    if args.failures:
        for outcome in outcomes:
            failure = outcome.first_failure()
            if failure is not None:
                print(f"✗ {outcome.test.name}\n{failure.describe_failure()}", file=sys.stderr)
    print(console_table(rates))
    print(f"{sum(r.total for r in rates)} conversations in {seconds:.1f} s")
    if args.write_doc:
        model = getattr(models.llm, "model", type(models.llm).__name__)
        update_block(DOC, BLOCK, markdown_section(rates, seconds, model), heading=HEADING)
        print(f"wrote {DOC}")
    return 0
