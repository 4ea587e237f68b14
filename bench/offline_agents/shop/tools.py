"""The shop's tools: an in-memory stand-in for a shop's systems."""

from __future__ import annotations

import itertools
from typing import Annotated, Literal, get_args

from engine.toolkit import ToolContextWithKey, ToolRegistry, ToolResult, tool

Product = Literal["t-shirt", "hoodie", "mug"]
Reason = Literal["too small", "too big", "damaged", "not as described", "changed my mind"]
ORDER_ID = r"[A-Za-z]-\d{4}"
CATALOG: dict[str, int] = dict(zip(get_args(Product), (12, 0, 40), strict=True))
ORDERS = {
    "A-1001": {"item": "t-shirt", "status": "out for delivery", "arrives": "today"},
    "A-1002": {"item": "mug", "status": "shipped", "arrives": "Friday"},
}
_returns: dict[str, str] = {}
_return_ids = itertools.count(501)


def reset_shop() -> None:
    """The shop as it starts (`setup:` of every conversation test)."""
    global _return_ids
    _returns.clear()
    _return_ids = itertools.count(501)


@tool(description="Look up how many of a product are in stock")
def check_stock(product: Annotated[Product, "the product asked about"]) -> ToolResult:
    return ToolResult(data={"name": product, "in_stock": CATALOG[product]})


@tool(description="Look up where an order is and when it arrives", patterns={"order_id": ORDER_ID})
def order_status(order_id: Annotated[str, "the order number, e.g. A-1001"]) -> ToolResult:
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        return ToolResult(error=f"no order {order_id!r}")
    return ToolResult(data={"order_id": order_id.strip().upper(), **order})


@tool(
    description="Start the return of an order", consequential=True, patterns={"order_id": ORDER_ID}
)
def start_return(
    context: ToolContextWithKey,
    order_id: Annotated[str, "the order number, e.g. A-1001"],
    reason: Annotated[Reason, "why the customer returns it"],
) -> ToolResult:
    order = order_id.strip().upper()
    if order not in ORDERS:
        return ToolResult(error=f"no order {order_id!r}")
    key = context.idempotency_key
    if key not in _returns:
        _returns[key] = f"R-{next(_return_ids)}"
    return ToolResult(data={"return_id": _returns[key], "order_id": order, "reason": reason})


registry = ToolRegistry([check_stock, order_status, start_return])
