"""Reporting conversation test outcomes: the terminal summary and JUnit XML for CI."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from infra.conversation_tests import JUDGED_SKIPPED_NOTE, TestOutcome


@dataclass(frozen=True)
class Totals:
    """Counts over a suite: tests passed (every run) and failed, and skipped judged checks."""

    passed: int
    failed: int
    skipped_judgements: int

    @classmethod
    def of(cls, outcomes: list[TestOutcome]) -> Totals:
        passed = sum(o.passed for o in outcomes)
        skipped = sum(len(o.runs[0].skipped_judgements) for o in outcomes if o.runs)
        return cls(passed, len(outcomes) - passed, skipped)


def test_label(outcome: TestOutcome) -> str:
    """`file :: name`, the way a test is named in every report."""
    source = outcome.test.source
    return f"{source} :: {outcome.test.name}" if source else outcome.test.name


def render_outcome(outcome: TestOutcome) -> str:
    """One test's lines: a mark, its label, pass^k when repeated, and the first failure's block."""
    k = len(outcome.runs)
    mark = "✓" if outcome.passed else "✗"
    repeated = f"  [{outcome.passes}/{k} runs passed, pass^{k} {mark}]" if k > 1 else ""
    lines = [f"{mark} {test_label(outcome)}{repeated}"]
    failed = outcome.first_failure()
    if failed is not None:
        run = outcome.runs.index(failed) + 1
        if k > 1:
            lines.append(f"  first failing run: {run} of {k}")
        lines.append(failed.describe_failure())
    for note in outcome.runs[0].skipped_judgements if outcome.runs else []:
        lines.append(f"  skipped judged expectation, {note}")
    return "\n".join(lines)


def render_outcomes(outcomes: list[TestOutcome]) -> list[str]:
    """Every test's lines (`render_outcome`), an invalid agent's problems told once: the
    later tests of that agent say only that they did not run."""
    told: set[Path] = set()
    rendered = []
    for outcome in outcomes:
        failed = outcome.first_failure()
        agent = failed.invalid_agent if failed is not None else None
        if agent is not None and agent in told:
            rendered.append(f"✗ {test_label(outcome)}\n  not run: agent {agent} is invalid (above)")
            continue
        if agent is not None:
            told.add(agent)
        rendered.append(render_outcome(outcome))
    return rendered


def render_summary(totals: Totals, repeat: int) -> str:
    """The last line: counts, and why judged expectations did not run."""
    runs = f" (each run {repeat} times; a test passes when all its runs pass)" if repeat > 1 else ""
    line = f"{totals.passed} passed, {totals.failed} failed{runs}"
    if totals.skipped_judgements:
        line += (
            f"; {totals.skipped_judgements} judged expectation(s) skipped with the offline model "
            "(set OPENAI_API_KEY to judge them)"
        )
    return line


def write_junit(outcomes: list[TestOutcome], path: Path) -> None:
    """JUnit XML: one testcase per test (classname = its file), a failure with the failure block,
    skipped judged expectations in system-out."""
    totals = Totals.of(outcomes)
    suite = ET.Element(
        "testsuite",
        name="waypoint conversation tests",
        tests=str(len(outcomes)),
        failures=str(totals.failed),
        errors="0",
        skipped="0",
        time=f"{sum(r.seconds for o in outcomes for r in o.runs):.3f}",
    )
    for outcome in outcomes:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=str(outcome.test.source or "conversation"),
            name=outcome.test.name,
            time=f"{sum(r.seconds for r in outcome.runs):.3f}",
        )
        failed = outcome.first_failure()
        if failed is not None:
            k = len(outcome.runs)
            failure = ET.SubElement(
                case, "failure", message=f"{outcome.passes}/{k} runs passed (pass^{k} failed)"
            )
            failure.text = failed.describe_failure()
        notes = outcome.runs[0].skipped_judgements if outcome.runs else []
        if notes:
            ET.SubElement(case, "system-out").text = "\n".join(
                f"{note} ({JUDGED_SKIPPED_NOTE})" for note in notes
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
