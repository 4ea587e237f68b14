"""The offline model on wordings outside the demo's: regression tests for the defects of issue #21.

Each test states one decision as the evaluation set does (`bench.eval`): the engine's own prompt
builder makes the prompt, the offline model answers, and the engine's verification and typing
(`verify_advancement`, `coerce_collected`) produce the outcome that is asserted. The agents are
the evaluation agents (bench/eval/agents: a bank, a tea and coffee shop, a clinic's bookings)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.eval.cases import EvalCase
from bench.eval.cases import context as case_context
from bench.eval.decisions import EVALUATORS
from bench.eval.runner import eval_config
from engine.compose import ComposedReply, CompositionInput, Instruction, build_compose_prompt
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


# --------------------------------------------------------------------------------------------------
# Values: references to offered options, the agent's own vocabulary, answers that are not values

ASK_SOURCE = "A: Which account should the money come from, checking or savings?"


async def values_after(*conv: str, **case: Any) -> dict[str, Any]:
    got = await decide("values", conv=list(conv), **case)
    return dict(got["values"])


@pytest.mark.parametrize(
    ("answer", "account"),
    [
        ("the checking one", "checking"),
        ("the second", "savings"),
        ("the first one please", "checking"),
        ("from my current account", "checking"),  # a glossary synonym of "checking"
        ("the rainy-day account", "savings"),
    ],
)
async def test_an_offered_option_is_understood_by_reference(answer: str, account: str) -> None:
    values = await values_after(
        "C: transfer please",
        ASK_SOURCE,
        f"C: {answer}",
        agent="bank",
        journey="transfer",
        path=["ask_source"],
    )
    assert values == {"account": account}


async def test_the_order_the_agent_offered_options_in_decides_the_second() -> None:
    values = await values_after(
        "C: transfer please",
        "A: From savings or checking?",
        "C: the second one",
        agent="bank",
        journey="transfer",
        path=["ask_source"],
    )
    assert values == {"account": "checking"}


async def test_a_destination_number_is_not_taken_as_the_source_account() -> None:
    values = await values_after(
        "C: transfer please",
        ASK_SOURCE,
        "C: it goes to 55-1234",
        agent="bank",
        journey="transfer",
        path=["ask_source"],
    )
    assert values == {}


@pytest.mark.parametrize("answer", ["thanks, bye", "ok thank you", "hello"])
async def test_thanks_and_greetings_are_never_taken_as_a_text_value(answer: str) -> None:
    values = await values_after(
        "C: order",
        "A: Which tea or coffee would you like?",
        f"C: {answer}",
        agent="shop",
        journey="order",
        path=["ask_product"],
    )
    assert values == {}


async def test_a_text_answer_drops_the_request_around_it() -> None:
    values = await values_after(
        "C: order",
        "A: Which tea or coffee would you like?",
        "C: I'll have the Colombian decaf please",
        agent="shop",
        journey="order",
        path=["ask_product"],
    )
    assert values == {"product": "Colombian decaf"}


async def test_the_first_of_the_offered_times_is_taken_by_reference() -> None:
    values = await values_after(
        "A: We have 10:00 or 14:30. Which would you like?",
        "C: the first one",
        agent="clinic",
        journey="booking",
        path=["ask_service", "ask_date", "slots", "any_free", "ask_time"],
        known={"service": "massage", "date": "2026-02-12"},
    )
    assert values == {"time": "10:00"}


async def test_a_company_name_becomes_the_ticker_the_tool_description_pairs_it_with() -> None:
    got = await decide(
        "tool_arguments",
        agent="bank",
        offered={"stock_price": "The customer asks for the price of a company's stock"},
        conv=["C: What is Apple's stock price?"],
    )
    assert got == {"stock_price": {"symbol": "AAPL"}}


# --------------------------------------------------------------------------------------------------
# Conditions by meaning, in the agent's words — no domain lists in the offline model


async def verdict(agent: str, condition_id: str, message: str) -> bool:
    got = await decide(
        "actionable", agent=agent, conv=[f"C: {message}"], expect={condition_id: True}
    )
    return bool(got[condition_id])


@pytest.mark.parametrize(
    "message", ["I'd like to make a transfer please", "I want to transfer money to my sister"]
)
async def test_a_request_naming_the_conditions_subject_matches(message: str) -> None:
    assert await verdict("bank", "journey:transfer:condition:0", message)


async def test_a_question_about_a_past_transfer_is_not_a_request_for_one() -> None:
    message = "did the transfer I made yesterday arrive?"
    assert not await verdict("bank", "journey:transfer:condition:0", message)


async def test_the_agents_glossary_decides_what_a_domain_word_means() -> None:
    # "current account" means checking only because the bank's glossary says so
    values = await values_after(
        "C: transfer please",
        "A: Which account should the money come from?",
        "C: my everyday account",
        agent="bank",
        journey="transfer",
        path=["ask_source"],
    )
    assert values == {"account": "checking"}


def test_the_offline_model_has_no_company_to_ticker_table() -> None:
    from infra.offline.slots import Slot
    from infra.offline.values import extract_values

    symbol = Slot("symbol")
    assert extract_values([symbol], "what is Apple's stock price?", answering=["symbol"]) != {
        "symbol": "AAPL"
    }
    assert extract_values([symbol], "what about MSFT?") == {"symbol": "MSFT"}


# --------------------------------------------------------------------------------------------------
# Composition never shows raw structures


async def reply_to(case: EvalCase, data: CompositionInput) -> str:
    prompt = build_compose_prompt(case_context(case), data)
    generation = await OfflineLLM().generate(prompt, ComposedReply, model="offline")
    return generation.value.message


SIZES = [
    {"id": "small", "label": "Small (250 g)"},
    {"id": "medium", "label": "Medium (500 g)"},
    {"id": "large", "label": "Large (1 kg)"},
]


def _raw(text: str) -> bool:
    return any(mark in text for mark in ("{", "}", "[", "]", "'id'", "0 id", "0 label"))


async def test_a_list_from_a_tool_is_read_out_as_its_labels() -> None:
    case = EvalCase(
        id="sizes",
        agent="shop",
        conv=["C: which sizes do you have?"],
        expect={},
        ran={"choose_size": SIZES},
    )
    text = await reply_to(case, CompositionInput())
    assert "Small (250 g), Medium (500 g) and Large (1 kg)" in text
    assert not _raw(text), text


async def test_a_record_from_a_tool_is_read_out_as_sentences() -> None:
    case = EvalCase(
        id="status",
        agent="shop",
        conv=["C: where is LB-1042?"],
        expect={},
        ran={"track_order": {"order_id": "LB-1042", "status": "out for delivery", "eta": None}},
    )
    text = await reply_to(case, CompositionInput())
    assert "the order id is LB-1042" in text and "the status is out for delivery" in text
    assert "None" not in text and not _raw(text), text


async def test_a_picked_option_is_shown_by_its_label_not_as_a_structure() -> None:
    case = EvalCase(id="pick", agent="shop", conv=["C: large please"], expect={})
    data = CompositionInput(
        instructions=[Instruction("i1", "Tell the customer the size they picked", "g")],
        collected={"size": SIZES[2]},
    )
    text = await reply_to(case, data)
    assert "Large (1 kg)" in text and not _raw(text), text


# --------------------------------------------------------------------------------------------------
# A refused value: the reply says why


async def test_a_refused_amount_is_asked_again_with_the_reason() -> None:
    from tests.infra.test_offline_llm import Chat, check_funds, transfer_agent, transfer_money

    chat = Chat(transfer_agent(), check_funds, transfer_money)
    await chat.start()
    await chat.say("I want to transfer money to account 1234324")
    out = await chat.say("-50")
    assert "amount must be greater than 0" in out.reply.text, out.reply.text
    assert out.state.journey_paths["transfer"][-1] == "ask"
    assert not [c for c in out.state.collected if c.name == "amount"]
