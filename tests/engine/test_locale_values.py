"""The customer's values in every language Waypoint ships (issue #32): numbers next to CJK text,
full-width digits, locale decimals and thousands, numbers in words, currency signs and words,
dates and relative dates; yes and no; asking for a person or to try again. A value read from
words or from locale-ambiguous digits is worked out (inferred), never direct."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from engine.language.requests import (
    asks_for_person_in_other_languages,
    asks_to_try_again_in_other_languages,
)
from engine.tools.spec import ToolParameter, ToolSpec
from engine.values import Money
from engine.values.grounding import CustomerMessage, Evidence, ground_call
from engine.values.locale import decimal_mark
from engine.values.reading import read
from engine.values.runs import normalize, reading_context
from engine.values.types import ValueShape
from engine.values.yes_no import read_yes_no

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)  # a Saturday
SHIPPED = ("en", "zh-Hans", "zh-Hant", "es", "pt-BR", "fr", "de", "ja")


def values(kind: str, text: str, language: str, **shape: object) -> list[tuple[object, bool]]:
    ctx = reading_context("UTC", NOW, language)
    return [(r.value, r.exact) for r in read(ValueShape(kind, **shape), normalize(text), ctx)]  # type: ignore[arg-type]


def money(amount: str, currency: str) -> Money:
    return Money(amount=Decimal(amount), currency=currency)


@pytest.mark.parametrize("language", SHIPPED)
def test_the_shipped_decimal_marks_are_cldrs(language: str) -> None:
    from babel.numbers import get_decimal_symbol

    assert decimal_mark(language) == get_decimal_symbol(language.replace("-", "_"))


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        ("zh-Hans", "转五百块", ("500", "CNY")),
        ("zh-Hans", "两千元", ("2000", "CNY")),
        ("zh-Hans", "2万", ("20000", "CNY")),
        ("zh-Hant", "兩千元", ("2000", "CNY")),
        ("ja", "五千円", ("5000", "JPY")),
        ("es", "quinientos euros", ("500", "EUR")),
        ("de", "fünfhundert Euro", ("500", "EUR")),
        ("fr", "cinq cents euros", ("500", "EUR")),
        ("pt-BR", "quinhentos reais", ("500", "BRL")),
    ],
)
def test_numbers_in_words_are_read_and_inferred(
    language: str, text: str, expected: tuple[str, str]
) -> None:
    assert (money(*expected), False) in values("money", text, language, currency="CNY")


@pytest.mark.parametrize(
    ("language", "text", "amount", "currency", "exact"),
    [
        ("es", "1.000,50 €", "1000.50", "EUR", True),  # Spanish writes a decimal comma
        ("en", "1.000,50 €", "1000.50", "EUR", False),  # another convention: worked out
        ("pt-BR", "R$ 500,00", "500.00", "BRL", True),
        ("fr", "1 000,50 €", "1000.50", "EUR", True),  # French groups with a space
        ("de", "1.000,50 EUR", "1000.50", "EUR", True),
        ("zh-Hans", "¥500", "500", "CNY", True),  # yuan in Chinese
        ("ja", "¥500", "500", "JPY", True),  # yen in Japanese
        ("zh-Hans", "５００元", "500", "CNY", True),  # full-width digits
        ("en", "٥٠٠ USD", "500", "USD", True),  # another script's digits (Arabic-Indic)
        ("en", "$ ५००", "500", "USD", True),  # Devanagari digits
    ],
)
def test_locale_decimals_and_currency_signs(
    language: str, text: str, amount: str, currency: str, exact: bool
) -> None:
    assert (money(amount, currency), exact) in values("money", text, language, currency="USD")


@pytest.mark.parametrize("language", ["es", "de", "en", "fr"])
def test_a_separator_read_differently_by_locale_is_never_exact(language: str) -> None:
    readings = values("decimal", "1.000", language)
    assert readings and not any(exact for _, exact in readings)


def test_digits_next_to_chinese_text_are_read_and_an_id_is_never_cut() -> None:
    ctx = reading_context("UTC", NOW, "zh-Hans")
    shape = ValueShape("str", pattern=r"\d{7,10}")
    assert [r.value for r in read(shape, normalize("账号是1234324"), ctx, value="1234324")] == [
        "1234324"
    ]
    transfer = ToolSpec(
        name="transfer_money",
        consequential=True,
        parameters=(
            ToolParameter(name="to_account_id", pattern=r"\d{7,10}"),
            ToolParameter(name="amount", type="money", currency="CNY"),
        ),
    )
    evidence = Evidence(now=[CustomerMessage(1, "账号是1234324，转五百块")], reading=ctx)
    result = ground_call(
        transfer, {"to_account_id": "1234324", "amount": money("500", "CNY")}, evidence
    )
    assert result.ungrounded == () and result.inferred == ("amount",)  # words: shown first
    cut = ground_call(transfer, {"amount": money("324", "CNY")}, evidence)
    assert cut.ungrounded == ("amount",)


@pytest.mark.parametrize(
    ("language", "text", "day", "exact"),
    [
        ("zh-Hans", "2026年12月12日", date(2026, 12, 12), True),
        ("ja", "2026年12月12日", date(2026, 12, 12), True),
        ("zh-Hans", "明天", date(2026, 11, 29), False),
        ("zh-Hant", "明天", date(2026, 11, 29), False),
        ("zh-Hans", "下周五", date(2026, 12, 4), False),
        ("ja", "明日", date(2026, 11, 29), False),
        ("ja", "金曜日", date(2026, 12, 4), False),
        ("es", "mañana", date(2026, 11, 29), False),
        ("es", "12 de diciembre", date(2026, 12, 12), False),  # the year was not said
        ("es", "el 12 de diciembre de 2026", date(2026, 12, 12), True),
        ("pt-BR", "amanhã", date(2026, 11, 29), False),
        ("fr", "le 12 décembre 2026", date(2026, 12, 12), True),
        ("fr", "demain", date(2026, 11, 29), False),
        ("de", "morgen", date(2026, 11, 29), False),
        ("de", "12. Dezember 2026", date(2026, 12, 12), True),
    ],
)
def test_dates_and_relative_dates_in_every_language(
    language: str, text: str, day: date, exact: bool
) -> None:
    assert (day, exact) in values("date", text, language)


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("好的", True), ("是的", True), ("确认", True), ("可以", True), ("確認", True),
        ("不要", False), ("取消", False), ("sí", True), ("claro", True), ("Sí, por favor", True),
        ("no, gracias", False), ("sim", True), ("não", False), ("ja", True), ("genau", True),
        ("nein", False), ("oui", True), ("non", False), ("はい", True), ("いいえ", False),
        ("yes", True), ("no", False),
        ("quiero 500", None), ("好的，转五百", None), ("はい、でも金額を変えて", None),
        ("nothing", None), ("500", None),
    ],
)  # fmt: skip
def test_yes_and_no_in_every_language(text: str, verdict: bool | None) -> None:
    assert read_yes_no(text) is verdict


@pytest.mark.parametrize(
    "text",
    ["我要人工客服", "轉人工", "quiero hablar con una persona", "quero falar com um atendente",
     "je voudrais parler à un conseiller", "ich will mit einem Menschen sprechen",
     "オペレーターと話したい"],
)  # fmt: skip
def test_asking_for_a_person_in_every_language(text: str) -> None:
    assert asks_for_person_in_other_languages(text)


@pytest.mark.parametrize(
    "text", ["quiero transferir dinero", "我要转账", "falar com você", "parler à ma banque"]
)
def test_other_requests_are_not_asking_for_a_person(text: str) -> None:
    assert not asks_for_person_in_other_languages(text)


@pytest.mark.parametrize(
    "text", ["再试一次", "inténtalo de nuevo", "tente novamente", "réessayez", "nochmal bitte",
             "もう一度お願いします"],
)  # fmt: skip
def test_asking_to_try_again_in_every_language(text: str) -> None:
    assert asks_to_try_again_in_other_languages(text)
