"""An in-memory pizza shop for the example. Thread-safe (Step Functions runs Map iterations on
threads) and idempotent: an order placed again under the same idempotency key is placed once."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

SIZES = ("small", "medium", "large")
MAX_PIZZAS = 20  # the kitchen's oven capacity for one order


@dataclass
class Order:
    id: str
    owner: str
    size: str
    toppings: str
    quantity: int
    address: str
    status: str = "in the oven"


@dataclass
class Shop:
    # phone → pin of the shop's registered customers
    customers: dict[str, str] = field(
        default_factory=lambda: {"5550100": "4321", "5550199": "8765"}
    )
    orders: dict[str, Order] = field(default_factory=dict)
    _done: dict[str, dict[str, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.orders:
            # Someone else's order: a customer asking for its status must be refused.
            self.orders["P-7001"] = Order(
                "P-7001", "5550199", "small", "ham", 1, "9 Elm Road", "out for delivery"
            )

    def verify(self, phone: str, pin: str) -> str | None:
        """The customer's canonical phone number when the pin matches, else None."""
        digits = "".join(ch for ch in phone if ch.isdigit())
        return digits if self.customers.get(digits) == pin.strip() else None

    def place(
        self, key: str, owner: str, size: str, toppings: str, quantity: int, address: str
    ) -> dict[str, str]:
        """Place an order once per idempotency key; a replay returns the first result."""
        with self._lock:
            if key in self._done:
                return self._done[key]
            if quantity > MAX_PIZZAS:
                result = {
                    "status": "failed",
                    "reason": f"the kitchen cannot bake more than {MAX_PIZZAS} pizzas at once",
                }
            else:
                order_id = f"P-{8001 + len(self.placed())}"
                self.orders[order_id] = Order(order_id, owner, size, toppings, quantity, address)
                result = {"status": "placed", "order_id": order_id}
            self._done[key] = result
            return result

    def placed(self) -> list[Order]:
        """Orders placed through the agent (the seeded order of another customer excluded)."""
        return [o for o in self.orders.values() if o.id != "P-7001"]


SHOP = Shop()  # the demo's shop; tests make their own with reset_shop()


def reset_shop() -> Shop:
    global SHOP
    SHOP = Shop()
    return SHOP
