"""__PROJECT__'s tools. Each `@tool` function is one tool the agent may call; `registry` is what
Waypoint loads (found beside agent.yaml locally, the ToolsModule parameter in template.yaml).

The shop here is an in-memory stand-in: replace it with calls to your own systems. A tool returns
`ToolResult(data=...)` for the model, or `ToolResult(error=...)` when it could not do its job (the
agent then never claims it did).
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal, get_args

from engine.toolkit import ToolContextWithKey, ToolRegistry, ToolResult, tool

# An enum (Literal) lets the model pick only products the shop sells.
Product = Literal["t-shirt", "hoodie", "mug"]
# What a return may be for: a consequential tool runs on values the customer gave for it, and a
# listed reason named in their words is one ("it is too small"), while free text would be shown
# back to them to confirm first.
Reason = Literal["too small", "too big", "damaged", "not as described", "changed my mind"]
ORDER_ID = r"[A-Za-z]-\d{4}"  # the shape of an order number: no other word of theirs is one
CATALOG: dict[str, int] = dict(zip(get_args(Product), (12, 0, 40), strict=True))  # in stock
ORDERS = {"A-1001": "t-shirt", "A-1002": "mug"}
_returns: dict[str, str] = {}  # idempotency key → return id
_return_ids = itertools.count(501)


def reset_shop() -> None:
    """The shop as it starts; conversation tests call it before every run (`setup:`)."""
    global _return_ids
    _returns.clear()
    _return_ids = itertools.count(501)


@tool(description="Look up how many of a product are in stock")
def check_stock(product: Annotated[Product, "the product asked about"]) -> ToolResult:
    if product not in CATALOG:
        return ToolResult(error=f"no product named {product!r} (we sell: {', '.join(CATALOG)})")
    return ToolResult(data={"name": product, "in_stock": CATALOG[product]})


@tool(
    description="Start the return of an order",
    consequential=True,
    patterns={"order_id": ORDER_ID},
)
def start_return(
    context: ToolContextWithKey,
    order_id: Annotated[str, "the order number, e.g. A-1001"],
    reason: Annotated[Reason, "why the customer returns it"],
) -> ToolResult:
    order = order_id.strip().upper()
    if order not in ORDERS:
        return ToolResult(error=f"no order {order_id!r}")
    # The idempotency key is the same when a turn is retried: one return, however many retries.
    key = context.idempotency_key
    if key not in _returns:
        _returns[key] = f"R-{next(_return_ids)}"
    return ToolResult(data={"return_id": _returns[key], "order_id": order, "reason": reason})


TOOLS = [check_stock, start_return]
registry = ToolRegistry(TOOLS)
