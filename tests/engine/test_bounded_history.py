"""Bounded turns: a turn reads a window of recent events plus compact state, and every guarantee
that used to read the whole history still holds once the evidence has left the window."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.memory.stores import InMemorySessionStore
from engine.model import CollectedField, Guideline
from engine.ports import TurnCommit
from engine.sessions.history import EVENT_WINDOW, MAX_KEPT_BYTES, MAX_KEPT_EVENTS, keep_evidence
from engine.sessions.session import Event, EventKind, EventSource
from engine.testing import ScriptedLLM
from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, spec_of, tool
from tests.engine.pipeline_kit import (
    Harness,
    advance,
    chain_journey,
    compose_echo,
    make_agent,
    match_when,
    per_journey,
    step_number,
)

BALANCE_CALLS: list[str] = []
PRICE_CALLS: list[str] = []


@tool(description="the balance of an account")
def balance(account: str) -> ToolResult:
    BALANCE_CALLS.append(account)
    return ToolResult(data={"account": account, "balance": "1,204.00"})


@tool(description="look up a stock price")
def stock_price(symbol: str) -> ToolResult:
    PRICE_CALLS.append(symbol)
    return ToolResult(data={"symbol": symbol, "price": "187.20"})


BALANCE = chain_journey(
    "balance",
    "Balance",
    "The customer wants their balance",
    [
        ("acct", "Ask for the account number", {"collects": (CollectedField(name="account"),)}),
        ("wait", "Ask whether to show the balance now"),
        ("look", "tool:balance"),
    ],
)
CHATTER = 40  # turns of small talk: 80+ events, well past the window


def balance_harness() -> tuple[Harness, dict[str, list[Any]]]:
    journey = BALANCE[0]
    n = lambda node: step_number(journey, node)  # noqa: E731
    script: dict[str, list[Any]] = {
        "Balance": [
            advance(n("acct"), n("wait"), collected={"account": "12345678"}),
            advance(n("wait")),  # stays at the question while the customer chats
        ]
    }
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"balance": lambda m: "balance" in m}))
    llm.on(JourneyNodeSelection, per_journey(script))
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(journeys=[BALANCE], tools=[spec_of(balance)])
    tools = InProcessDispatcher(ToolRegistry([balance]))
    return Harness(agent, llm, tools=tools), script


async def test_a_value_given_before_the_window_still_grounds_a_later_tool_call() -> None:
    BALANCE_CALLS.clear()
    h, script = balance_harness()
    await h.start()
    await h.say("my balance please, account number 12345678")
    for i in range(CHATTER):
        await h.say(f"by the way, nice weather today ({i})")
    loaded = await h.sessions.load("s1")
    assert loaded is not None and len(loaded.events) == EVENT_WINDOW
    assert all("12345678" not in (e.text or "") for e in loaded.events)  # left the window

    script["Balance"][:] = [
        advance(step_number(BALANCE[0], "wait"), step_number(BALANCE[0], "look"))
    ]
    last = await h.say("yes, show it now")

    assert BALANCE_CALLS == ["12345678"]  # grounded in the customer's words, 80 events back
    [call] = last.trace.tool_calls
    assert call.status == "ok"
    assert any("customer message #0" in s for s in call.sources)


async def test_kept_evidence_grounds_only_its_own_senders_calls_after_the_window_moved() -> None:
    """In a group session the message holding alice's account number leaves the window and is
    kept as evidence with its sender: it grounds her call, never bob's."""
    BALANCE_CALLS.clear()
    h, script = balance_harness()
    await h.start()
    await h.say("my balance please, account number 12345678", metadata={"customer_id": "alice"})
    for i in range(CHATTER):
        await h.say(f"by the way, nice weather today ({i})", metadata={"customer_id": "bob"})
    loaded = await h.sessions.load("s1")
    assert loaded is not None
    assert all("12345678" not in (e.text or "") for e in loaded.events)  # left the window
    script["Balance"][:] = [
        advance(step_number(BALANCE[0], "wait"), step_number(BALANCE[0], "look"))
    ]

    bobs = await h.say("yes, show it now", metadata={"customer_id": "bob"})

    assert BALANCE_CALLS == []
    assert [c.status for c in bobs.trace.tool_calls] == ["ungrounded"]

    await h.say("yes, show it now", metadata={"customer_id": "alice"})

    assert BALANCE_CALLS == ["12345678"]


async def test_an_answer_stays_bound_to_its_question_when_the_window_forgets_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The adversary: a window that forgets. The answer was bound to its question when it was
    # said (`CollectedValue.bound`), so the call still runs on it — on the value as collected,
    # not on any number in view.
    monkeypatch.setattr("engine.sessions.history.MAX_KEPT_EVENTS", 0)
    BALANCE_CALLS.clear()
    h, script = balance_harness()
    await h.start()
    await h.say("my balance please, account number 12345678")
    for i in range(CHATTER):
        await h.say(f"by the way, nice weather today ({i})")
    script["Balance"][:] = [
        advance(step_number(BALANCE[0], "wait"), step_number(BALANCE[0], "look"))
    ]
    out = await h.say("yes, show it now")
    assert BALANCE_CALLS == ["12345678"]
    assert any("the answer for account" in s for c in out.trace.tool_calls for s in c.sources)


async def test_an_early_tool_result_is_not_repeated_after_it_left_the_window() -> None:
    PRICE_CALLS.clear()
    price = Guideline(
        id="price", condition="asks for the price", action="Give the price", tools=("stock_price",)
    )
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"price": lambda m: "price" in m}))
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(guidelines=[price], tools=[spec_of(stock_price)])
    h = Harness(agent, llm, tools=InProcessDispatcher(ToolRegistry([stock_price])), index=False)
    await h.start()
    from engine.memory.stores import InMemoryVariableStore

    store = InMemoryVariableStore()
    await store.set_variable(agent.id, "c1", "symbol", "NVDA")
    h.engine.variables = store

    await h.say("what's the price?")
    for i in range(CHATTER):
        await h.say(f"tell me a joke ({i})")
    again = await h.say("and the price again?")

    assert PRICE_CALLS == ["NVDA"]
    assert again.trace.tool_calls == []  # the session still holds that call's result
    kept = [e for e in again.state.kept_evidence if e.kind is EventKind.TOOL]
    assert [e.data["tool"] for e in kept] == ["stock_price"]


async def test_a_repeated_collected_value_keeps_one_entry_and_its_history_is_in_the_trace() -> None:
    journey = BALANCE[0]
    n = lambda node: step_number(journey, node)  # noqa: E731
    answers = iter(["111", *["111"] * 10, "222"])
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"balance": True}))
    llm.on(
        JourneyNodeSelection,
        lambda prompt: advance(n("acct"), collected={"account": next(answers)}),
    )
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(journeys=[BALANCE], tools=[spec_of(balance)]), llm)
    await h.start()
    outputs = [await h.say(f"balance of account {x}") for x in ["111", *["111"] * 10, "222"]]

    final = outputs[-1].state
    assert [(c.name, c.value) for c in final.collected] == [("account", "222")]
    assert any("balance.account: 222 replaces 111" in note for note in outputs[-1].trace.notes)
    assert not any("replaces" in note for o in outputs[:-1] for note in o.trace.notes)


async def test_state_and_reads_stay_bounded_over_a_long_session() -> None:
    h, _ = balance_harness()
    await h.start()
    sizes = []
    for i in range(120):
        await h.say(f"balance? account 12345678 ({i})" if i % 7 == 0 else f"chat {i}")
        loaded = await h.sessions.load("s1")
        assert loaded is not None
        sizes.append(len(loaded.model_dump_json()))
        assert len(loaded.events) <= EVENT_WINDOW
        assert len(loaded.kept_evidence) <= MAX_KEPT_EVENTS
    assert loaded.next_offset() == 240  # nothing lost: the full history is still stored
    history = await h.sessions.events("s1", after=-1, limit=1000)
    assert history is not None and [e.offset for e in history] == list(range(240))
    # The loaded state stops growing once its windows are full (events, ids, kept evidence):
    # from turn 70 on it varies by a few digits only.
    assert max(sizes[70:]) - min(sizes[70:]) < 0.05 * sizes[70]
    # The latest message holding the account number is in the window: nothing older is kept.
    assert any("12345678" in (e.text or "") for e in loaded.events)
    assert loaded.kept_evidence == ()


async def test_the_state_stores_no_id_its_window_already_shows() -> None:
    # Message and turn ids answered recently are recognised from the window's own events; the
    # state remembers only what the window does not show, so it does not grow by two id windows.
    h, _ = balance_harness()
    await h.start()
    for i in range(CHATTER):
        await h.say(f"chat {i}")
    loaded = await h.sessions.load("s1")
    assert loaded is not None
    assert loaded.processed_event_ids == () and loaded.committed_turn_ids == ()
    last = loaded.events[-1].turn_id
    assert last is not None and loaded.has_committed(last)
    assert loaded.has_processed(f"m{CHATTER}") and not loaded.has_processed("m1")


class LosesTheFirstAcknowledgement(InMemorySessionStore):
    """The commit is written, but the caller never hears it (a timeout after success)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    async def commit(self, commit: TurnCommit) -> bool:
        written = await super().commit(commit)
        if self.armed:
            self.armed = False
            raise TimeoutError("response lost after the write succeeded")
        return written


async def test_a_turn_whose_write_was_lost_after_success_replays_past_the_window() -> None:
    h, _ = balance_harness()
    h.sessions = h.engine.sessions = LosesTheFirstAcknowledgement()
    await h.start()
    for i in range(CHATTER):
        await h.say(f"chat {i}")
    h.sessions.armed = True
    with pytest.raises(TimeoutError):
        await h.say("one more", session_id="s1")
    # The queue redelivers the same message: same turn id, nothing recomputed or duplicated.
    from engine.sessions.session import InboundMessage

    again = await h.engine.handle("s1", [InboundMessage(event_id=f"m{h._n}", text="one more")])
    assert again.replayed and again.reply is not None
    history = await h.sessions.events("s1", after=-1, limit=1000)
    assert history is not None
    assert [e.text for e in history].count("one more") == 1
    assert len(history) == 2 * (CHATTER + 1)


def _tool_event(offset: int, tool: str, arguments: dict[str, Any], view: Any) -> Event:
    return Event(
        id=f"ev{offset}",
        offset=offset,
        kind=EventKind.TOOL,
        source=EventSource.SYSTEM,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        turn_id=f"t{offset}",
        data={"tool": tool, "call_id": f"t{offset}:0", "arguments": arguments,
              "llm_view": view, "view": {"card": "x" * 500}, "sender": "c1"},
    )  # fmt: skip


def test_kept_evidence_is_compact_and_bounded_in_bytes_whatever_a_tool_returned() -> None:
    # A tool returned a large nested result (a statement with hundreds of lines): every later
    # turn reads the session's state, so only what grounding reads of it is kept — its flat
    # values — and the evidence as a whole never passes MAX_KEPT_BYTES.
    statement = {"account_id": "1234567890", "balance": "1000.00",
                 "lines": [{"n": i, "memo": "coffee " * 20} for i in range(300)]}  # fmt: skip
    events = [_tool_event(0, "statement", {"account": "Checking"}, statement)]
    events += [
        _tool_event(i, f"lookup_{i}", {"q": str(i)}, {"text": "y" * 1500}) for i in range(1, 12)
    ]

    kept = keep_evidence(events, [])

    assert sum(len(e.model_dump_json()) for e in kept) <= MAX_KEPT_BYTES
    assert all("view" not in e.data and "call_id" not in e.data for e in kept)
    assert kept[-1].data["tool"] == "lookup_11"  # the newest stay, the oldest went first
    alone = keep_evidence(events[:1], [])
    assert alone[0].data["llm_view"] == {"account_id": "1234567890", "balance": "1000.00"}
    assert alone[0].data["arguments"] == {"account": "Checking"}  # the repeated-call check


def test_a_tool_called_in_a_loop_never_pushes_out_another_tools_latest_result() -> None:
    # The account lookup ran once; then a funds check ran for every amount tried, a hundred
    # times (a transfer looping on insufficient funds). The next check still needs the account
    # id: the lookup stays evidence, and the newest checks with it.
    lookup = _tool_event(0, "lookup_account_id", {"account_name": "Checking"},
                         {"account_id": "1234567890"})  # fmt: skip
    checks = [
        _tool_event(n, "check_funds", {"account_id": "1234567890", "amount": str(1000 + n)},
                    {"sufficient": False})
        for n in range(1, 101)
    ]  # fmt: skip

    kept = keep_evidence([lookup, *checks], [])

    assert kept[0].data["tool"] == "lookup_account_id"
    assert kept[-1].data["arguments"]["amount"] == "1100"
    assert len(kept) <= MAX_KEPT_EVENTS
    assert [e.offset for e in kept] == sorted(e.offset for e in kept)
