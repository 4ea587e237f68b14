"""Values named with the request that starts a journey ("I want to transfer 200 dollars") are
reported by the offline model for the later step that asks for them — only when a cue names
them (a currency, "account ID …"), never a bare number the customer said for another purpose
("my username is 500"), never a secret. The engine keeps them only when grounded
(`engine.matching.values_ahead`); these tests run the real engine turn on the offline model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from infra.conversation_tests import Models, load_file, run_once
from infra.llm.factory import build_embedder, build_llm
from infra.offline.slots import Slot
from infra.offline.values import extract_values

BANKING = Path(__file__).resolve().parents[2] / "examples" / "banking" / "agent.yaml"
TRANSFER_FIELDS = [Slot("to_account_id"), Slot("amount", kind="number")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I want to transfer 200 dollars", {"amount": "200"}),
        ("transfer $200 please", {"amount": "200"}),
        ("transfer to account id 1234324", {"to_account_id": "1234324"}),
        ("transfer money, my username is 500", {}),
        ("I'd like to transfer money, I have 3 accounts", {}),
    ],
)
def test_only_values_a_cue_names_are_taken_from_text_not_written_for_the_fields(
    text: str, expected: dict[str, str]
) -> None:
    assert extract_values(TRANSFER_FIELDS, text, named_only=True) == expected


def _run(tmp_path: Path, turns: str) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(
        f"agent: {BANKING}\ntools: examples.banking.tools\nsetup: examples.banking.bank:reset_bank\n"
        f"name: case\nturns:\n{turns}",
        encoding="utf-8",
    )
    (test,) = load_file(path)
    models = Models(build_llm("offline"), build_embedder("offline"), real=False)
    asyncio.run(run_once(test, models)).raise_for_failure()


def test_an_amount_said_with_the_request_is_used_after_the_prerequisites(tmp_path: Path) -> None:
    _run(
        tmp_path,
        """
  - {customer: "I want to transfer 200 dollars", expect: {journey_step: {authenticate: ask_username}}}
  - {customer: "seldo"}
  - {customer: "monkey"}
  - {customer: "Checking", expect: {no_tool_called: [transfer_money]}}
  - {customer: "1234324", expect: {tool_called: {tool: transfer_money, arguments: {amount: 200, to_account_id: "1234324"}}}}
""",
    )


def test_a_number_said_for_another_purpose_is_never_the_amount(tmp_path: Path) -> None:
    # "500" is the username here: the transfer must still ask how much, and move only what the
    # customer then says.
    _run(
        tmp_path,
        """
  - {customer: "I want to transfer money, my username is 500", expect: {no_tool_called: true}}
  - {customer: "seldo"}
  - {customer: "monkey"}
  - {customer: "Checking"}
  - {customer: "1234324", expect: {no_tool_called: [transfer_money], journey_step: {transfer: ask_amount}}}
  - {customer: "75", expect: {tool_called: {tool: transfer_money, arguments: {amount: 75}}}}
""",
    )


def test_a_password_said_with_the_request_is_never_kept_as_a_value(tmp_path: Path) -> None:
    _run(
        tmp_path,
        """
  - {customer: "transfer money please, my password is 900", expect: {no_tool_called: true}}
  - {customer: "seldo", expect: {journey_step: {authenticate: ask_password}}}
  - {customer: "monkey"}
  - {customer: "Checking"}
  - {customer: "1234324", expect: {no_tool_called: [transfer_money], journey_step: {transfer: ask_amount}}}
""",
    )
