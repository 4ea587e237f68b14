"""The conversation test contract: shorthand forms, what a turn needs, how values compare."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from engine.conversations.checks import judge_prompt, same_value
from engine.conversations.spec import Expectation, Turn


def test_single_values_are_lists_of_one() -> None:
    expect = Expectation.model_validate(
        {"reply_contains": "hi", "tool_called": "lookup", "no_tool_called": "transfer"}
    )

    assert expect.reply_contains == ["hi"]
    assert [c.tool for c in expect.tool_called] == ["lookup"]
    assert expect.no_tool_called == ["transfer"]


def test_a_list_of_tool_names_is_a_list_of_tool_expectations() -> None:
    expect = Expectation.model_validate(
        {"tool_called": ["authenticate", {"tool": "transfer", "arguments": {"amount": 5}}]}
    )

    assert [(c.tool, c.arguments) for c in expect.tool_called] == [
        ("authenticate", {}),
        ("transfer", {"amount": 5}),
    ]
    with pytest.raises(ValidationError):
        Expectation.model_validate({"tool_called": [{"tol": "typo"}]})


def test_a_turn_must_say_something() -> None:
    with pytest.raises(ValidationError, match="a turn needs `customer:`"):
        Turn.model_validate({"expect": {"reply_contains": "hi"}})
    assert Turn.model_validate({"choice": "3"}).describe() == "choice '3'"


def test_a_misspelt_expectation_is_rejected_not_ignored() -> None:
    with pytest.raises(ValidationError, match="reply_contain"):
        Expectation.model_validate({"reply_contain": "hi"})


@pytest.mark.parametrize(
    ("seen", "expected", "same"),
    [
        ("500", 500, True),
        (Decimal("500.00"), 500, True),
        ("1234324", "1234324", True),
        (" Savings", "Savings", True),
        ("501", 500, False),
        ("Checking", "Savings", False),
    ],
)
def test_values_compare_as_numbers_or_text(seen: object, expected: object, same: bool) -> None:
    assert same_value(seen, expected) is same


def test_the_judge_sees_the_conversation_the_reply_and_the_expectation() -> None:
    prompt = judge_prompt(
        "The reply is polite", [("customer", "Hi"), ("agent", "Hello")], "How can I help?"
    )

    assert "customer: Hi\nagent: Hello" in prompt
    assert prompt.index("How can I help?") < prompt.index("The reply is polite")
