"""The dental practice's tools: an in-memory diary."""

from __future__ import annotations

import itertools
from datetime import date as calendar_date
from typing import Annotated, Literal

from engine.toolkit import ToolContextWithKey, ToolRegistry, ToolResult, tool

Treatment = Literal["check-up", "cleaning", "filling"]
REFERENCE = r"BS-\d{3}"
TIMES = ["09:00", "11:30", "15:00"]
_booked: dict[str, str] = {}
_references = itertools.count(101)
_cancelled: set[str] = set()


def reset_practice() -> None:
    """An empty diary (`setup:` of every conversation test)."""
    global _references
    _booked.clear()
    _cancelled.clear()
    _references = itertools.count(101)


@tool(description="Find the free appointment times on a date")
def free_times(date: calendar_date) -> ToolResult:
    return ToolResult(data={"date": date.isoformat(), "free_times": TIMES})


@tool(description="Book an appointment at a free time", consequential=True)
def book_visit(
    context: ToolContextWithKey,
    treatment: Annotated[Treatment, "what the visit is for"],
    date: calendar_date,
    time: Annotated[str, "one of the free times, e.g. 09:00"],
) -> ToolResult:
    key = context.idempotency_key
    if key not in _booked:
        _booked[key] = f"BS-{next(_references)}"
    return ToolResult(data={"reference": _booked[key], "treatment": treatment, "time": time})


@tool(
    description="Cancel a booked appointment", consequential=True, patterns={"reference": REFERENCE}
)
def cancel_visit(reference: Annotated[str, "the appointment reference, e.g. BS-204"]) -> ToolResult:
    _cancelled.add(reference.upper())
    return ToolResult(data={"reference": reference.upper(), "cancelled": True})


@tool(description="Get the practice's opening hours")
def practice_hours() -> ToolResult:
    return ToolResult(data={"weekdays": "8:00 to 18:00", "saturday": "9:00 to 13:00"})


registry = ToolRegistry([free_times, book_visit, cancel_visit, practice_hours])
