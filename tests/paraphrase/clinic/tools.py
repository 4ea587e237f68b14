"""The clinic's tools and its in-memory diary, for the paraphrase suite.

Every day has three free times except the days in `FULL_DAYS`; a booked time is no longer free.
`reset_clinic` (the conversation files' `setup`) empties the diary before every run."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import date as calendar_date
from datetime import time as clock_time
from typing import Annotated, Literal

from engine.toolkit import ToolRegistry, ToolResult, tool

Service = Literal["assessment", "massage", "follow-up"]
TIMES = ("09:00", "11:30", "15:00")
FULL_DAYS = frozenset({"2026-12-24"})
PRICES = {"assessment": "70", "massage": "60", "follow-up": "45"}
HOURS = {"saturday": "9:00 to 13:00", "sunday": "closed"}
WEEKDAY_HOURS = "8:00 to 19:00"


@dataclass
class Diary:
    """Booked (date, time) pairs and who holds them; thread-safe like the bank example."""

    bookings: dict[tuple[str, str], str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def free_times(self, day: str) -> list[str]:
        if day in FULL_DAYS:
            return []
        return [t for t in TIMES if (day, t) not in self.bookings]

    def book(self, day: str, time: str, name: str) -> str | None:
        with self._lock:
            if time not in self.free_times(day):
                return None
            self.bookings[(day, time)] = name
            return f"NP-{len(self.bookings):03d}"


DIARY = Diary()


def reset_clinic() -> None:
    """An empty diary (called before every conversation)."""
    global DIARY
    DIARY = Diary()


@tool(description="Find free appointment times on a date")
def find_slots(date: calendar_date) -> ToolResult:
    day = date.isoformat()
    times = DIARY.free_times(day)
    return ToolResult(data={"date": day, "available": bool(times), "free_times": times})


@tool(description="Book an appointment", consequential=True)
def book_slot(
    date: calendar_date,
    time: Annotated[clock_time, "one of the free times, e.g. 11:30"],
    service: Service,
    name: Annotated[str, "the patient's full name"],
) -> ToolResult:
    day, at = date.isoformat(), time.strftime("%H:%M")
    booking = DIARY.book(day, at, name)
    if booking is None:
        return ToolResult(data={"booked": False}, error=f"{at} on {day} is not free")
    return ToolResult(data={"booked": True, "booking_id": booking, "date": day, "time": at})


@tool(description="Get the clinic's opening hours for a day of the week")
def opening_hours(day: Annotated[str, "a day of the week, e.g. Saturday"]) -> ToolResult:
    return ToolResult(data={"day": day, "hours": HOURS.get(day.strip().lower(), WEEKDAY_HOURS)})


@tool(description="Get the price of a service")
def price_list(service: Service) -> ToolResult:
    return ToolResult(data={"service": service, "price": PRICES[service]})


TOOLS = [find_slots, book_slot, opening_hours, price_list]
registry = ToolRegistry(TOOLS)
