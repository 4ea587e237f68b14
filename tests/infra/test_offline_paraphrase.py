"""The offline model on wordings outside the demo's: regression tests for the defects of issue #21.

Each test states one decision as the evaluation set does (`bench.eval`): the engine's own prompt
builder makes the prompt, the offline model answers, and the engine's verification and typing
(`verify_advancement`, `coerce_collected`) produce the outcome that is asserted. The agents are
the evaluation agents (bench/eval/agents: a bank, a tea and coffee shop, a clinic's bookings)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.eval.cases import EvalCase
from bench.eval.decisions import EVALUATORS
from bench.eval.runner import eval_config
from engine.llm import TurnLLM
from engine.trace import TurnTrace
from infra.offline import OfflineLLM

TRANSFER_TO_CONFIRM = ["ask_source", "ask_destination", "ask_amount", "check", "enough", "confirm"]
TRANSFER_TO_TOO_LOW = ["ask_source", "ask_destination", "ask_amount", "check", "enough", "too_low"]
KNOWN_TRANSFER = {"account": "savings", "to_account_id": "55-1234", "amount": 300}
ORDER_TO_CONFIRM = ["ask_product", "pick_size", "ask_quantity", "ask_address", "confirm"]
KNOWN_ORDER = {"product": "Earl Grey", "quantity": 2, "address": "14 Elm Road"}


async def decide(kind: str, **case: Any) -> Any:
    """The outcome of one decision, as the engine sees it after verification."""
    spec = EvalCase(id="regression", expect=case.pop("expect", {"step": "END"}), **case)
    trace = TurnTrace(turn_id="t", session_id="s", agent_id=spec.agent, agent_version="v")
    llm = TurnLLM(OfflineLLM(), eval_config("offline-heuristic"), trace)
    return (await EVALUATORS[kind](llm, spec)).got


async def step_after(message: str, **case: Any) -> tuple[str, dict[str, Any]]:
    got = await decide("journey_node", conv=[f"C: {message}"], **case)
    return got["step"], got["values"]


# --------------------------------------------------------------------------------------------------
# A confirm step with two branches never loops


@pytest.mark.parametrize(
    "answer", ["yes", "yep", "go ahead, do it", "sounds good 👍", "perfect, send it"]
)
async def test_confirm_step_with_a_change_branch_advances_on_any_yes(answer: str) -> None:
    step, values = await step_after(
        answer, agent="bank", journey="transfer", path=TRANSFER_TO_CONFIRM, known=KNOWN_TRANSFER
    )
    assert (step, values) == ("send", {"confirmed": True})


@pytest.mark.parametrize(
    ("answer", "agent", "journey", "path", "known", "back_to"),
    [
        (
            "wait, I want to change the amount",
            "bank",
            "transfer",
            TRANSFER_TO_CONFIRM,
            KNOWN_TRANSFER,
            "ask_amount",
        ),
        ("no", "bank", "transfer", TRANSFER_TO_CONFIRM, KNOWN_TRANSFER, "ask_amount"),
        (
            "hmm, can I change how many?",
            "shop",
            "order",
            ORDER_TO_CONFIRM,
            KNOWN_ORDER,
            "ask_quantity",
        ),
    ],
)
async def test_confirm_step_takes_the_change_branch_when_the_customer_wants_a_change(
    answer: str, agent: str, journey: str, path: list[str], known: dict[str, Any], back_to: str
) -> None:
    step, _ = await step_after(answer, agent=agent, journey=journey, path=path, known=known)
    assert step == back_to


async def test_confirm_step_stays_to_ask_again_when_the_answer_is_neither() -> None:
    step, values = await step_after(
        "how long will it take to arrive?",
        agent="bank",
        journey="transfer",
        path=TRANSFER_TO_CONFIRM,
        known=KNOWN_TRANSFER,
    )
    assert (step, values) == ("confirm", {})


# --------------------------------------------------------------------------------------------------
# Re-answers after a value did not work


@pytest.mark.parametrize(
    "answer", ["300", "ok, 300 then", "how about 300?", "actually, make it 300"]
)
async def test_a_new_amount_after_too_much_is_taken_in_any_wording(answer: str) -> None:
    step, values = await step_after(
        answer,
        agent="bank",
        journey="transfer",
        path=TRANSFER_TO_TOO_LOW,
        known={**KNOWN_TRANSFER, "amount": 1500},
    )
    assert (step, values) == ("check", {"amount": "300"})  # a Decimal, shown as text


async def test_a_reasked_step_does_not_pass_on_the_value_that_failed() -> None:
    step, values = await step_after(
        "what is my balance then?",
        agent="bank",
        journey="transfer",
        path=TRANSFER_TO_TOO_LOW,
        known={**KNOWN_TRANSFER, "amount": 1500},
    )
    assert (step, values) == ("too_low", {})
