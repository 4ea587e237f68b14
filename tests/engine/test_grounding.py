"""Grounding of tool arguments, deterministic and model-free: each value is traced to the
customer's words, a tool result or variable of the same name, or the principal — or refused."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from engine.grounding import CustomerMessage, Evidence, ground_call
from engine.session import Event, EventKind, EventSource
from engine.tool_spec import ToolParameter, ToolSpec

TRANSFER = ToolSpec(
    name="transfer_money",
    consequential=True,
    parameters=(
        ToolParameter(name="account_id"),
        ToolParameter(name="to_account_id"),
        ToolParameter(name="amount", type="number"),
    ),
)
SEARCH = ToolSpec(
    name="search_faq",
    parameters=(ToolParameter(name="query", composed=True),),
)
PIZZA = ToolSpec(
    name="order",
    consequential=True,
    parameters=(ToolParameter(name="size", enum=("small", "medium", "large")),),
)


def said(*texts: str, **extra: object) -> Evidence:
    messages = tuple(CustomerMessage(i, t) for i, t in enumerate(texts, start=1))
    return Evidence(customer_messages=messages, **extra)  # type: ignore[arg-type]


def test_values_the_customer_said_are_grounded_directly_with_their_message() -> None:
    evidence = said(
        "transfer $40 to 1234324",
        tool_values={"account_id": [("lookup_account_id", "1234567890")]},
    )
    result = ground_call(
        TRANSFER, {"account_id": "1234567890", "to_account_id": "1234324", "amount": 40.0}, evidence
    )
    assert result.ungrounded == ()
    assert result.inferred == ()
    assert "amount ← customer message #1: '$40'" in result.describe()
    assert "account_id ← tool lookup_account_id" in result.describe()


def test_an_amount_the_customer_never_gave_is_ungrounded() -> None:
    evidence = said("transfer $40 to 1234324")
    result = ground_call(
        TRANSFER, {"account_id": "x", "to_account_id": "1234324", "amount": 900.0}, evidence
    )
    assert set(result.ungrounded) == {"account_id", "amount"}


def test_a_tool_result_grounds_only_the_parameter_of_its_own_name() -> None:
    # The balance (1500.00) is a tool value, but not an amount the customer asked to move.
    evidence = said("transfer $40 to 1234324", tool_values={"balance": [("balance", "1500.00")]})
    result = ground_call(
        TRANSFER, {"to_account_id": "1234324", "amount": Decimal("1500.00")}, evidence
    )
    assert result.ungrounded == ("amount",)


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("send 1,250.50 dollars", "1250.50"),
        ("send €40", "40"),
        ("40 bucks please", "40.0"),
        ("make it 40", "40"),
    ],
)
def test_normalised_amounts_are_direct(text: str, amount: str) -> None:
    result = ground_call(TRANSFER, {"amount": Decimal(amount)}, said(text))
    assert result.ungrounded == () and result.inferred == ()


@pytest.mark.parametrize(
    ("text", "amount"),
    [("send forty dollars", "40"), ("two hundred fifty please", "250"), ("move 2k", "2000")],
)
def test_converted_amounts_are_grounded_but_inferred(text: str, amount: str) -> None:
    result = ground_call(TRANSFER, {"amount": Decimal(amount)}, said(text))
    assert result.ungrounded == () and result.inferred == ("amount",)


def test_ids_match_without_separators_and_case() -> None:
    result = ground_call(TRANSFER, {"to_account_id": "1234324"}, said("to 1234-324 please"))
    assert result.ungrounded == () and result.inferred == ()
    result = ground_call(TRANSFER, {"to_account_id": "ab-77x"}, said("account AB 77X"))
    assert result.ungrounded == ()


def test_swapped_values_need_the_customer_to_see_them() -> None:
    # A schema-valid model that swaps the amount and the destination: both numbers were said, but
    # a long bare digit string is not an amount and "$40" is not an account.
    result = ground_call(
        TRANSFER, {"to_account_id": "40", "amount": Decimal("1234324")}, said("send $40 to 1234324")
    )
    assert result.ungrounded == ()
    assert set(result.inferred) == {"to_account_id", "amount"}


def test_an_enum_label_said_is_direct_a_prefix_is_inferred_a_guess_is_ungrounded() -> None:
    assert ground_call(PIZZA, {"size": "large"}, said("a LARGE one")).inferred == ()
    assert ground_call(PIZZA, {"size": "medium"}, said("med please")).inferred == ("size",)
    assert ground_call(PIZZA, {"size": "large"}, said("yes")).ungrounded == ("size",)


def test_dates_match_in_any_common_writing() -> None:
    spec = ToolSpec(name="book", parameters=(ToolParameter(name="day"),))
    for text in ("on 2026-03-05", "on 5 March 2026", "March 5, 2026 works", "5/3/2026"):
        assert ground_call(spec, {"day": "2026-03-05"}, said(text)).ungrounded == (), text


def test_principal_and_variables_ground_by_name() -> None:
    spec = ToolSpec(
        name="t", parameters=(ToolParameter(name="username"), ToolParameter(name="tier"))
    )
    evidence = said("hi", principal={"username": "seldo"}, variables={"tier": "gold"})
    result = ground_call(spec, {"username": "seldo", "tier": "gold"}, evidence)
    assert result.ungrounded == ()
    assert "username ← the authenticated principal" in result.describe()
    assert ground_call(spec, {"username": "bob"}, evidence).ungrounded == ("username",)


def test_composed_parameters_are_exempt_only_on_harmless_tools() -> None:
    assert ground_call(SEARCH, {"query": "fees for wires"}, said("hi")).ungrounded == ()
    harmful = SEARCH.model_copy(update={"consequential": True})
    assert ground_call(harmful, {"query": "fees for wires"}, said("hi")).ungrounded == ("query",)


def test_the_latest_message_is_the_source_named() -> None:
    result = ground_call(TRANSFER, {"amount": Decimal("40")}, said("maybe 40", "yes, 40"))
    assert "customer message #2" in result.describe()[0]


def test_yes_no_arguments_are_never_read_off_free_text() -> None:
    spec = ToolSpec(name="t", parameters=(ToolParameter(name="agree", type="boolean"),))
    assert ground_call(spec, {"agree": True}, said("yes")).ungrounded == ("agree",)


@pytest.mark.parametrize(
    "text",
    [
        "could I come on the 12th of December 2026?",
        "the 12 of december 2026",
        "December 12th, 2026 please",
        "december the 12th 2026",
    ],
)
def test_a_day_written_as_an_ordinal_grounds_the_iso_date(text: str) -> None:
    spec = ToolSpec(name="find_slots", parameters=(ToolParameter(name="date"),))
    assert ground_call(spec, {"date": "2026-12-12"}, said(text)).ungrounded == (), text


@pytest.mark.parametrize("invented", ["2026-12-13", "2026-12-11", "2025-12-12", "2026-11-12"])
def test_a_date_near_the_one_said_is_refused(invented: str) -> None:
    # A hostile or sloppy model that shifts the day, month or year by one: a near date is
    # another date, and normalisation never makes it equal to the customer's words.
    spec = ToolSpec(name="find_slots", parameters=(ToolParameter(name="date"),))
    evidence = said("could I come on the 12th of December 2026?")
    assert ground_call(spec, {"date": invented}, evidence).ungrounded == ("date",), invented


def test_an_amount_with_the_currency_sign_after_it_is_direct() -> None:
    result = ground_call(TRANSFER, {"amount": Decimal("100000")}, said("send 100,000$ to savings"))
    assert result.ungrounded == () and result.inferred == ()


@pytest.mark.parametrize("invented", ["100001", "10000", "1000000", "100000.5"])
def test_an_amount_near_the_one_said_is_refused(invented: str) -> None:
    result = ground_call(TRANSFER, {"amount": Decimal(invented)}, said("send 100,000$ to savings"))
    assert result.ungrounded == ("amount",), invented


BOOK = ToolSpec(name="book_slot", consequential=True, parameters=(ToolParameter(name="time"),))


@pytest.mark.parametrize(
    ("text", "time"),
    [("3pm", "15:00"), ("at 3 pm please", "15:00"), ("3:30 p.m.", "15:30"), ("15.30", "15:30")],
)
def test_a_time_of_day_in_any_common_writing_grounds_the_24_hour_value(
    text: str, time: str
) -> None:
    assert ground_call(BOOK, {"time": time}, said(text)).ungrounded == (), text


@pytest.mark.parametrize(
    ("text", "invented"),
    [("3pm", "03:00"), ("3pm", "14:00"), ("3pm", "15:30"), ("3", "15:00"), ("13pm", "13:00")],
)
def test_a_time_near_the_one_said_or_read_off_a_bare_number_is_refused(
    text: str, invented: str
) -> None:
    assert ground_call(BOOK, {"time": invented}, said(text)).ungrounded == ("time",), text


def _customer_event(text: str, **data: object) -> Event:
    return Event(
        id="e7", offset=7, kind=EventKind.MESSAGE, source=EventSource.CUSTOMER,
        created_at=datetime(2026, 11, 24, tzinfo=UTC), text=text, data=dict(data),
    )  # fmt: skip


def test_a_button_press_is_not_words_so_its_option_id_grounds_no_number() -> None:
    """A pressed option "3" is stored with "3" as its text; a hostile model that then says the
    quantity was 3 finds no such words (tests/hostile pizza-order-nudge found it)."""
    pressed = CustomerMessage.of(_customer_event("3", choice="3"))
    typed = CustomerMessage.of(_customer_event("3"))
    assert pressed == CustomerMessage(7, "")
    three = {"to_account_id": "1234324", "amount": 3.0}
    assert ground_call(TRANSFER, three, Evidence((pressed,))).ungrounded == (
        "to_account_id",
        "amount",
    )
    assert ground_call(TRANSFER, three, Evidence((typed,))).ungrounded == ("to_account_id",)
