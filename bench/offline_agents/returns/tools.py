"""The returns desk's tools: an in-memory stand-in for a store's order system."""

from __future__ import annotations

from typing import Annotated, Literal

from engine.toolkit import ToolRegistry, ToolResult, tool

ORDER_NUMBER = r"TL\d{5}"
Size = Literal["XS", "S", "M", "L", "XL"]
ORDERS = {"TL10001": "linen shirt", "TL10002": "wool coat"}
REFUNDS = {"TL10002": "paid back on 3 March"}


def reset_store() -> None:
    """Nothing changes between runs; kept for the `setup:` line every project has."""


@tool(
    description="Look up the status of the refund for an order",
    patterns={"order_number": ORDER_NUMBER},
)
def refund_status(order_number: Annotated[str, "the order number, e.g. TL10001"]) -> ToolResult:
    order = order_number.strip().upper()
    if order not in ORDERS:
        return ToolResult(error=f"no order {order_number!r}")
    return ToolResult(data={"order_number": order, "refund": REFUNDS.get(order, "not yet paid")})


@tool(description="Open a return and get its label number", patterns={"order_number": ORDER_NUMBER})
def open_return(
    order_number: Annotated[str, "the order number, e.g. TL10001"],
    unworn: Annotated[bool, "whether the item is unworn with its tags on"],
) -> ToolResult:
    order = order_number.strip().upper()
    if order not in ORDERS:
        return ToolResult(error=f"no order {order_number!r}")
    if not unworn:
        return ToolResult(error="only unworn items with their tags can be returned")
    return ToolResult(data={"label": f"LBL-{order[2:]}", "item": ORDERS[order]})


@tool(description="Arrange an exchange for another size", patterns={"order_number": ORDER_NUMBER})
def open_exchange(
    order_number: Annotated[str, "the order number, e.g. TL10001"],
    size: Annotated[Size, "the size wanted instead"],
) -> ToolResult:
    order = order_number.strip().upper()
    if order not in ORDERS:
        return ToolResult(error=f"no order {order_number!r}")
    return ToolResult(data={"exchange": f"EX-{order[2:]}", "item": ORDERS[order], "size": size})


registry = ToolRegistry([refund_status, open_return, open_exchange])
