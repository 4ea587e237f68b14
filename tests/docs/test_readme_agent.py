"""The README's minimal agent does what the README says it does: test_doc_snippets.py loads it;
this runs the conversation its `waypoint chat` line shows, on the offline model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.conversations.spec import ConversationTest, Expectation, ToolCallExpectation, Turn
from infra.conversation_tests import run_conversation
from tests.docs.test_doc_snippets import ROOT, _forget_modules_under, extract_blocks


def test_the_minimal_agent_asks_for_the_order_number_and_tells_where_the_order_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = [b for b in extract_blocks(ROOT / "README.md") if b.group == "minimal" and b.file]
    assert sorted(b.file for b in written) == ["agent.yaml", "tools.py"]
    for block in written:
        (tmp_path / str(block.file)).write_text(block.code + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tools", raising=False)
    try:
        _converse_and_check(tmp_path)
    finally:
        # Not through monkeypatch: its undo would put this `tools` back for the next test.
        _forget_modules_under(tmp_path)


def _converse_and_check(tmp_path: Path) -> None:
    outcome = run_conversation(
        ConversationTest(
            name="the README's parcel desk",
            agent=tmp_path / "agent.yaml",
            tools="tools",
            turns=[
                Turn(customer="hi", expect=Expectation(guideline_matched=["greet"])),
                Turn(
                    customer="where is my order?",
                    expect=Expectation(journey_step={"track": "ask_order"}, no_tool_called=True),
                ),
                Turn(
                    customer="A-1001",
                    expect=Expectation(
                        tool_called=[
                            ToolCallExpectation(
                                tool="order_status", arguments={"order_id": "A-1001"}
                            )
                        ],
                        reply_contains=["Order A-1001 is on its way."],
                        journey_completed=["track"],
                    ),
                ),
            ],
        )
    )

    outcome.raise_for_failure()
