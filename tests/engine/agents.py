"""Agent factories for engine tests: the banking concierge, a small agent, and snapshot surgery
for tests that need a definition the builder would never produce."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.authoring import END_JOURNEY, Agent
from engine.model import AgentSnapshot, Journey
from engine.tools.spec import ToolParameter, ToolSpec

DATA = Path(__file__).parent / "data"
BANK_CONCIERGE_YAML = DATA / "bank_concierge.yaml"


def tool(name: str, *parameters: str, **options: Any) -> ToolSpec:
    """A tool whose parameters are required strings unless given as `name:type`."""
    params = []
    for spec in parameters:
        param_name, _, param_type = spec.partition(":")
        params.append(ToolParameter(name=param_name, type=param_type or "string"))
    return ToolSpec(name=name, parameters=tuple(params), **options)


LOOKUP_STOCK_PRICE = tool("lookup_stock_price", "symbol", description="Current price of a stock")
AUTHENTICATE = tool("authenticate", "username", "password", description="Log the customer in")
LOOKUP_ACCOUNT_ID = tool("lookup_account_id", "account_name", description="Id of a named account")
GET_ACCOUNT_BALANCE = tool("get_account_balance", "account_id", description="Balance of an account")
CHECK_FUNDS = tool(
    "check_funds", "account_id", "amount:number", description="Whether funds suffice"
)
TRANSFER_MONEY = tool(
    "transfer_money",
    "from_account_id",
    "to_account_id",
    "amount:number",
    description="Move money between accounts",
    consequential=True,
)


def bank_concierge() -> Agent:
    """The concierge of the seed, as journeys: balance requires authentication; transfer requires
    authentication and a balance check. `data/bank_concierge.yaml` is the same agent."""
    agent = Agent(
        id="bank",
        name="Bank concierge",
        description="Helps bank customers with stocks, authentication, balances and transfers",
        config={"journey_top_k": 2},
    )
    agent.create_guideline(
        "The customer has not said what they want yet",
        "Offer to look up a stock price, log the customer in, check a balance or transfer money",
        id="offer_services",
    )
    lost_card = agent.create_guideline(
        "The customer reports a lost or stolen card",
        "Tell the customer to call the card hotline right away",
        criticality="high",
        id="lost_card",
    )
    agent.create_guideline(
        "The customer asks about something other than banking",
        "Say politely that you can only help with banking",
    )
    _stock_lookup(agent)
    authenticate = _authentication(agent)
    balance = _balance(agent, requires=authenticate)
    transfer = _transfer(agent, requires=[authenticate, balance])
    lost_card.prioritize_over(transfer)
    agent.create_term("Checking account", "The everyday account", synonyms=["current account"])
    agent.create_variable("customer_name", "How the customer likes to be addressed")
    agent.create_canned_response("Your {{account}} balance is {{balance}}.", id="balance_report")
    return agent


def _stock_lookup(agent: Agent) -> None:
    journey = agent.create_journey(
        "Stock price lookup", ["The customer wants to know the price of a stock"], id="stock"
    )
    ask = journey.initial_state.transition_to(
        chat_state="Ask which stock the customer is interested in",
        collects={"symbol": "str"},
        id="ask_symbol",
    )
    lookup = ask.transition_to(
        tool_state=LOOKUP_STOCK_PRICE, condition="The customer named a stock", id="lookup"
    )
    tell = lookup.transition_to(chat_state="Tell the customer the current price", id="tell")
    tell.transition_to(state=END_JOURNEY)


def _authentication(agent: Agent) -> Any:
    journey = agent.create_journey(
        "Authentication",
        ["The customer wants to log in", "A task the customer asked for requires logging in"],
        id="authenticate",
    )
    ask = journey.initial_state.transition_to(
        chat_state="Ask for the username and the password",
        collects={"username": "str", "password": "str"},
        id="ask_credentials",
    )
    login = ask.transition_to(
        tool_state=AUTHENTICATE,
        condition="The customer gave a username and a password",
        id="login",
    )
    outcome = login.transition_to(fork_state="Whether the login succeeded", id="outcome")
    welcome = outcome.fork(
        "The login succeeded", chat_state="Confirm the customer is logged in", id="welcome"
    )
    outcome.fork("The login failed", target=ask)
    assert welcome is not None
    welcome.transition_to(state=END_JOURNEY)
    return journey


def _balance(agent: Agent, requires: Any) -> Any:
    journey = agent.create_journey(
        "Account balance",
        ["The customer wants to know an account balance"],
        requires=[requires],
        id="balance",
    )
    ask = journey.initial_state.transition_to(
        chat_state="Ask which account",
        collects={"account": "enum:checking|savings"},
        id="ask_account",
    )
    fetch = ask.transition_to(
        tool_state=[LOOKUP_ACCOUNT_ID, GET_ACCOUNT_BALANCE],
        condition="The customer named an account",
        id="fetch",
    )
    report = fetch.transition_to(chat_state="Tell the customer the balance", id="report")
    report.transition_to(state=END_JOURNEY)
    return journey


def _transfer(agent: Agent, requires: list[Any]) -> Any:
    journey = agent.create_journey(
        "Money transfer", ["The customer wants to transfer money"], requires=requires, id="transfer"
    )
    ask = journey.initial_state.transition_to(
        chat_state="Ask for the destination account and the amount",
        collects={"destination_account_id": "str", "amount": "decimal>0"},
        id="ask_transfer",
    )
    check = ask.transition_to(
        tool_state=CHECK_FUNDS,
        action="Check that the balance covers the amount",
        condition="The customer gave the destination account and the amount",
        id="check",
    )
    funds = check.transition_to(fork_state="Whether the balance covers the amount", id="funds")
    confirm = funds.fork(
        "The balance covers the amount",
        chat_state="Read the transfer back and ask the customer to confirm it",
        customer_dependent={
            "customer_action": "The customer confirmed or cancelled the transfer",
            "agent_action": "The agent read the transfer back and asked for confirmation",
        },
        id="confirm",
    )
    assert confirm is not None
    execute = confirm.transition_to(
        tool_state=TRANSFER_MONEY, condition="The customer confirmed", id="execute"
    )
    confirm.transition_to(state=END_JOURNEY, condition="The customer cancelled")
    done = execute.transition_to(chat_state="Tell the customer the transfer is complete", id="done")
    done.transition_to(state=END_JOURNEY)
    too_much = funds.fork(
        "The balance does not cover the amount",
        chat_state="Explain that the balance does not cover the amount",
        id="too_much",
    )
    assert too_much is not None
    too_much.transition_to(state=ask, condition="The customer wants to try another amount")
    too_much.transition_to(state=END_JOURNEY, condition="The customer gives up")
    journey.create_guideline(
        "The customer wants to cancel the transfer", "Confirm that no money was moved"
    )
    return journey


def small_agent() -> Agent:
    """One guideline with a tool, one journey: ask → check → decide (fork) → END / back to ask."""
    agent = Agent(id="shop", name="Shop")
    agent.create_guideline(
        "The customer asks for an order's status",
        "Look the order up and tell its status",
        tools=[tool("lookup_order", "order_id")],
        id="order_status",
    )
    journey = agent.create_journey("Refund", ["The customer wants a refund"], id="refund")
    ask = journey.initial_state.transition_to(
        chat_state="Ask for the order number", collects={"order_id": "str"}, id="ask"
    )
    check = ask.transition_to(
        tool_state=tool("check_refund", "order_id"), condition="The customer gave it", id="check"
    )
    decide = check.transition_to(fork_state="Whether a refund is possible", id="decide")
    decide.fork("A refund is possible", target=END_JOURNEY)
    decide.fork("No refund is possible", target=ask)
    return agent


# --------------------------------------------------------------------------------------------------
# Snapshot surgery: definitions the builder would refuse, for validation tests


def revised(snapshot: AgentSnapshot, **changes: Any) -> AgentSnapshot:
    """A copy of `snapshot` with top-level fields replaced (indexes rebuilt, no validation)."""
    return AgentSnapshot(**{**dict(snapshot), **changes})


def revised_journey(snapshot: AgentSnapshot, journey_id: str, **changes: Any) -> AgentSnapshot:
    journeys = tuple(
        Journey(**{**dict(j), **changes}) if j.id == journey_id else j for j in snapshot.journeys
    )
    return revised(snapshot, journeys=journeys)
