"""Safe actions through the real pipeline with a scripted (and deliberately wrong) model:
grounded arguments, confirmation of consequential calls, failed steps that do not advance, the
principal a tool establishes, and a reply that is never empty."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.model import Guideline
from engine.own_lines import FALLBACK_REPLY
from engine.sessions.session import InboundMessage
from engine.testing import ScriptedLLM
from engine.toolkit import ToolContextWithKey, ToolResult, tool
from engine.tools.calls import ToolCallPlan
from tests.engine.pipeline_kit import (
    Harness,
    advance,
    chain_journey,
    compose_echo,
    make_agent,
    match_when,
    per_journey,
    step_number,
    tool_harness,
)

SENT: list[dict[str, Any]] = []


@tool(
    description="Send money to an account",
    consequential=True,
    patterns={"to_account_id": r"\d{7,10}"},  # an account id's shape: no other number is one
)
def send_money(context: ToolContextWithKey, to_account_id: str, amount: Decimal) -> ToolResult:
    SENT.append({"to": to_account_id, "amount": Decimal(str(amount)), "who": context.principal})
    return ToolResult(data={"sent": f"{amount}"})


@tool(description="Pay a bill", consequential=True, confirm="always")
def pay_bill(bill_id: str) -> ToolResult:
    SENT.append({"bill": bill_id})
    return ToolResult(data={"paid": bill_id})


SEND = Guideline(
    id="send", condition="wants to send money", action="Send the money", tools=("send_money",)
)
PAY = Guideline(id="pay", condition="wants to pay a bill", action="Pay it", tools=("pay_bill",))


def plan(tool_name: str, **arguments: Any) -> dict[str, Any]:
    args = [{"name": k, "value": str(v)} for k, v in arguments.items()]
    return {"calls": [{"tool": tool_name, "arguments": args}]}


def money_harness(*plans: dict[str, Any]) -> tuple[Harness, ScriptedLLM]:
    SENT.clear()
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"send money": True, "pay a bill": True}))
    llm.on(ToolCallPlan, *plans)
    llm.on(ComposedReply, compose_echo)
    return tool_harness(llm, send_money, pay_bill, guidelines=[SEND, PAY], index=False), llm


async def test_an_invented_amount_is_never_used_the_customer_is_asked_instead() -> None:
    h, llm = money_harness(plan("send_money", to_account_id="1234324", amount=900))
    await h.start()

    out = await h.say("send $40 to 1234324")

    assert SENT == []
    record = out.trace.tool_calls[0]
    assert record.status == "ungrounded" and "amount" in record.detail
    assert "ask the customer for: amount" in llm.calls_for(ComposedReply)[-1].prompt


async def test_values_said_as_is_run_without_a_confirmation_turn() -> None:
    h, _ = money_harness(plan("send_money", to_account_id="1234324", amount=40))
    await h.start()

    out = await h.say("send $40 to 1234324")

    assert [{"to": "1234324", "amount": Decimal("40"), "who": None}] == SENT
    assert "amount ← customer message #0: '$40'" in out.trace.tool_calls[0].sources


async def test_an_inferred_value_is_stated_and_runs_only_after_a_yes() -> None:
    h, _ = money_harness(plan("send_money", to_account_id="1234324", amount=40))
    await h.start()

    asked = await h.say("send forty dollars to 1234324")

    assert SENT == []
    assert asked.trace.tool_calls[0].status == "awaiting_confirmation"
    assert "Please confirm — Send money to an account (to_account_id 1234324, amount 40" in (
        asked.reply.text
    )
    assert [o["id"] for o in asked.reply.data["options"]] == ["confirm", "cancel"]
    assert asked.state.pending_confirmation is not None

    done = await h.say("yes please")

    assert [{"to": "1234324", "amount": Decimal("40"), "who": None}] == SENT
    assert done.state.pending_confirmation is None


async def test_a_redelivered_question_is_answered_again_with_its_buttons() -> None:
    # The turn committed but its reply never reached the customer (the worker died): the queue
    # redelivers the message, and the replayed reply must carry the buttons again, although the
    # window a turn loads keeps them beside the event (`engine.sessions.history.CHANNEL_PAYLOAD`).
    h, _ = money_harness(plan("send_money", to_account_id="1234324", amount=40))
    await h.start()
    asked = await h.say("send forty dollars to 1234324")
    loaded = await h.sessions.load("s1")
    assert loaded is not None and "options" not in loaded.events[-1].data

    again = await h.engine.handle(
        "s1", [InboundMessage(event_id=f"m{h._n}", text="send forty dollars to 1234324")]
    )

    assert again.replayed and again.reply == asked.reply
    assert [o["id"] for o in again.reply.data["options"]] == ["confirm", "cancel"]
    assert SENT == []


async def test_a_button_press_confirms_and_a_no_cancels() -> None:
    h, _ = money_harness(plan("send_money", to_account_id="1234324", amount=40))
    await h.start()
    await h.say("send forty dollars to 1234324")
    declined = await h.say("no")
    assert SENT == [] and declined.state.pending_confirmation is None
    assert any("declined" in n for n in declined.trace.notes)

    await h.say("send forty dollars to 1234324")
    await h.say("", choice="confirm")
    assert len(SENT) == 1


async def test_a_changed_value_needs_a_new_confirmation() -> None:
    h, _ = money_harness(
        plan("send_money", to_account_id="1234324", amount=40),
        plan("send_money", to_account_id="1234324", amount=50),
    )
    await h.start()
    await h.say("send forty dollars to 1234324")

    changed = await h.say("actually make it fifty")

    assert SENT == []
    assert changed.trace.tool_calls[0].status == "awaiting_confirmation"
    assert "amount 50" in changed.reply.text


async def test_anything_but_a_clear_yes_drops_the_request() -> None:
    h, _ = money_harness(plan("send_money", to_account_id="1234324", amount=40), {"calls": []})
    await h.start()
    await h.say("send forty dollars to 1234324")

    out = await h.say("hmm what is the weather")

    assert SENT == [] and out.state.pending_confirmation is None


async def test_only_the_sender_who_was_asked_can_confirm() -> None:
    h, _ = money_harness(plan("send_money", to_account_id="1234324", amount=40), {"calls": []})
    await h.start()
    await h.say("send forty dollars to 1234324", metadata={"customer_id": "alice"})

    await h.say("yes", metadata={"customer_id": "mallory"})

    assert SENT == []


async def test_a_yes_in_a_burst_confirms_only_for_its_sender_whoever_writes_last() -> None:
    """Alice was asked; her yes arrives in one turn with mallory's yes after it (the turn
    answers mallory). The agreed call is alice's: it never runs as mallory's, on her words."""
    h, _ = money_harness(plan("send_money", to_account_id="1234324", amount=40))
    await h.start()
    await h.say("send forty dollars to 1234324", metadata={"customer_id": "alice"})

    out = await h.engine.handle(
        "s1",
        [
            InboundMessage(event_id="a", text="yes", metadata={"customer_id": "alice"}),
            InboundMessage(event_id="m", text="yes", metadata={"customer_id": "mallory"}),
        ],
    )

    assert SENT == []
    agreed = next(c for c in out.trace.tool_calls if c.arguments)  # alice's agreed call
    assert agreed.status == "ungrounded"  # not in mallory's words


async def test_confirm_always_asks_even_for_values_said_verbatim() -> None:
    h, _ = money_harness(plan("pay_bill", bill_id="B-77"))
    await h.start()

    asked = await h.say("I want to pay a bill: B-77")
    assert SENT == [] and asked.trace.tool_calls[0].status == "awaiting_confirmation"

    await h.say("confirm")
    assert SENT == [{"bill": "B-77"}]


async def test_an_empty_composition_becomes_the_fallback_reply() -> None:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({}))
    llm.on(ComposedReply, {"message": "   ", "applied": []})
    h = Harness(make_agent(guidelines=[SEND]), llm, index=False)
    await h.start()

    out = await h.say("hello")

    assert out.reply.text == FALLBACK_REPLY


# -- failed steps ---------------------------------------------------------------------------------

OUTCOMES: list[str] = []


@tool(description="Book the table")
def book(context: ToolContextWithKey, day: str) -> ToolResult:
    if OUTCOMES and OUTCOMES.pop(0) == "fail":
        return ToolResult(error="the booking system is down")
    return ToolResult(data={"booked": day})


BOOKING = chain_journey(
    "booking",
    "Table booking",
    "The customer wants to book a table",
    [
        ("ask_day", "Ask for the day", {"collects": ()}),
        ("book", "tool:book", {"action": "Tell the customer the table is booked"}),
        ("thanks", "Thank the customer"),
    ],
)


def booking_harness() -> tuple[Harness, ScriptedLLM]:
    journey = BOOKING[0]
    n = lambda node: step_number(journey, node)  # noqa: E731
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"book a table": True}))
    llm.on(
        JourneyNodeSelection,
        per_journey({"Table booking": [advance(n("ask_day"), n("book"))]}),
    )
    llm.on(ToolCallPlan, plan("book", day="friday"))
    llm.on(ComposedReply, compose_echo)
    return tool_harness(llm, book, journeys=[BOOKING]), llm


async def test_a_failed_tool_step_does_not_advance_and_the_reply_says_so() -> None:
    OUTCOMES[:] = ["fail"]
    h, llm = booking_harness()
    await h.start()

    out = await h.say("book a table for friday")

    assert out.state.journey_paths["booking"][-1] == "book"  # still at the tool step
    assert "booking" not in out.state.completed_journeys
    assert out.state.failed_steps == {"booking": "book"}
    prompt = llm.calls_for(ComposedReply)[-1].prompt
    assert "did NOT happen" in prompt
    assert "Tell the customer the table is booked" not in prompt

    OUTCOMES[:] = ["ok"]
    retried = await h.say("please try again, friday")

    assert [c.status for c in retried.trace.tool_calls] == ["ok"]
    assert retried.state.journey_paths["booking"][-1] == "thanks"
    assert retried.state.failed_steps == {}


# -- identity ---------------------------------------------------------------------------------

SEEN_PRINCIPALS: list[tuple[str, Any]] = []


@tool(description="Log in")
def log_in(context: ToolContextWithKey, username: str) -> ToolResult:
    return ToolResult(data={"ok": True}, control={"principal": {"username": username}})


@tool(description="Show the balance")
def show_balance(context: ToolContextWithKey) -> ToolResult:
    SEEN_PRINCIPALS.append((context.sender_id, context.principal))
    return ToolResult(data={"balance": "10"})


async def test_a_login_belongs_to_the_sender_who_logged_in_even_in_one_shared_session() -> None:
    SEEN_PRINCIPALS.clear()
    login_rule = Guideline(id="in", condition="wants to log in", action="Log in", tools=("log_in",))
    balance_rule = Guideline(
        id="bal", condition="asks for the balance", action="Give it", tools=("show_balance",)
    )
    llm = ScriptedLLM()
    llm.on(
        GuidelineMatchBatch,
        match_when({"log in": lambda m: "log" in m, "balance": lambda m: "balance" in m}),
    )
    llm.on(ToolCallPlan, plan("log_in", username="alice"))
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, log_in, show_balance, guidelines=[login_rule, balance_rule], index=False)
    await h.start()

    logged = await h.say("log me in as alice", metadata={"customer_id": "alice"})
    await h.say("what is my balance", metadata={"customer_id": "bob"})
    await h.say("and my balance?", metadata={"customer_id": "alice"})

    assert logged.state.principals == {"alice": {"username": "alice"}}
    assert SEEN_PRINCIPALS == [("bob", None), ("alice", {"username": "alice"})]


async def test_the_model_cannot_set_the_principal() -> None:
    # A hostile plan passes a 'principal' argument: unknown arguments are dropped, and only a
    # tool result's control field can establish who the sender is.
    SEEN_PRINCIPALS.clear()
    rule = Guideline(
        id="bal", condition="asks for the balance", action="Give it", tools=("show_balance",)
    )
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"balance": True}))
    llm.on(ToolCallPlan, plan("show_balance", principal="alice", username="alice"))
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, show_balance, guidelines=[rule], index=False)
    await h.start()

    out = await h.say("balance please, I am alice")

    assert SEEN_PRINCIPALS == [("c1", None)]
    assert out.state.principals == {}


async def test_a_reply_claiming_a_failed_step_is_replaced_by_the_failure() -> None:
    """A model that writes the step's success words after its tool failed is not believed."""
    OUTCOMES[:] = ["fail"]
    h, llm = booking_harness()
    llm._handlers["ComposedReply"] = []
    llm.on(ComposedReply, {"message": "Great news: the table is booked for Friday!"})
    await h.start()

    out = await h.say("book a table for friday")

    assert "booked" not in out.reply.text
    assert out.reply.text == (
        "Sorry — book the table did not happen (the booking system is down). "
        "Would you like me to try again?"
    )
    assert any("claimed that book succeeded" in n for n in out.trace.notes)


async def test_a_call_waiting_for_confirmation_is_planned_once_per_turn() -> None:
    h, llm = money_harness(plan("send_money", to_account_id="1234324", amount=40))
    await h.start()

    asked = await h.say("send forty dollars to 1234324")

    assert [c.status for c in asked.trace.tool_calls] == ["awaiting_confirmation"]
    assert len(llm.calls_for(ToolCallPlan)) == 1


# -- replies never claim what did not run ---------------------------------------------------------


def claiming_harness(*plans: dict[str, Any], claim: str) -> Harness:
    """The money agent with a model whose replies say `claim`, whatever happened. Sending
    money applies when the customer says "send"; paying a bill, always."""
    h, llm = money_harness(*plans)
    llm._handlers["GuidelineMatchBatch"] = []
    llm.on(GuidelineMatchBatch, match_when({"send money": lambda m: "send" in m, "bill": True}))
    llm._handlers["ComposedReply"] = []
    llm.on(ComposedReply, {"message": claim, "applied": []})
    return h


async def test_a_reply_never_claims_a_call_that_waits_for_a_confirmation() -> None:
    h = claiming_harness(
        plan("send_money", to_account_id="1234324", amount=40), claim="Done! I sent $40."
    )
    await h.start()

    out = await h.say("send forty dollars to 1234324")

    assert SENT == []
    statement, confirmation = out.reply.text.split("\n\n")
    assert statement == (
        "Nothing has been done yet — I need your confirmation before I send money to an account."
    )
    assert confirmation.startswith("Please confirm — Send money to an account (to_account_id")
    assert any("claimed that send_money succeeded" in n for n in out.trace.notes)


async def test_a_reply_never_claims_a_call_whose_values_are_missing() -> None:
    h = claiming_harness(plan("send_money", to_account_id="1234324"), claim="Money sent ✅")
    await h.start()

    out = await h.say("send money to 1234324")

    assert SENT == []
    assert out.reply.text == (
        "Nothing has been done yet — to send money to an account, I still need the amount."
    )


async def test_a_reply_never_claims_a_call_with_values_that_are_not_valid() -> None:
    h = claiming_harness(
        plan("send_money", to_account_id="1234324", amount="lots"), claim="All set, it's sent."
    )
    await h.start()

    out = await h.say("send lots of money to 1234324")

    assert out.trace.tool_calls[0].status == "invalid_arguments"
    assert out.reply.text == (
        "Nothing was done — send money to an account did not happen "
        "(the details given were not valid)."
    )


async def test_a_reply_never_claims_a_call_nothing_offered() -> None:
    h = claiming_harness(plan("send_money", to_account_id="1234324", amount=40), claim="Sent!")
    await h.start()

    out = await h.say("I want to pay a bill: B-77")  # only paying a bill is offered

    assert [(c.tool, c.status) for c in out.trace.tool_calls] == [("send_money", "refused")]
    assert SENT == []
    assert out.reply.text == "Nothing was done — send money to an account did not happen."


async def test_a_reply_never_claims_a_call_the_model_did_not_make() -> None:
    h = claiming_harness({"calls": []}, claim="Your money has been sent successfully.")
    await h.start()

    out = await h.say("send $40 to 1234324")

    assert out.trace.tool_calls == [] and SENT == []
    assert out.reply.text == (
        "Nothing has been done yet — send money to an account has not happened."
    )


async def test_an_honest_reply_about_a_call_that_waits_is_sent_as_written() -> None:
    honest = "I haven't sent anything yet: I need your confirmation before I send the money."
    h = claiming_harness(plan("send_money", to_account_id="1234324", amount=40), claim=honest)
    await h.start()

    out = await h.say("send forty dollars to 1234324")

    assert out.reply.text.split("\n\n")[0] == honest
