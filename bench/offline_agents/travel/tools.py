"""The change desk's tools: an in-memory stand-in for an airline's booking system."""

from __future__ import annotations

from datetime import date as calendar_date
from typing import Annotated

from engine.toolkit import ToolRegistry, ToolResult, tool

BOOKING = r"[A-Z0-9]{6}"
FLIGHT = r"SK\d{3}"
BOOKINGS = {"QX7K2P": "London to Lisbon", "MB4T9Z": "Paris to Rome"}


def reset_airline() -> None:
    """Nothing changes between runs; kept for the `setup:` line every project has."""


@tool(description="Find the flights on a new date for a booking", patterns={"booking": BOOKING})
def find_flights(
    booking: Annotated[str, "the booking reference, e.g. QX7K2P"], new_date: calendar_date
) -> ToolResult:
    if booking.upper() not in BOOKINGS:
        return ToolResult(error=f"no booking {booking!r}")
    return ToolResult(
        data={"date": new_date.isoformat(), "flights": ["SK101 at 07:10", "SK105 at 18:40"]}
    )


@tool(
    description="Move a booking to another flight",
    consequential=True,
    patterns={"booking": BOOKING, "flight": FLIGHT},
)
def rebook(
    booking: Annotated[str, "the booking reference, e.g. QX7K2P"],
    new_date: calendar_date,
    flight: Annotated[str, "the flight number, e.g. SK101"],
) -> ToolResult:
    return ToolResult(data={"booking": booking.upper(), "flight": flight.upper(), "changed": True})


@tool(
    description="Add checked bags to a booking", consequential=True, patterns={"booking": BOOKING}
)
def add_bag(
    booking: Annotated[str, "the booking reference, e.g. QX7K2P"],
    bags: Annotated[int, "how many bags to add"],
) -> ToolResult:
    if booking.upper() not in BOOKINGS:
        return ToolResult(error=f"no booking {booking!r}")
    return ToolResult(
        data={"booking": booking.upper(), "bags": bags, "price": f"{35 * bags} euros"}
    )


@tool(description="Get the baggage allowance: what a passenger may bring on board and in the hold")
def allowance() -> ToolResult:
    return ToolResult(data={"cabin": "one bag of 10 kg", "hold": "none unless added, 23 kg each"})


registry = ToolRegistry([find_flights, rebook, add_bag, allowance])
