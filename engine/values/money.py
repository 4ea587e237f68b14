"""Money: an amount with its currency, the value a `money` parameter or field holds.

An amount is never a bare number once it is money: "$40", "40 USD" and "40 dollars" are
`Money(40, "USD")`, "2,50 €" is `Money(2.50, "EUR")`. A tool that takes `amount: Money` gets one;
the customer is shown it unambiguously ("40.00 USD"), never "$1.000".
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_serializer, model_validator

# ISO 4217 currencies whose amounts have no minor unit (or three); every other has two.
_MINOR_UNITS = {
    "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
    "RWF": 0, "UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
    "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
}  # fmt: skip
_CODE = re.compile(r"[A-Z]{3}")


def minor_units(currency: str) -> int:
    """How many decimals an amount of `currency` is written with (2 for most)."""
    return _MINOR_UNITS.get(currency, 2)


class Money(BaseModel):
    """An amount of one currency (ISO 4217 code). Compared by value: 40 USD == 40.00 USD."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    amount: Decimal
    currency: str

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        # "40.00 USD" (how Money is written in events and on the wire) reads back as Money.
        if isinstance(value, str):
            parsed = parse_money_text(value)
            if parsed is None:
                raise ValueError(f"{value!r} is not an amount with a currency, e.g. '40.00 USD'")
            return {"amount": parsed[0], "currency": parsed[1]}
        return value

    @field_validator("currency")
    @classmethod
    def _iso_code(cls, value: str) -> str:
        code = value.strip().upper()
        if not _CODE.fullmatch(code):
            raise ValueError(f"{value!r} is not a currency code (three letters, e.g. USD)")
        return code

    @field_validator("amount")
    @classmethod
    def _finite(cls, value: Decimal) -> Decimal:
        if not value.is_finite():
            raise ValueError("an amount must be a finite number")
        return value

    @model_serializer
    def _as_text(self) -> str:
        # Stored, sent and shown as "40.00 USD": one writing, which reads back as this Money.
        return str(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Money):
            return NotImplemented
        return self.currency == other.currency and self.amount == other.amount

    def __hash__(self) -> int:
        return hash((self.currency, self.amount.normalize()))

    def __str__(self) -> str:
        return f"{format_amount(self.amount, self.currency)} {self.currency}"


def format_amount(amount: Decimal, currency: str) -> str:
    """The amount with its currency's decimals and no grouping: "1000.00", never "1.000" or
    "1,000" (each reads as another number somewhere)."""
    places = minor_units(currency)
    exponent = Decimal(1).scaleb(-places)
    if amount == amount.quantize(exponent, rounding="ROUND_DOWN"):
        amount = amount.quantize(exponent)
    return format(amount, "f")


def parse_money_text(text: str) -> tuple[Decimal, str] | None:
    """("40.00", "USD") for the canonical writing "40.00 USD" (or "USD 40.00"); None otherwise.
    Only this exact form: the customer's own writings are read by `engine.values.reading`."""
    parts = text.strip().split()
    if len(parts) != 2:
        return None
    a, b = parts
    number, code = (a, b) if _CODE.fullmatch(b.upper()) else (b, a)
    if not _CODE.fullmatch(code.upper()):
        return None
    try:
        amount = Decimal(number)
    except InvalidOperation:
        return None
    return (amount, code.upper()) if amount.is_finite() else None
