"""Values bound to what the customer said *for them* (issue #31): each finding of the review, on the
banking concierge with a schema-valid model that reports another value the customer did say —
an earlier amount, a number from another sentence, a piece of an id, the tail of a decimal, the
first transfer's amount, another account's lookup. No money moves on such a value unless the
customer saw it in the engine's own confirmation line and said yes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.sessions.session import EventKind
from tests.hostile.misreport import Misreport, moved, transfers
from tests.hostile.world import Run, example, run_with

A = "alice"
LOGIN = ["Transfer money", "seldo", "monkey", "Checking"]


async def bank(script: list[str], rewrites: dict[str, dict[str, str]]) -> Run:
    llm = Misreport(rewrites)
    return await run_with(example("banking"), llm, [(A, t) for t in script])


def confirmations(run: Run) -> list[str]:
    return [
        t.output.reply.text or ""
        for t in run.turns
        if t.output.reply is not None and "Please confirm" in (t.output.reply.text or "")
    ]


def amounts(run: Run) -> list[str]:
    return [str(a["amount"]) for a in moved(run)]


async def test_an_amount_said_earlier_for_something_else_is_not_the_answer() -> None:
    # "40" at the amount question; the model reports the 900 of "my rent is $900".
    run = await bank(
        ["Hi, my rent is $900", *LOGIN, "To account ID 1234324", "40"], {"40": {"amount": "900"}}
    )

    assert "900.00" not in transfers()
    assert run.llm.corrupted > 0
    last = run.turns[-1].output
    assert last.state.pending_confirmation is not None  # shown, never run silently
    assert "900.00 USD" in (last.reply.text or "")


async def test_one_of_two_amounts_in_the_answer_is_shown_before_it_runs() -> None:
    run = await bank(
        [*LOGIN, "To account ID 1234324", "it's $40 this time, not the $900"],
        {"it's $40 this time, not the $900": {"amount": "900"}},
    )

    assert transfers() == []
    assert "amount 900.00 USD" in confirmations(run)[-1]


async def test_a_piece_of_an_account_id_is_never_an_amount() -> None:
    # "To account ID 1234 324": the model reads 324 as the amount, though none was given.
    run = await bank(
        [*LOGIN, "To account ID 1234 324"], {"To account ID 1234 324": {"amount": "324"}}
    )

    assert transfers() == []
    last = run.turns[-1].output
    assert [c for c in last.state.collected if c.name == "amount"] == []
    assert any("ignored amount=" in n for n in last.trace.notes)


async def test_the_tail_of_a_decimal_is_never_an_amount() -> None:
    # "2,50 €": the model reads 50 out of the decimal.
    run = await bank([*LOGIN, "To account ID 1234324", "2,50 €"], {"2,50 €": {"amount": "50"}})

    assert transfers() == []
    assert all("50.00 USD" not in c for c in confirmations(run))


async def test_a_locale_ambiguous_amount_is_shown_unambiguously_and_asked() -> None:
    # "1.000" is a thousand in Germany and one in the US: never run on a guess, never shown as
    # "$1.000".
    run = await bank([*LOGIN, "To account ID 1234324", "1.000"], {"1.000": {"amount": "1"}})

    assert transfers() == []
    [asked] = confirmations(run)
    assert "amount 1.00 USD" in asked and "1.000" not in asked.split("amount")[-1]


async def test_a_yes_runs_only_the_call_it_was_asked_for() -> None:
    # "forty" is confirmed ($40 shown); on the yes the model re-reports the 400 said earlier.
    run = await bank(
        ["I earn 400 a week", *LOGIN, "To account ID 1234324", "forty", "yes"],
        {"yes": {"amount": "400"}},
    )

    assert transfers() == ["40.00"]
    assert "amount 40.00 USD" in confirmations(run)[-1]


async def test_a_second_transfer_never_reuses_the_first_ones_amount() -> None:
    script = [*LOGIN, "To account ID 1234324", "500", "Transfer money", "1234324", "40"]
    run = await bank(script, {"40": {"amount": "500"}})

    assert transfers() == ["500.00"]  # the first; the second is shown and waits for a yes
    assert run.turns[-1].output.state.pending_confirmation is not None
    assert "500.00 USD" in confirmations(run)[-1]


async def test_an_earlier_lookup_of_another_account_is_not_the_account_to_debit() -> None:
    # The Savings balance was checked in an earlier request; "from my checking account" must
    # not debit Savings without the customer seeing it.
    script = [
        "I want to log in", "seldo", "monkey", "What is the balance of my Savings account?",
        "Savings", "Transfer $40 from my checking account to 1234324",
    ]  # fmt: skip
    run = await bank(script, {})

    ran = moved(run)
    assert all(a["account_id"] != "5555000011" for a in ran), ran
    last = run.turns[-1].output
    if last.state.pending_confirmation is not None:
        assert "5555000011" in (last.reply.text or "")  # shown, for the customer to refuse


async def test_a_value_the_customer_never_said_is_asked_for() -> None:
    run = await bank([*LOGIN, "To account ID 1234324", "40"], {"40": {"amount": "25000"}})

    assert transfers() == []
    assert confirmations(run) == []


def tool_statuses(run: Run) -> list[tuple[str, str]]:
    return [(c.tool, c.status) for t in run.turns for c in t.output.trace.tool_calls]


def _events(run: Run, kind: EventKind) -> list[Any]:
    return [e for t in run.turns for e in t.output.new_events if e.kind is kind]


def _short_of_tools(max_tool_iterations: int) -> Any:
    """The banking example with a smaller tool budget per turn."""
    ex = example("banking")
    config = ex.agent.config.model_copy(update={"max_tool_iterations": max_tool_iterations})
    return replace(ex, agent=ex.agent.model_copy(update={"config": config}))


async def test_a_payment_the_tool_budget_left_for_later_never_runs_on_a_no() -> None:
    # One tool round per turn: "500" runs the funds check, and the transfer step it leads to is
    # left for the next message. A "no" — or anything but a yes to it — must not run it.
    ex = _short_of_tools(1)
    script = [*LOGIN, "thanks", "To account ID 1234324", "500", "no"]
    run = await run_with(ex, Misreport({}), [(A, t) for t in script])

    assert transfers() == []
    left = run.turns[-2].output
    assert left.state.pending_confirmation is not None
    assert "amount 500.00 USD" in (left.reply.text or "")


async def test_a_payment_left_for_later_asks_again_after_another_question() -> None:
    ex = _short_of_tools(1)
    script = [*LOGIN, "thanks", "To account ID 1234324", "500", "what time do you close?", "hi"]
    run = await run_with(ex, Misreport({}), [(A, t) for t in script])

    assert transfers() == []
    assert run.turns[-1].output.state.pending_confirmation is not None

    again = await run_with(ex, Misreport({}), [(A, t) for t in [*script[:-1], "yes"]])
    assert transfers() == ["500.00"]
    assert again.turns[-1].output.state.pending_confirmation is None
