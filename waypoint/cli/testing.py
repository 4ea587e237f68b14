"""`waypoint test`: the conversation tests of an agent (docs/conversation-tests.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from waypoint.cli.options import LLMChoice, LLMOption, _choose_llm
from waypoint.cli.program import console


def test_command(
    path: Annotated[
        Path, typer.Argument(help="a conversation test file, or a folder of *.conv.yaml")
    ] = Path("."),
    repeat: Annotated[
        int, typer.Option("--repeat", min=1, help="run each test N times; report pass^N")
    ] = 1,
    junit_xml: Annotated[
        Path | None, typer.Option("--junit-xml", help="also write JUnit XML here (for CI)")
    ] = None,
    llm: LLMOption = LLMChoice.AUTO,
) -> None:
    """Run conversation tests: scripted turns against your agent, expectations checked per turn
    (docs/conversation-tests.md). Exit code 1 when a test fails, 2 when none can run."""
    from infra.conversation_report import Totals, render_outcomes, render_summary, write_junit
    from infra.conversation_tests import InvalidConversationTest, collect_tests, run_tests

    console.print(f"[dim]model: {_choose_llm(llm)}[/dim]")
    try:
        tests = collect_tests(path)
    except InvalidConversationTest as exc:
        console.print(f"✗ {exc}", style="red", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if not tests:
        console.print(f"[red]✗ no conversation tests (*.conv.yaml) under {path}[/red]")
        raise typer.Exit(2)
    outcomes = run_tests(tests, repeat=repeat)
    for lines in render_outcomes(outcomes):  # an invalid agent's problems once, not per test
        console.print(lines, markup=False, highlight=False, soft_wrap=True)
    totals = Totals.of(outcomes)
    console.print(render_summary(totals, repeat), markup=False, highlight=False, soft_wrap=True)
    if junit_xml is not None:
        write_junit(outcomes, junit_xml)
    raise typer.Exit(1 if totals.failed else 0)
