"""Grounding of tool arguments, deterministic and model-free (`engine.values.grounding`): each
value is traced, by the rules of `engine.values.provenance`, to what the customer gave for that
argument — or shown to them to confirm, or refused."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal

import pytest

from engine.sessions.session import Event, EventKind, EventSource
from engine.tools.spec import ToolParameter, ToolSpec
from engine.values import Money
from engine.values.grounding import Answer, CustomerMessage, Evidence, SourceResult, ground_call
from engine.values.runs import ReadingContext

TRANSFER = ToolSpec(
    name="transfer_money",
    consequential=True,
    parameters=(
        ToolParameter(name="account_id", source="lookup_account_id.account_id"),
        ToolParameter(name="to_account_id", pattern=r"\d{7,10}"),
        ToolParameter(name="amount", type="number"),
    ),
)
PAY = ToolSpec(
    name="pay",
    consequential=True,
    parameters=(ToolParameter(name="amount", type="money", currency="USD"),),
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
TODAY = ReadingContext(today=date(2026, 11, 28))  # a Saturday


def said(*texts: str, **extra: object) -> Evidence:
    """The last text is this turn's message; the others came before it."""
    messages = [CustomerMessage(i, t) for i, t in enumerate(texts, start=1)]
    return Evidence(now=messages[-1:], earlier=messages[:-1], reading=TODAY, **extra)  # type: ignore[arg-type]


def usd(amount: str) -> Money:
    return Money(amount=Decimal(amount), currency="USD")


def test_values_the_customer_said_are_grounded_directly_with_their_message() -> None:
    evidence = said(
        "transfer $40 to 1234324",
        results={"lookup_account_id": [SourceResult(0, {"account_id": "1234567890"})]},
    )
    result = ground_call(
        TRANSFER, {"account_id": "1234567890", "to_account_id": "1234324", "amount": 40.0}, evidence
    )
    assert result.ungrounded == ()
    assert result.inferred == ()
    assert "amount ← customer message #1: '$40'" in result.describe()
    assert "account_id ← tool lookup_account_id.account_id" in result.describe()


def test_an_amount_the_customer_never_gave_is_ungrounded() -> None:
    evidence = said("transfer $40 to 1234324")
    result = ground_call(
        TRANSFER, {"account_id": "x", "to_account_id": "1234324", "amount": 900.0}, evidence
    )
    assert set(result.ungrounded) == {"account_id", "amount"}


def test_a_tool_result_of_another_name_never_grounds_a_consequential_argument() -> None:
    # The balance (1500.00) is a tool value, but not an amount the customer asked to move.
    evidence = said(
        "transfer $40 to 1234324", results={"balance": [SourceResult(0, {"balance": "1500.00"})]}
    )
    result = ground_call(
        TRANSFER, {"to_account_id": "1234324", "amount": Decimal("1500.00")}, evidence
    )
    assert result.ungrounded == ("amount",)


def test_a_same_named_field_of_another_result_is_only_a_candidate() -> None:
    # The first transfer's result says amount 500: a second transfer never runs on it silently.
    evidence = said("40", results={"transfer_money": [SourceResult(0, {"amount": "500.00"})]})
    result = ground_call(TRANSFER, {"amount": Decimal("500")}, evidence)
    assert result.ungrounded == () and result.inferred == ("amount",)


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("send 1,250.50 dollars", "1250.50"),
        ("send €40", "40"),
        ("40 bucks please", "40.0"),
        ("make it 40", "40"),
        ("send 100000$ to savings", "100000"),
    ],
)
def test_normalised_amounts_are_direct(text: str, amount: str) -> None:
    result = ground_call(TRANSFER, {"amount": Decimal(amount)}, said(text))
    assert result.ungrounded == () and result.inferred == ()


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("send forty dollars", "40"),
        ("two hundred fifty please", "250"),
        ("move 2k", "2000"),
        ("1.000", "1"),  # a thousand in Germany, one in the US: either reading is shown
        ("1.000", "1000"),
        ("1,000", "1000"),
        ("send 100,000$ to savings", "100000"),
        ("2,50", "2.50"),  # a decimal comma, not this agent's convention
        ("12 500", "12500"),  # a gap may split two numbers
    ],
)
def test_converted_or_locale_ambiguous_amounts_are_grounded_but_inferred(
    text: str, amount: str
) -> None:
    result = ground_call(TRANSFER, {"amount": Decimal(amount)}, said(text))
    assert result.ungrounded == () and result.inferred == ("amount",), result.describe()


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("To account ID 1234 324", "324"),  # a piece of an id
        ("To account ID 1234 324", "1234"),
        ("2,50 €", "50"),  # the tail of a decimal
        ("2,50 €", "2"),
        ("1,000.50", "50"),
        ("call 555-0100", "100"),  # a piece of a phone number
        ("on 12/12/2026", "12"),  # a piece of a date
        ("at 3:30", "30"),
    ],
)
def test_a_piece_cut_out_of_a_longer_number_is_never_a_value(text: str, amount: str) -> None:
    result = ground_call(TRANSFER, {"amount": Decimal(amount)}, said(text))
    assert result.ungrounded == ("amount",), result.describe()


def test_one_of_several_amounts_in_the_message_is_inferred() -> None:
    evidence = said("it's $40 this time, not the $900")
    for amount in ("40", "900"):
        result = ground_call(TRANSFER, {"amount": Decimal(amount)}, evidence)
        assert result.inferred == ("amount",), amount


def test_an_amount_said_in_an_earlier_message_is_only_a_candidate() -> None:
    result = ground_call(TRANSFER, {"amount": Decimal("900")}, said("my rent is $900", "40"))
    assert result.ungrounded == () and result.inferred == ("amount",)
    assert "said earlier" in result.describe()[0]


def test_an_id_is_read_without_separators_and_only_whole() -> None:
    result = ground_call(TRANSFER, {"to_account_id": "1234324"}, said("to 1234-324 please"))
    assert result.ungrounded == () and result.inferred == ()
    result = ground_call(TRANSFER, {"to_account_id": "1234324"}, said("To account ID 1234 324"))
    assert result.ungrounded == () and result.inferred == ()
    two = said("from 1234567890 to 1234324")
    assert ground_call(TRANSFER, {"to_account_id": "1234324"}, two).inferred == ("to_account_id",)


def test_text_without_a_declared_shape_is_direct_only_as_the_whole_answer() -> None:
    spec = ToolSpec(name="ship", consequential=True, parameters=(ToolParameter(name="address"),))
    whole = ground_call(spec, {"address": "12 Baker Street"}, said("12 Baker Street"))
    assert whole.inferred == ()
    part = ground_call(spec, {"address": "Baker Street"}, said("12 Baker Street"))
    assert part.ungrounded == () and part.inferred == ("address",)
    number = ground_call(spec, {"address": "12"}, said("12 Baker Street"))
    assert number.inferred == ("address",)


def test_swapped_values_need_the_customer_to_see_them() -> None:
    # A schema-valid model that swaps the amount and the destination: a long bare digit string
    # is no amount, and "$40" is no account.
    result = ground_call(
        TRANSFER, {"to_account_id": "40", "amount": Decimal("1234324")}, said("send $40 to 1234324")
    )
    assert "amount" in result.inferred
    assert "to_account_id" in (*result.ungrounded, *result.inferred)


def test_a_phrase_read_for_one_argument_is_no_value_for_another() -> None:
    spec = ToolSpec(
        name="order",
        consequential=True,
        parameters=(ToolParameter(name="address"), ToolParameter(name="quantity", type="integer")),
    )
    result = ground_call(
        spec, {"address": "12 Baker Street", "quantity": 12}, said("12 Baker Street")
    )
    assert "quantity" in (*result.inferred, *result.ungrounded)


def test_money_is_read_with_its_currency() -> None:
    assert ground_call(PAY, {"amount": usd("40")}, said("$40")).inferred == ()
    assert ground_call(PAY, {"amount": usd("40")}, said("40")).inferred == ()  # the default
    # Euros are not dollars: the customer said 40 EUR.
    assert ground_call(PAY, {"amount": usd("40")}, said("40 €")).ungrounded == ("amount",)
    eur = Money(amount=Decimal("2.50"), currency="EUR")
    assert ground_call(PAY, {"amount": eur}, said("2,50 €")).inferred == ("amount",)


def test_an_enum_label_said_is_direct_a_prefix_or_mapping_is_inferred() -> None:
    assert ground_call(PIZZA, {"size": "large"}, said("a LARGE one")).inferred == ()
    assert ground_call(PIZZA, {"size": "medium"}, said("med please")).inferred == ("size",)
    # "the big one" → large: a listed choice for their words, shown before it runs
    assert ground_call(PIZZA, {"size": "large"}, said("the big one")).inferred == ("size",)
    assert ground_call(PIZZA, {"size": "large"}, said("large or small")).inferred == ("size",)
    assert ground_call(PIZZA, {"size": "large"}, said("extra large")).inferred == ("size",)


def test_a_mapped_choice_on_a_harmless_tool_needs_the_parameter_declared_derived() -> None:
    def search(derived: bool) -> ToolSpec:
        category = ToolParameter(name="category", enum=("peripherals", "laptops"), derived=derived)
        return ToolSpec(name="search_products", parameters=(category,))

    evidence = said("do you sell keyboards?")
    assert ground_call(search(False), {"category": "peripherals"}, evidence).ungrounded == (
        "category",
    )
    assert ground_call(search(True), {"category": "peripherals"}, evidence).ungrounded == ()


def test_dates_match_in_any_common_writing() -> None:
    spec = ToolSpec(name="book", parameters=(ToolParameter(name="day", type="date"),))
    for text in ("on 2026-03-05", "on 5 March 2026", "March 5, 2026 works", "5/3/2026"):
        assert ground_call(spec, {"day": date(2026, 3, 5)}, said(text)).ungrounded == (), text


def test_a_relative_date_is_counted_in_the_agents_time_zone_and_inferred() -> None:
    spec = ToolSpec(
        name="pay_on", consequential=True, parameters=(ToolParameter(name="day", type="date"),)
    )
    tomorrow = ground_call(spec, {"day": date(2026, 11, 29)}, said("pay it tomorrow"))
    assert tomorrow.ungrounded == () and tomorrow.inferred == ("day",)
    assert ground_call(spec, {"day": date(2026, 11, 30)}, said("tomorrow")).ungrounded == ("day",)
    friday = ground_call(spec, {"day": date(2026, 12, 4)}, said("next friday"))
    assert friday.ungrounded == ()
    harmless = spec.model_copy(update={"consequential": False})
    assert ground_call(harmless, {"day": date(2026, 11, 29)}, said("tomorrow")).ungrounded == ()


def test_a_value_an_instruction_in_force_sets_is_derived() -> None:
    evidence = said(
        "send the usual", instructions=[("rent", "When the customer says the usual, send $900")]
    )
    result = ground_call(PAY, {"amount": usd("900")}, evidence)
    assert result.ungrounded == () and result.inferred == ("amount",)
    assert "guideline rent" in result.describe()[0]


def test_principal_and_variables_ground_by_name() -> None:
    spec = ToolSpec(
        name="t", parameters=(ToolParameter(name="username"), ToolParameter(name="tier"))
    )
    evidence = said("hi", principal={"username": "seldo"}, variables={"tier": "gold"})
    result = ground_call(spec, {"username": "seldo", "tier": "gold"}, evidence)
    assert result.ungrounded == ()
    assert "username ← the authenticated principal" in result.describe()
    assert ground_call(spec, {"username": "bob"}, evidence).ungrounded == ("username",)


def test_a_declared_source_grounds_only_with_that_tools_latest_result_for_this_request() -> None:
    results = {
        "lookup_account_id": [
            SourceResult(3, {"account_id": "5555000011"}),
            SourceResult(9, {"account_id": "1"}),
        ]
    }
    latest = said("go", results=results)
    assert ground_call(TRANSFER, {"account_id": "1"}, latest).inferred == ("account_id",)
    one = {"lookup_account_id": [SourceResult(9, {"account_id": "1234567890"})]}
    this_request = said("go", results=one, request_starts={"transfer": 5})
    grounded = ground_call(
        TRANSFER, {"account_id": "1234567890"}, this_request, journey_id="transfer"
    )
    assert grounded.inferred == ()
    before = said("go", results=one, request_starts={"transfer": 12})
    earlier = ground_call(TRANSFER, {"account_id": "1234567890"}, before, journey_id="transfer")
    assert earlier.inferred == ("account_id",)


def test_a_journey_argument_comes_from_its_answer_not_from_other_words() -> None:
    spec = ToolSpec(
        name="place_order",
        consequential=True,
        parameters=(ToolParameter(name="quantity", type="integer"), ToolParameter(name="address")),
    )
    answers = {
        "quantity": [Answer("order", 2, True, "customer message #5: '2'")],
        "address": [Answer("order", "12 Baker Street", True, "customer message #7")],
    }
    evidence = said("2", "12 Baker Street", answers=answers)
    ok = ground_call(
        spec, {"quantity": 2, "address": "12 Baker Street"}, evidence,
        journey_id="order", journey_fields={"quantity", "address"},
    )  # fmt: skip
    assert ok.inferred == () and ok.ungrounded == ()
    twelve = ground_call(
        spec, {"quantity": 12, "address": "12 Baker Street"}, evidence,
        journey_id="order", journey_fields={"quantity", "address"},
    )  # fmt: skip
    assert twelve.inferred == ("quantity",)


def test_an_inferred_answer_stays_inferred_at_the_call() -> None:
    answers = {"amount": [Answer("transfer", Decimal("40"), False, "forty")]}
    result = ground_call(
        TRANSFER, {"amount": Decimal("40")}, said("yes", answers=answers), journey_id="transfer"
    )
    assert result.inferred == ("amount",)


def test_composed_parameters_are_exempt_only_on_harmless_tools() -> None:
    assert ground_call(SEARCH, {"query": "fees for wires"}, said("hi")).ungrounded == ()
    harmful = SEARCH.model_copy(update={"consequential": True})
    assert ground_call(harmful, {"query": "fees for wires"}, said("hi")).ungrounded == ("query",)


def test_the_latest_message_is_the_source_named() -> None:
    spec = TRANSFER.model_copy(update={"consequential": False})
    result = ground_call(spec, {"amount": Decimal("40")}, said("maybe 40", "yes, 40"))
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
    spec = ToolSpec(name="find_slots", parameters=(ToolParameter(name="date", type="date"),))
    assert ground_call(spec, {"date": date(2026, 12, 12)}, said(text)).ungrounded == (), text


@pytest.mark.parametrize("invented", ["2026-12-13", "2026-12-11", "2025-12-12", "2026-11-12"])
def test_a_date_near_the_one_said_is_refused(invented: str) -> None:
    # A hostile or sloppy model that shifts the day, month or year by one: a near date is
    # another date, and normalisation never makes it equal to the customer's words.
    spec = ToolSpec(name="find_slots", parameters=(ToolParameter(name="date", type="date"),))
    evidence = said("could I come on the 12th of December 2026?")
    found = ground_call(spec, {"date": date.fromisoformat(invented)}, evidence)
    assert found.ungrounded == ("date",), invented


@pytest.mark.parametrize("invented", ["100001", "10000", "1000000", "100000.5"])
def test_an_amount_near_the_one_said_is_refused(invented: str) -> None:
    result = ground_call(TRANSFER, {"amount": Decimal(invented)}, said("send 100,000$ to savings"))
    assert result.ungrounded == ("amount",), invented


BOOK = ToolSpec(
    name="book_slot", consequential=True, parameters=(ToolParameter(name="time", type="time"),)
)


@pytest.mark.parametrize(
    ("text", "value"),
    [("3pm", "15:00"), ("at 3 pm please", "15:00"), ("3:30 p.m.", "15:30"), ("15.30", "15:30")],
)
def test_a_time_of_day_in_any_common_writing_grounds_the_24_hour_value(
    text: str, value: str
) -> None:
    assert ground_call(BOOK, {"time": time.fromisoformat(value)}, said(text)).ungrounded == ()


@pytest.mark.parametrize(
    ("text", "invented"),
    [("3pm", "03:00"), ("3pm", "14:00"), ("3pm", "15:30"), ("3", "15:00"), ("13pm", "13:00")],
)
def test_a_time_near_the_one_said_or_read_off_a_bare_number_is_refused(
    text: str, invented: str
) -> None:
    found = ground_call(BOOK, {"time": time.fromisoformat(invented)}, said(text))
    assert found.ungrounded == ("time",), text


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
    assert ground_call(TRANSFER, three, Evidence(now=(pressed,))).ungrounded == (
        "to_account_id",
        "amount",
    )
    assert ground_call(TRANSFER, three, Evidence(now=(typed,))).ungrounded == ("to_account_id",)


def test_a_lookup_run_on_a_worked_out_value_sources_nothing_on_its_own() -> None:
    # A lookup the model ran on another account than the customer named (allowed on a harmless
    # tool, worked out) gives an account the transfer only shows, never debits silently.
    made = {"lookup_account_id": [SourceResult(9, {"account_id": "5555000011"}, given=False)]}
    result = ground_call(
        TRANSFER, {"account_id": "5555000011"}, said("go", results=made), journey_id="transfer"
    )
    assert result.ungrounded == () and result.inferred == ("account_id",)


def test_a_result_that_is_not_a_mapping_is_a_source_too() -> None:
    # A tool that returns the id itself, or a list of accounts: its result grounds the argument
    # that names it as its source (one value: directly; one of several: shown first).
    spec = ToolSpec(
        name="close_account",
        consequential=True,
        parameters=(ToolParameter(name="account_id", source="find_account"),),
    )
    scalar = said("close it", results={"find_account": [SourceResult(1, "1234567890")]})
    assert ground_call(spec, {"account_id": "1234567890"}, scalar).inferred == ()
    listed = {"find_account": [SourceResult(1, ["1234567890", "5555000011"])]}
    several = ground_call(spec, {"account_id": "5555000011"}, said("close it", results=listed))
    assert several.ungrounded == () and several.inferred == ("account_id",)
    items = ToolSpec(
        name="close_account",
        consequential=True,
        parameters=(ToolParameter(name="account_id", source="list_accounts.id"),),
    )
    rows = {"list_accounts": [SourceResult(1, [{"id": "1234567890", "name": "Checking"}])]}
    assert (
        ground_call(items, {"account_id": "1234567890"}, said("close it", results=rows)).inferred
        == ()
    )
