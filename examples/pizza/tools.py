"""The pizza shop's tools, written with `@tool`. They talk to the in-memory shop in `shop.py`."""

from __future__ import annotations

from typing import Annotated, Literal

from engine.toolkit import ToolContextWithKey, ToolRegistry, ToolResult, tool
from examples.pizza import shop

Size = Literal["small", "medium", "large"]


@tool(description="Log the customer in with their phone number and PIN")
def verify_phone(
    phone: Annotated[str, "the customer's phone number"],
    pin: Annotated[str, "the customer's 4-digit PIN"],
) -> ToolResult:
    who = shop.SHOP.verify(phone, pin)
    # A successful login establishes who this sender is; order lookups check ownership with it.
    return ToolResult(
        data={"verified": who is not None},
        control={"principal": {"phone": who}} if who else {},
    )


@tool(description="Show the pizza sizes for the customer to pick one", kind="selector")
def choose_size() -> ToolResult:
    return ToolResult(data=list(shop.SIZES))


def _owner(context: ToolContextWithKey) -> str | None:
    """Who is logged in for the sender of this message (never a value the model chose)."""
    phone = (context.principal or {}).get("phone")
    return str(phone) if phone else None


@tool(description="Place the pizza order", consequential=True)
def place_order(
    context: ToolContextWithKey,
    size: Size,
    toppings: Annotated[str, "the toppings, as the customer said them"],
    quantity: Annotated[int, "how many pizzas"],
    address: Annotated[str, "the delivery address"],
) -> ToolResult:
    owner = _owner(context)
    if owner is None:
        return ToolResult(error="the customer is not logged in")
    # The idempotency key (session:turn:call) makes a retried task or redelivered turn harmless.
    result = shop.SHOP.place(context.idempotency_key, owner, size, toppings, int(quantity), address)
    if result["status"] != "placed":
        return ToolResult(data={"placed": False}, error=result["reason"])
    return ToolResult(data={"placed": True, "order_id": result["order_id"]})


@tool(description="Look up the status of one of the customer's orders")
def lookup_order_status(
    context: ToolContextWithKey, order_id: Annotated[str, "e.g. P-8001"]
) -> ToolResult:
    owner = _owner(context)
    if owner is None:
        return ToolResult(error="the customer is not logged in")
    order = shop.SHOP.orders.get(order_id.strip().upper())
    if order is None or order.owner != owner:
        return ToolResult(error=f"order {order_id!r} is not one of this customer's orders")
    return ToolResult(data={"order_id": order.id, "order_status": order.status})


TOOLS = [verify_phone, choose_size, place_order, lookup_order_status]
registry = ToolRegistry(TOOLS)
