"""The concierge's tools, written with `@tool`. They talk to the in-memory bank in `bank.py`."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from engine.toolkit import ToolContextWithKey, ToolRegistry, ToolResult, tool
from engine.values import Money
from examples.banking import bank

# The bank's account ids: seven to ten digits. Declared, the customer's words are read for exactly
# this shape: "To account ID 1234-324" is 1234324, and no other number of theirs is an account.
ACCOUNT_ID = r"\d{7,10}"

PRICES = {"AAPL": "187.20", "MSFT": "411.05", "NVDA": "129.40", "AMZN": "181.30"}
NAMES = {"apple": "AAPL", "microsoft": "MSFT", "nvidia": "NVDA", "amazon": "AMZN"}


@tool(description="Find the ticker symbol of a company")
def lookup_stock_symbol(company: Annotated[str, "company name or ticker"]) -> ToolResult:
    text = company.strip()
    symbol = text.upper() if text.upper() in PRICES else NAMES.get(text.lower())
    if symbol is None:
        return ToolResult(data={"found": False}, error=f"no listed company called {company!r}")
    return ToolResult(data={"symbol": symbol})


@tool(description="Look up the current price of a stock")
def lookup_stock_price(symbol: Annotated[str, "ticker symbol, e.g. AAPL"]) -> ToolResult:
    price = PRICES.get(symbol.upper())
    if price is None:
        return ToolResult(error=f"unknown symbol {symbol!r}")
    return ToolResult(data={"symbol": symbol.upper(), "price": price, "currency": "USD"})


@tool(description="Log the customer in with their username and password", secret=("password",))
def authenticate(context: ToolContextWithKey, username: str, password: str) -> ToolResult:
    ok = bank.BANK.login(username, password)
    # A successful login establishes who this sender is; later tools check ownership against it.
    return ToolResult(
        data={"authenticated": ok, "username": username.lower() if ok else None},
        metadata={"session": context.session_id},
        control={"principal": {"username": username.lower()}} if ok else {},
    )


def _owner(context: ToolContextWithKey) -> str | None:
    """Who is logged in for the sender of this message (never a value the model chose)."""
    principal = context.principal or {}
    username = principal.get("username")
    return str(username) if username else None


def _own_account(context: ToolContextWithKey, account_id: str) -> bank.Account | ToolResult:
    owner = _owner(context)
    if owner is None:
        return ToolResult(error="the customer is not logged in")
    account = bank.BANK.accounts.get(account_id)
    if account is None or account.owner != owner:
        return ToolResult(error=f"account {account_id!r} is not one of this customer's accounts")
    return account


@tool(description="Find the id of one of the customer's accounts by its name")
def lookup_account_id(
    context: ToolContextWithKey, account_name: Annotated[str, "e.g. Checking or Savings"]
) -> ToolResult:
    owner = _owner(context)
    if owner is None:
        return ToolResult(error="the customer is not logged in")
    account = bank.BANK.account_named(owner, account_name)
    if account is None:
        return ToolResult(data={"found": False}, error=f"no account named {account_name!r}")
    return ToolResult(data={"account_id": account.id, "account_name": account.name})


@tool(description="Get the balance of an account")
def get_account_balance(context: ToolContextWithKey, account_id: str) -> ToolResult:
    account = _own_account(context, account_id)
    if isinstance(account, ToolResult):
        return account
    return ToolResult(data={"account_id": account.id, "balance": f"{account.balance:.2f}"})


def _dollars(amount: Money) -> Decimal | ToolResult:
    if amount.currency != "USD":
        return ToolResult(error=f"the bank moves US dollars only, not {amount.currency}")
    return amount.amount


@tool(
    description="Check whether an account has enough money for a transfer",
    currency="USD",
    sources={"account_id": "lookup_account_id.account_id"},
)
def check_funds(context: ToolContextWithKey, account_id: str, amount: Money) -> ToolResult:
    account = _own_account(context, account_id)
    dollars = _dollars(amount)
    if isinstance(account, ToolResult):
        return account
    if isinstance(dollars, ToolResult):
        return dollars
    return ToolResult(data={"sufficient": account.balance >= dollars})


@tool(
    description="Transfer money to another account",
    consequential=True,
    currency="USD",
    # The account to debit is the one whose balance the customer checked (the transfer requires
    # that check): its lookup is the only thing that may give it.
    sources={"account_id": "lookup_account_id.account_id"},
    patterns={"to_account_id": ACCOUNT_ID},
)
def transfer_money(
    context: ToolContextWithKey, account_id: str, to_account_id: str, amount: Money
) -> ToolResult:
    source = _own_account(context, account_id)
    dollars = _dollars(amount)
    if isinstance(source, ToolResult):
        return source
    if isinstance(dollars, ToolResult):
        return dollars
    # The idempotency key (session:turn:call) makes a retried task or redelivered turn harmless.
    result = bank.BANK.transfer(context.idempotency_key, source.id, to_account_id, dollars)
    if result["status"] != "completed":
        return ToolResult(data=result, error=result["reason"])
    return ToolResult(data=result)


TOOLS = [
    lookup_stock_symbol,
    lookup_stock_price,
    authenticate,
    lookup_account_id,
    get_account_balance,
    check_funds,
    transfer_money,
]
registry = ToolRegistry(TOOLS)
