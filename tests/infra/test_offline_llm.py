"""The offline provider (`infra.offline.OfflineLLM`) answers the engine's own prompts.

Every prompt here is built by the engine's real prompt builders, so a change of a prompt format
breaks these tests (with `UnrecognizedPrompt` naming the parser to update), not the demo. The
end-to-end tests run whole conversations through `TurnEngine` with real tools.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

import pytest

from engine.authoring import END_JOURNEY, Agent
from engine.clock import FixedClock, SequentialIds
from engine.compose import (
    CannedChoice,
    ComposedReply,
    CompositionInput,
    Instruction,
    Template,
    build_canned_prompt,
    build_compose_prompt,
)
from engine.context import TurnContext
from engine.errors import LLMError
from engine.matching.collected_values import coerce_collected
from engine.matching.guidelines import (
    Batch,
    BatchKind,
    CustomerDependentBatch,
    DisambiguationVerdict,
    GuidelineMatchBatch,
    build_match_prompt,
)
from engine.matching.journey_answer import JourneyNodeSelection, verify_advancement
from engine.matching.journey_graph import build_node_views
from engine.matching.journey_prompt import build_node_selection_prompt
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.model import AgentSnapshot, Guideline, Journey, Term
from engine.ports import ToolOutcome
from engine.recall.vectors import InMemoryVectorIndex, journey_index_texts
from engine.sessions.session import Event, EventKind, EventSource, InboundMessage, SessionState
from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, spec_of, tool
from engine.tools.calls import ToolCallPlan, build_tool_call_prompt
from engine.turn import EngineDeps, TurnEngine, TurnOutput
from infra.embeddings import HashingEmbedder
from infra.offline import MODEL_NAME, OfflineLLM, UnrecognizedPrompt
from infra.offline.choices import ordinal_pick
from infra.offline.slots import Slot
from infra.offline.values import extract_values

# --------------------------------------------------------------------------------------------------
# Tools and agents


logins: list[tuple[str, str]] = []
prices: list[str] = []
transfers: list[tuple[str, Decimal]] = []


@tool(description="Log the customer in")
def login(username: str, password: str) -> ToolResult:
    logins.append((username, password))
    return ToolResult(data={"authenticated": password == "monkey"})


@tool(description="Current price of a stock")
def stock_price(symbol: str) -> ToolResult:
    prices.append(symbol)
    return ToolResult(data={"symbol": symbol, "price": "187.20"})


@tool(description="Whether the balance covers an amount")
def check_funds(amount: Decimal) -> ToolResult:
    return ToolResult(data={"sufficient": Decimal(str(amount)) <= 1000})


@tool(description="Move money to another account")
def transfer_money(destination_account_id: str, amount: Decimal) -> ToolResult:
    transfers.append((destination_account_id, Decimal(str(amount))))
    return ToolResult(data={"status": "completed"})


@tool(description="Look up an order")
def lookup_order(order_id: str, region: str = "eu") -> ToolResult:
    return ToolResult(data={"order_id": order_id, "status": "shipped"})


@tool(description="Move money between two accounts")
def move_money(from_account_id: str, to_account_id: str, amount: Decimal) -> ToolResult:
    return ToolResult(data={"status": "completed"})


@tool(description="Open an account")
def open_account(kind: Literal["checking", "savings"], overdraft: bool = False) -> ToolResult:
    return ToolResult(data={"opened": kind})


def login_and_stocks() -> AgentSnapshot:
    """Two journeys: authenticate (username → password → login → END) and a stock lookup."""
    agent = Agent(id="broker", name="Broker", description="Helps customers log in and see stocks")
    # the symbols it quotes are the agent's vocabulary: "the price of AAPL" is a stock price
    agent.create_term("stock", "shares of a listed company", synonyms=["shares", "AAPL", "MSFT"])
    auth = agent.create_journey("Authentication", ["The customer wants to log in"], id="auth")
    username = auth.initial_state.transition_to(
        chat_state="Ask for the username", collects={"username": "str"}, id="ask_username"
    )
    password = username.transition_to(
        chat_state="Ask for the password", collects={"password": "str"}, id="ask_password"
    )
    password.transition_to(tool_state=spec_of(login), id="login").transition_to(state=END_JOURNEY)
    stocks = agent.create_journey(
        "Stock lookup", ["The customer wants to know the price of a stock"], id="stocks"
    )
    symbol = stocks.initial_state.transition_to(
        chat_state="Ask which stock the customer is interested in",
        collects={"symbol": "str"},
        id="ask_symbol",
    )
    price = symbol.transition_to(tool_state=spec_of(stock_price), id="price")
    price.transition_to(state=END_JOURNEY)
    return agent.build()


def transfer_agent() -> AgentSnapshot:
    """The seed's money transfer as one journey: ask → check funds → confirm → transfer."""
    agent = Agent(id="bank", name="Bank", description="Helps bank customers move money")
    # the agent's vocabulary, not the offline model's: "send $2000" is a transfer at this bank
    agent.create_term("transfer", "moving money to another account", synonyms=["send", "wire"])
    journey = agent.create_journey(
        "Money transfer", ["The customer wants to transfer money"], id="transfer"
    )
    ask = journey.initial_state.transition_to(
        chat_state="Ask for the destination account and the amount",
        collects={"destination_account_id": "str", "amount": "decimal>0"},
        id="ask",
    )
    check = ask.transition_to(
        tool_state=spec_of(check_funds),
        condition="The customer gave the destination account and the amount",
        id="check",
    )
    funds = check.transition_to(fork_state="Whether the balance covers the amount", id="funds")
    confirm = funds.fork(
        "The balance covers the amount",
        chat_state="Read the transfer back and ask the customer to confirm it",
        customer_dependent={
            "customer_action": "The customer confirmed or cancelled the transfer",
            "agent_action": "The agent read the transfer back",
        },
        id="confirm",
    )
    assert confirm is not None
    execute = confirm.transition_to(
        tool_state=spec_of(transfer_money), condition="The customer confirmed", id="execute"
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
    agent.create_term("Checking", "The everyday account")
    return agent.build()


def account_agent() -> AgentSnapshot:
    """A login journey with a fork after the tool, and an enum-collecting balance journey."""
    agent = Agent(id="acct", name="Bank", description="Helps bank customers")
    auth = agent.create_journey("Authentication", ["The customer wants to log in"], id="auth")
    ask = auth.initial_state.transition_to(
        chat_state="Ask for the username and the password",
        collects={"username": "str", "password": "str"},
        id="ask",
    )
    outcome = ask.transition_to(tool_state=spec_of(login), id="login").transition_to(
        fork_state="Whether the login succeeded", id="outcome"
    )
    welcome = outcome.fork(
        "The login succeeded", chat_state="Confirm the customer is logged in", id="welcome"
    )
    outcome.fork("The login failed", target=ask)
    assert welcome is not None
    welcome.transition_to(state=END_JOURNEY)
    balance = agent.create_journey("Balance", ["The customer wants an account balance"], id="bal")
    which = balance.initial_state.transition_to(
        chat_state="Ask which account",
        collects={"account": "enum:checking|savings"},
        id="which",
    )
    which.transition_to(chat_state="Tell the customer the balance", id="tell").transition_to(
        state=END_JOURNEY
    )
    return agent.build()


# --------------------------------------------------------------------------------------------------
# Building real prompts


def conversation(agent: AgentSnapshot, *lines: tuple[Any, ...]) -> list[Event]:
    """("customer", text) / ("agent", text) / ("tool", name, data) lines as session events."""
    events = []
    for offset, line in enumerate(lines):
        role = line[0]
        if role == "tool":
            kind, source, text, data = EventKind.TOOL, EventSource.SYSTEM, None, {}
            data = {"tool": line[1], "llm_view": line[2]}
        else:
            kind, text, data = EventKind.MESSAGE, line[1], {}
            source = EventSource.CUSTOMER if role == "customer" else EventSource.AGENT
        events.append(
            Event(
                id=f"ev{offset}",
                offset=offset,
                kind=kind,
                source=source,
                created_at=datetime(2024, 7, 17, tzinfo=UTC),
                text=text,
                data=data,
            )
        )
    return events


def context(
    agent: AgentSnapshot, *lines: tuple[Any, ...], results: tuple[ToolOutcome, ...] = ()
) -> TurnContext:
    events = tuple(conversation(agent, *lines))
    session = SessionState(id="s", agent_id=agent.id, customer_id="c", events=events)
    return TurnContext(
        agent=agent, session=session, history=events, terms=agent.terms, tool_results=results
    )


def outcome(tool_name: str, data: Any) -> ToolOutcome:
    return ToolOutcome(call_id=f"t:{tool_name}", tool=tool_name, data=data)


async def answer(prompt: str, schema: type[Any]) -> Any:
    generation = await OfflineLLM().generate(prompt, schema, model="gpt-4o-mini")
    return generation.value


# What words mean in this domain is the agent's to say (its glossary), not the offline model's.
BANK_TERMS = (
    Term(name="transfer", description="moving money to someone", synonyms=("send", "wire")),
    Term(name="card", description="a debit or credit card of the bank"),
)


def plain_agent(*guidelines: Guideline) -> AgentSnapshot:
    return AgentSnapshot(
        id="a",
        name="Bank",
        description="Helps bank customers",
        guidelines=guidelines,
        terms=BANK_TERMS,
    )


def rule(gid: str, condition: str, action: str | None = None, **metadata: Any) -> Guideline:
    return Guideline(id=gid, condition=condition, action=action, metadata=metadata)


TRANSFER = rule("transfer", "The customer wants to transfer money")
STOCK = rule("stock", "The customer wants to know the price of a stock")
LOST_CARD = rule(
    "lost", "The customer reports a lost or stolen card", "Tell the customer to call the hotline"
)
GREETING = rule("hello", "The customer has not said what they want yet", "Offer the services")
OFF_TOPIC = rule(
    "off", "The customer asks about something other than banking", "Say you only do banking"
)


async def verdicts(kind: BatchKind, *lines: tuple[Any, ...], rules: tuple[Guideline, ...]) -> dict:
    agent = plain_agent(*rules)
    prompt = build_match_prompt(context(agent, *lines), Batch(kind, rules))
    batch = await answer(prompt, GuidelineMatchBatch)
    handles = {f"g{i}": g.id for i, g in enumerate(rules, start=1)}
    return {handles[v.id]: v for v in batch.verdicts}


# --------------------------------------------------------------------------------------------------
# Guideline matching


async def test_a_condition_the_latest_message_states_applies_and_others_do_not() -> None:
    found = await verdicts(
        BatchKind.OBSERVATIONAL,
        ("customer", "I'd like to send $500 to my sister"),
        rules=(TRANSFER, STOCK, LOST_CARD),
    )
    assert found["transfer"].applies and found["transfer"].score >= 6
    assert not found["stock"].applies and not found["lost"].applies
    assert found["transfer"].score > found["stock"].score


async def test_matching_judges_the_latest_message_not_the_closed_topic() -> None:
    found = await verdicts(
        BatchKind.ACTIONABLE,
        ("customer", "Transfer money"),
        ("agent", "Could you tell me your username?"),
        ("customer", "seldo"),
        rules=(TRANSFER,),
    )
    assert not found["transfer"].applies


async def test_a_declined_wish_does_not_match_the_wish() -> None:
    found = await verdicts(
        BatchKind.ACTIONABLE, ("customer", "I don't want to transfer money"), rules=(TRANSFER,)
    )
    assert not found["transfer"].applies


async def test_greeting_and_off_topic_conditions_are_read_from_their_wording() -> None:
    hello = await verdicts(BatchKind.ACTIONABLE, ("customer", "Hi there!"), rules=(GREETING,))
    weather = await verdicts(
        BatchKind.ACTIONABLE,
        ("customer", "What's the weather like in Paris today?"),
        rules=(GREETING, OFF_TOPIC),
    )
    card = await verdicts(
        BatchKind.ACTIONABLE, ("customer", "I lost my card yesterday"), rules=(OFF_TOPIC,)
    )
    assert hello["hello"].applies
    assert weather["off"].applies and not weather["hello"].applies
    assert not card["off"].applies


async def test_a_previously_applied_guideline_reapplies_only_on_a_new_request() -> None:
    history = (
        ("customer", "I lost my card"),
        ("agent", "Please call the hotline right away."),
    )
    again = await verdicts(
        BatchKind.PREVIOUSLY_APPLIED,
        *history,
        ("customer", "ok, what is the hotline number?"),
        rules=(LOST_CARD,),
    )
    new = await verdicts(
        BatchKind.PREVIOUSLY_APPLIED,
        *history,
        ("customer", "My other card was stolen too, it's lost"),
        rules=(LOST_CARD,),
    )
    assert not again["lost"].applies
    assert new["lost"].applies


async def test_customer_dependent_is_completed_by_an_answer_of_the_asked_kind() -> None:
    order = rule(
        "order",
        "The customer asks about an order",
        "Ask for the order number",
        customer_dependent_action_data={
            "customer_action": "The customer provided the order number",
            "agent_action": "Ask for the order number",
        },
    )

    async def verdict(message: str) -> Any:
        agent = plain_agent(order)
        lines = (
            ("customer", "Where is my order?"),
            ("agent", "Could you tell me the order number?"),
            ("customer", message),
        )
        prompt = build_match_prompt(
            context(agent, *lines), Batch(BatchKind.CUSTOMER_DEPENDENT, (order,))
        )
        assert "customer must: The customer provided the order number" in prompt
        return (await answer(prompt, CustomerDependentBatch)).verdicts[0]

    given, asking, dropped = (
        await verdict("It's 12345"),
        await verdict("Why do you need it?"),
        await verdict("never mind"),
    )
    assert given.condition_holds and given.customer_completed
    assert asking.condition_holds and not asking.customer_completed
    assert not dropped.condition_holds


async def test_disambiguation_asks_when_several_options_fit_and_picks_a_single_fit() -> None:
    head = rule("book", "The customer wants to book something")
    flight = rule("flight", "The customer wants to book a flight", "Help book a flight")
    hotel = rule("hotel", "The customer wants to book a hotel room", "Help book a hotel")
    agent = plain_agent(head, flight, hotel)
    batch = Batch(BatchKind.DISAMBIGUATION, (flight, hotel), head=head)

    vague = await answer(
        build_match_prompt(context(agent, ("customer", "I want to book something")), batch),
        DisambiguationVerdict,
    )
    clear = await answer(
        build_match_prompt(context(agent, ("customer", "I want to book a flight to Rome")), batch),
        DisambiguationVerdict,
    )
    assert vague.head_applies and vague.is_ambiguous
    assert set(vague.candidate_ids) == {"g1", "g2"}
    assert "flight" in vague.clarification and "hotel" in vague.clarification
    assert clear.head_applies and not clear.is_ambiguous and clear.candidate_ids == ["g1"]


# --------------------------------------------------------------------------------------------------
# Journey node selection


def journey_of(agent: AgentSnapshot, journey_id: str) -> Journey:
    return agent.journey(journey_id)


def step_no(journey: Journey, node_id: str) -> str:
    return str(build_node_views(journey)[node_id].index)


async def select(
    agent: AgentSnapshot,
    journey_id: str,
    path: tuple[str, ...],
    *lines: tuple[Any, ...],
    collected: dict[str, Any] | None = None,
    results: tuple[ToolOutcome, ...] = (),
) -> tuple[JourneyNodeSelection, Any, dict[str, Any]]:
    """The offline answer, the engine's verified step and the typed values it accepted."""
    journey = journey_of(agent, journey_id)
    views = build_node_views(journey)
    prompt = build_node_selection_prompt(
        context(agent, *lines, results=results),
        journey,
        views,
        path,
        collected=collected or {},
        max_depth=5,
        explain=False,
    )
    selection = await answer(prompt, JourneyNodeSelection)
    executed = {r.tool for r in results}
    step = verify_advancement(
        journey, views, path, selection, executed, collected=set(collected or {})
    )
    values, _ = coerce_collected(journey, selection.collected, [n for n in step.path if n])
    return selection, step, values


async def test_entering_a_journey_stops_at_the_first_step_when_nothing_is_given() -> None:
    agent = transfer_agent()
    selection, step, values = await select(
        agent, "transfer", (), ("customer", "I want to transfer money")
    )
    assert step.node_id == "ask" and step.repairs == ()
    assert values == {}
    assert selection.journey_applies


async def test_entering_with_every_value_given_walks_to_the_tool_step() -> None:
    agent = transfer_agent()
    selection, step, values = await select(
        agent, "transfer", (), ("customer", "Please send $500 to account ID 1234324")
    )
    assert step.node_id == "check" and step.repairs == ()
    assert values == {"destination_account_id": "1234324", "amount": Decimal("500")}
    assert selection.next_step == step_no(journey_of(agent, "transfer"), "check")


async def test_a_journey_entered_on_an_unrelated_message_takes_only_named_values() -> None:
    """A journey resumed after its prerequisite sees the prerequisite's last answer."""
    agent = transfer_agent()
    asked_pin = ("agent", "Could you tell me your PIN?")
    _, step, values = await select(agent, "transfer", (), asked_pin, ("customer", "1234"))
    assert step.node_id == "ask" and values == {}

    named = ("customer", "To account ID 1234324")
    _, step, values = await select(agent, "transfer", (), ("agent", "Which account?"), named)
    assert step.node_id == "ask" and values == {"destination_account_id": "1234324"}


async def test_seed_answers_fill_the_asked_fields_one_at_a_time() -> None:
    agent = transfer_agent()
    asked = ("agent", "Could you tell me the destination account and the amount?")
    _, first, first_values = await select(
        agent,
        "transfer",
        ("ask",),
        ("customer", "Transfer money"),
        asked,
        ("customer", "To account ID 1234324"),
    )
    assert first.node_id == "ask" and first.outcome == "stay"
    assert first_values == {"destination_account_id": "1234324"}

    _, second, second_values = await select(
        agent,
        "transfer",
        ("ask",),
        ("customer", "To account ID 1234324"),
        ("agent", "Thanks! Could you tell me the amount?"),
        ("customer", "500"),
        collected={"destination_account_id": "1234324"},
    )
    assert second.node_id == "check"
    assert second_values == {"amount": Decimal("500")}


async def test_a_bare_answer_goes_to_the_field_the_agent_asked_for() -> None:
    agent = account_agent()
    lines = (
        ("customer", "I want to log in"),
        ("agent", "Could you tell me your username and password?"),
        ("customer", "seldo"),
    )
    _, step, values = await select(agent, "auth", ("ask",), *lines)
    assert step.node_id == "ask" and values == {"username": "seldo"}

    lines = (("agent", "Thanks! Could you tell me your password?"), ("customer", "monkey"))
    _, step, values = await select(agent, "auth", ("ask",), *lines, collected={"username": "seldo"})
    assert step.node_id == "login" and values == {"password": "monkey"}


@pytest.mark.parametrize(("authenticated", "expected"), [(True, "welcome"), (False, "ask")])
async def test_after_the_tool_the_fork_follows_the_tool_result(
    authenticated: bool, expected: str
) -> None:
    agent = account_agent()
    _, step, _ = await select(
        agent,
        "auth",
        ("ask", "login"),
        ("agent", "Could you tell me your password?"),
        ("customer", "monkey"),
        results=(outcome("login", {"authenticated": authenticated}),),
    )
    assert step.node_id == expected and step.repairs == ()


async def test_an_enum_answer_is_the_option_mentioned() -> None:
    agent = account_agent()
    lines = (("agent", "Which account do you mean?"), ("customer", "Checking"))
    selection, step, values = await select(agent, "bal", ("which",), *lines)
    assert values == {"account": "checking"}
    assert step.node_id == "tell"
    assert selection.step_advancement == [
        step_no(journey_of(agent, "bal"), "which"),
        step_no(journey_of(agent, "bal"), "tell"),
    ]


async def test_a_done_chat_step_before_the_end_answers_none() -> None:
    agent = account_agent()
    lines = (("agent", "Your checking balance is 1000."), ("customer", "great, thanks"))
    selection, step, _ = await select(agent, "bal", ("which", "tell"), *lines)
    assert selection.next_step == "NONE" and step.outcome == "completed"


@pytest.mark.parametrize(
    "message", ["cancel", "never mind", "stop", "I don't want to transfer money anymore"]
)
async def test_abandonment_drops_the_journey(message: str) -> None:
    agent = transfer_agent()
    lines = (("agent", "Could you tell me the destination account?"), ("customer", message))
    selection, step, _ = await select(agent, "transfer", ("ask",), *lines)
    assert not selection.journey_applies and step.outcome == "exit"


async def test_a_cancel_transition_is_taken_instead_of_dropping_the_journey() -> None:
    agent = transfer_agent()
    path = ("ask", "check", "funds", "confirm")
    lines = (("agent", "To confirm: 500 to 1234324. Shall I go ahead?"), ("customer", "no, cancel"))
    selection, step, _ = await select(agent, "transfer", path, *lines)
    assert selection.journey_applies and step.outcome == "completed"

    lines = (("agent", "Shall I go ahead?"), ("customer", "yes please"))
    _, step, _ = await select(agent, "transfer", path, *lines)
    assert step.node_id == "execute"


async def test_a_correction_backtracks_to_the_step_that_collected_the_value() -> None:
    agent = transfer_agent()
    selection, step, values = await select(
        agent,
        "transfer",
        ("ask", "check", "funds", "confirm"),
        ("agent", "To confirm: amount 500 to 1234324. Shall I go ahead?"),
        ("customer", "actually, make it 300"),
        collected={"destination_account_id": "1234324", "amount": Decimal("500")},
    )
    assert selection.requires_backtracking
    assert step.outcome == "backtrack" and step.node_id == "check"
    assert values == {"amount": Decimal("300")}


async def test_a_side_question_keeps_the_journey_where_it_is() -> None:
    agent = transfer_agent()
    lines = (("agent", "What amount?"), ("customer", "What is the daily limit?"))
    selection, step, values = await select(agent, "transfer", ("ask",), *lines)
    assert selection.journey_applies and step.node_id == "ask" and values == {}


# --------------------------------------------------------------------------------------------------
# Values (what the seed conversation needs)


@pytest.mark.parametrize(
    ("slot", "text", "answering", "expected"),
    [
        (Slot("destination_account_id"), "To account ID 1234324", (), "1234324"),
        (Slot("to_account_id"), "To account ID 1234324", (), "1234324"),
        (Slot("amount", "number"), "500", ("amount",), "500"),
        (Slot("amount", "number"), "$500", (), "500"),
        (Slot("amount", "number"), "500 dollars please", (), "500"),
        (Slot("amount", "number"), "make it 1,250.50", ("amount",), "1250.50"),
        (Slot("username"), "seldo", ("username",), "seldo"),
        (Slot("username"), "my username is seldo", (), "seldo"),
        (Slot("password"), "it's monkey", ("password",), "monkey"),
        (Slot("account_name"), "Checking", ("account_name",), "Checking"),
        (Slot("account_name"), "the balance of my Checking account", (), "Checking"),
        (Slot("account", "enum", ("checking", "savings")), "my savings please", (), "savings"),
        (Slot("symbol"), "What's the price of AAPL?", (), "AAPL"),
        (Slot("symbol"), "msft", ("symbol",), "MSFT"),
        (Slot("order_id"), "where is order #4521?", (), "4521"),
        (Slot("confirmed", "bool"), "yes, go ahead", ("confirmed",), "yes"),
        (Slot("day", "date"), "on July 17, 2024", (), "2024-07-17"),
    ],
)
def test_values_are_extracted_by_type(
    slot: Slot, text: str, answering: tuple[str, ...], expected: str
) -> None:
    assert extract_values([slot], text, answering=answering) == {slot.name: expected}


@pytest.mark.parametrize("slot", [Slot("password"), Slot("symbol"), Slot("order_id")])
@pytest.mark.parametrize("answer", ["/", " , ", "/ and /"])
def test_an_answer_of_separators_alone_gives_no_value(slot: Slot, answer: str) -> None:
    # Found by comparing the offline model's modules before and after a split: "/" raised.
    assert extract_values([slot], answer, answering=(slot.name,)) == {}


@pytest.mark.parametrize("answer", ["¹", "the ² one", "option ³"])
def test_a_superscript_is_not_an_option_number(answer: str) -> None:
    assert ordinal_pick(answer, ["Checking", "Savings", "Brokerage"]) is None


@pytest.mark.parametrize(
    ("text", "answering"),
    [
        ("Transfer money", ()),  # the request that opened the journey names no account
        ("Can you check my account balance?", ()),
        ("What do you need my username for?", ("username",)),  # a question is not an answer
        ("never mind", ("username",)),
    ],
)
def test_nothing_is_invented(text: str, answering: tuple[str, ...]) -> None:
    slots = [Slot("username"), Slot("destination_account_id"), Slot("account_name")]
    assert extract_values(slots, text, answering=answering) == {}


def test_an_amount_and_an_account_in_one_message_are_told_apart() -> None:
    slots = [Slot("destination_account_id"), Slot("amount", "number")]
    found = extract_values(slots, "Transfer 500 to 1234324")
    assert found == {"destination_account_id": "1234324", "amount": "500"}


# --------------------------------------------------------------------------------------------------
# Tool calls


async def test_tool_arguments_come_from_known_values_and_the_customers_words() -> None:
    agent = plain_agent()
    specs = [spec_of(stock_price), spec_of(lookup_order), spec_of(login)]
    ctx = context(agent, ("customer", "What's AAPL at, and where is order 4521 (region us)?"))
    prompt = build_tool_call_prompt(
        ctx, specs, {"stock_price": "Give the price"}, {"username": "seldo"}
    )
    plan = await answer(prompt, ToolCallPlan)
    calls = {c.tool: {a.name: a.value for a in c.arguments} for c in plan.calls}
    assert calls["stock_price"] == {"symbol": "AAPL"}
    assert calls["lookup_order"]["order_id"] == "4521"
    assert calls["login"] == {"username": "seldo"}  # the password is not there: left out


async def test_enum_options_and_the_customers_own_account_fill_arguments() -> None:
    agent = plain_agent()
    ctx = context(
        agent,
        ("customer", "Please open a savings account"),
        ("agent", "Done. Anything else?"),
        ("customer", "Yes: send 50 dollars to account 222"),
    )
    prompt = build_tool_call_prompt(
        ctx, [spec_of(open_account), spec_of(move_money)], {}, {"account_id": "111"}
    )
    plan = await answer(prompt, ToolCallPlan)
    calls = {c.tool: {a.name: a.value for a in c.arguments} for c in plan.calls}
    assert calls["open_account"] == {"kind": "savings"}
    assert calls["move_money"] == {"to_account_id": "222", "amount": "50", "from_account_id": "111"}


async def test_a_tool_whose_result_is_here_is_not_called_again() -> None:
    agent = plain_agent()
    ctx = context(
        agent, ("customer", "price of MSFT?"), results=(outcome("stock_price", {"price": 1}),)
    )
    prompt = build_tool_call_prompt(ctx, [spec_of(stock_price)], {}, {})
    assert (await answer(prompt, ToolCallPlan)).calls == []


# --------------------------------------------------------------------------------------------------
# Composition


async def compose(
    instructions: list[str],
    *lines: tuple[Any, ...],
    collected: dict[str, Any] | None = None,
    questions: list[str] | None = None,
    results: tuple[ToolOutcome, ...] = (),
) -> ComposedReply:
    data = CompositionInput(
        instructions=[Instruction(f"i{i}", t, f"g{i}") for i, t in enumerate(instructions, 1)],
        questions=questions or [],
        collected=collected or {},
    )
    prompt = build_compose_prompt(context(plain_agent(), *lines, results=results), data)
    return await answer(prompt, ComposedReply)


async def test_an_ask_instruction_becomes_a_question_for_what_is_still_missing() -> None:
    reply = await compose(
        ["(Authentication) Ask for the username and the password"],
        ("customer", "I want to log in"),
    )
    assert reply.message == "Could you tell me your username and password?"
    assert reply.applied == ["i1"]

    reply = await compose(
        ["(Authentication) Ask for the username and the password"],
        ("agent", "Could you tell me your username and password?"),
        ("customer", "seldo"),
        collected={"username": "seldo"},
    )
    assert reply.message == "Thanks! Could you tell me your password?"


async def test_instructions_are_rephrased_for_the_customer() -> None:
    reply = await compose(
        [
            "Ask which stock the customer is interested in",
            "Tell the customer to call the card hotline right away",
            "Offer to look up a stock price, log the customer in or transfer money",
            "Confirm that no money was moved",
            "Ask the customer to confirm the transfer",
        ],
        ("customer", "hello"),
    )
    assert reply.message.startswith("Hello! Which stock are you interested in?")
    assert "Please call the card hotline right away." in reply.message
    assert "I can look up a stock price, log you in or transfer money." in reply.message
    assert "I can confirm that no money was moved." in reply.message
    assert "Could you please confirm the transfer?" in reply.message
    assert reply.applied == ["i1", "i2", "i3", "i4", "i5"]


async def test_a_tell_instruction_quotes_the_tool_data() -> None:
    reply = await compose(
        ["(Stock lookup) Tell the customer the current price"],
        ("customer", "AAPL"),
        results=(outcome("stock_price", {"symbol": "AAPL", "price": "187.20"}),),
    )
    assert reply.message == "The current price for AAPL is 187.20."


async def test_missing_tool_arguments_become_questions_and_secrets_are_never_read_back() -> None:
    reply = await compose(
        ["(Money transfer) Read the transfer back and ask the customer to confirm it"],
        ("customer", "500"),
        collected={"password": "monkey", "amount": "500", "destination_account_id": "1234324"},
        questions=["To Move money, ask the customer for: from_account_id (the account to debit)"],
    )
    assert "amount 500" in reply.message and "1234324" in reply.message
    assert "monkey" not in reply.message
    assert reply.message.endswith("Could you tell me your source account id?")


async def test_without_instructions_the_tool_results_are_summarised() -> None:
    reply = await compose(
        [],
        ("customer", "MSFT"),
        results=(outcome("stock_price", {"price": 410, "symbol": "MSFT"}),),
    )
    assert reply.message == "Here is what I found: the price is 410, the symbol is MSFT."
    assert reply.applied == []


async def canned(strict: bool, templates: list[str]) -> CannedChoice:
    data = CompositionInput(
        instructions=[Instruction("i1", "(Balance) Tell the customer the balance", "g1")]
    )
    ctx = context(
        plain_agent(),
        ("customer", "checking"),
        results=(outcome("get_balance", {"account": "checking", "balance": "1000"}),),
    )
    values = {"account": "checking", "balance": "1000"}
    offered = [Template(f"t{i}", f"c{i}", text) for i, text in enumerate(templates, 1)]
    prompt = build_canned_prompt(ctx, data, offered, values, strict=strict)
    return await answer(prompt, CannedChoice)


async def test_canned_choice_picks_the_closest_template_or_none() -> None:
    chosen = await canned(
        True, ["Your card is on its way.", "Your {{account}} balance is {{balance}}."]
    )
    assert chosen.template == "t2" and chosen.applied == ["i1"]
    strict_none = await canned(True, ["Our branches open at nine."])
    fluid_none = await canned(False, ["Our branches open at nine."])
    assert strict_none.template is None and strict_none.message == ""
    assert fluid_none.template is None and "1000" in fluid_none.message


# --------------------------------------------------------------------------------------------------
# The provider itself


async def test_generations_report_the_offline_model_estimated_usage_and_latency() -> None:
    prompt = build_match_prompt(
        context(plain_agent(TRANSFER), ("customer", "Transfer money")),
        Batch(BatchKind.OBSERVATIONAL, (TRANSFER,)),
    )
    llm = OfflineLLM()
    first = await llm.generate(prompt, GuidelineMatchBatch, model="gpt-4o-mini")
    second = await llm.generate(prompt, GuidelineMatchBatch, model="gpt-4o-mini")
    assert first.model == MODEL_NAME == "offline-heuristic"
    assert first.usage.prompt_tokens == len(prompt) // 4
    assert first.usage.completion_tokens == len(first.value.model_dump_json()) // 4
    assert first.latency_ms >= 0
    assert first.value == second.value  # deterministic


async def test_a_prompt_in_an_unknown_format_fails_with_a_clear_error() -> None:
    llm = OfflineLLM()
    with pytest.raises(UnrecognizedPrompt, match="the prompt has no 'Task:' section") as raised:
        await llm.generate("Decide something.", GuidelineMatchBatch, model="m")
    assert isinstance(raised.value, LLMError)
    assert "infra/offline" in str(raised.value)
    with pytest.raises(UnrecognizedPrompt, match="Journey map"):
        await llm.generate(
            "Conversation (most recent last):\nCustomer: hi", JourneyNodeSelection, model="m"
        )


async def test_an_unknown_schema_is_refused() -> None:
    class Poem(GuidelineMatchBatch.__base__):  # type: ignore[misc, name-defined]
        text: str

    with pytest.raises(LLMError, match="cannot answer Poem"):
        await OfflineLLM().generate("Write a poem", Poem, model="m")


def test_the_factory_builds_the_offline_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.llm.factory import build_llm

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("WAYPOINT_LLM_PROVIDER", raising=False)
    assert isinstance(build_llm(), OfflineLLM)


# --------------------------------------------------------------------------------------------------
# End to end through the turn pipeline


class Chat:
    """A `TurnEngine` over in-memory stores, hashing embeddings and the offline model."""

    def __init__(self, agent: AgentSnapshot, *tools: Any) -> None:
        self.agent = agent
        self.agents = InMemoryAgentStore()
        self.sessions = InMemorySessionStore()
        self.embedder = HashingEmbedder()
        self.engine = TurnEngine(
            self.agents,
            self.sessions,
            EngineDeps(
                llm=OfflineLLM(),
                embedder=self.embedder,
                tools=InProcessDispatcher(ToolRegistry(list(tools))),
                clock=FixedClock(),
                ids=SequentialIds(),
            ),
            index_for=self._index,
        )
        self.turns = 0

    async def _index(self, agent: AgentSnapshot) -> InMemoryVectorIndex:
        texts = journey_index_texts(agent)
        ids = list(texts)
        return InMemoryVectorIndex(
            {"journeys": (ids, await self.embedder.embed(list(texts.values())))}
        )

    async def start(self) -> None:
        await self.agents.publish(self.agent)
        await self.sessions.create(SessionState(id="s", agent_id=self.agent.id, customer_id="c"))

    async def say(self, text: str) -> TurnOutput:
        self.turns += 1
        output = await self.engine.handle(
            "s", [InboundMessage(event_id=f"m{self.turns}", text=text)]
        )
        assert output.reply is not None
        assert all(c.model == MODEL_NAME and not c.error for c in output.trace.llm_calls)
        return output


async def test_login_then_stock_lookup_completes_with_the_right_tool_arguments() -> None:
    logins.clear()
    prices.clear()
    chat = Chat(login_and_stocks(), login, stock_price)
    await chat.start()

    hello = await chat.say("Hi!")
    assert hello.reply.text == "Hello! How can I help you today?"
    ask_user = await chat.say("I'd like to log in please")
    assert ask_user.reply.text == "Could you tell me your username?"
    ask_password = await chat.say("seldo")
    assert ask_password.reply.text == "Thanks! Could you tell me your password?"
    logged_in = await chat.say("monkey")
    assert logins == [("seldo", "monkey")]
    assert logged_in.state.completed_journeys == ("auth",)
    assert "authenticated: yes" in logged_in.reply.text

    ask_symbol = await chat.say("Can you look up a stock price for me?")
    assert ask_symbol.reply.text == "Which stock are you interested in?"
    priced = await chat.say("msft")
    assert prices == ["MSFT"]
    assert "187.20" in priced.reply.text
    direct = await chat.say("And what's the price of AAPL?")
    assert prices == ["MSFT", "AAPL"]
    assert direct.state.completed_journeys == ("auth", "stocks")
    assert direct.state.journey_paths["stocks"] == ("ask_symbol", "price", None)
    assert direct.state.collected[-1].value == "AAPL"


async def test_the_seed_transfer_runs_to_completion() -> None:
    transfers.clear()
    chat = Chat(transfer_agent(), check_funds, transfer_money)
    await chat.start()

    asked = await chat.say("Transfer money")
    assert asked.reply.text == "Could you tell me the destination account and the amount?"
    amount = await chat.say("To account ID 1234324")
    assert amount.reply.text == "Thanks! Could you tell me the amount?"
    read_back = await chat.say("500")
    assert read_back.state.journey_paths["transfer"][-1] == "confirm"
    assert "amount 500" in read_back.reply.text and "1234324" in read_back.reply.text
    done = await chat.say("yes please")
    assert transfers == [("1234324", Decimal("500"))]
    assert done.reply.text == "The transfer is complete."
    bye = await chat.say("thanks!")
    assert bye.state.completed_journeys == ("transfer",)


async def test_a_refused_amount_loops_back_and_a_cancel_ends_the_transfer() -> None:
    transfers.clear()
    chat = Chat(transfer_agent(), check_funds, transfer_money)
    await chat.start()

    too_much = await chat.say("Send $2000 to account 1234324")
    assert too_much.reply.text == "The balance does not cover the amount."
    retried = await chat.say("ok, let me try 300 instead")
    assert retried.state.journey_paths["transfer"][-1] == "confirm"
    assert "amount 300" in retried.reply.text
    cancelled = await chat.say("no, cancel it")
    assert transfers == []
    assert cancelled.state.journey_paths["transfer"][-1] is None
    assert "stopped" in cancelled.reply.text
