"""An in-memory bank for the concierge example. Thread-safe (Step Functions runs Map iterations
on threads) and idempotent: a transfer repeated under the same idempotency key moves money once."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from decimal import Decimal


@dataclass
class Account:
    id: str
    name: str
    owner: str
    balance: Decimal


@dataclass
class Bank:
    users: dict[str, str] = field(default_factory=lambda: {"seldo": "monkey"})
    accounts: dict[str, Account] = field(default_factory=dict)
    transfers: list[dict[str, str]] = field(default_factory=list)
    _done: dict[str, dict[str, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.accounts:
            for account in (
                Account("1234567890", "Checking", "seldo", Decimal("1000.00")),
                Account("5555000011", "Savings", "seldo", Decimal("25000.00")),
                Account("1234324", "External", "friend", Decimal("10.00")),
            ):
                self.accounts[account.id] = account

    def login(self, username: str, password: str) -> bool:
        return self.users.get(username.lower()) == password

    def account_named(self, owner: str, name: str) -> Account | None:
        wanted = name.strip().lower().removesuffix(" account")
        return next(
            (a for a in self.accounts.values() if a.owner == owner and a.name.lower() == wanted),
            None,
        )

    def transfer(self, key: str, source: str, target: str, amount: Decimal) -> dict[str, str]:
        """Move money once per idempotency key; a replay returns the first result."""
        with self._lock:
            if key in self._done:
                return self._done[key]
            src, dst = self.accounts.get(source), self.accounts.get(target)
            if src is None or dst is None:
                result = {"status": "failed", "reason": "unknown account"}
            elif amount <= 0 or src.balance < amount:
                result = {"status": "failed", "reason": "insufficient funds"}
            else:
                src.balance -= amount
                dst.balance += amount
                result = {
                    "status": "completed",
                    "amount": f"{amount:.2f}",
                    "to_account_id": target,
                    "new_balance": f"{src.balance:.2f}",
                }
                self.transfers.append({"from": source, "to": target, "amount": f"{amount:.2f}"})
            self._done[key] = result
            return result


BANK = Bank()  # the demo's bank; tests make their own with reset_bank()


def reset_bank() -> Bank:
    global BANK
    BANK = Bank()
    return BANK
