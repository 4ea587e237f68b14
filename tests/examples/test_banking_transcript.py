"""The seed's conversation (transfer → username → password → account name → destination →
amount) through the real engine, the offline model and the banking tools: exactly one transfer of
the right amount, prerequisites first, nothing asked twice."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.ports import Generation
from engine.recall.vectors import agent_index_texts, build_index
from engine.sessions.session import InboundMessage, SessionState
from engine.toolkit import InProcessDispatcher
from engine.turn import EngineDeps, TurnEngine
from examples.banking import bank, load
from examples.banking.tools import registry
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM

SEED = ["Hi", "Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324", "500"]


class RecordingLLM:
    """The offline model, keeping every prompt it was sent (per turn, in order)."""

    def __init__(self) -> None:
        self.inner = OfflineLLM()
        self.prompts: list[str] = []

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        self.prompts.append(prompt)
        return await self.inner.generate(prompt, schema, model=model)


@pytest.fixture
def llm() -> RecordingLLM:
    return RecordingLLM()


@pytest.fixture
def sessions() -> InMemorySessionStore:
    return InMemorySessionStore()


@pytest.fixture
async def concierge(llm: RecordingLLM, sessions: InMemorySessionStore):
    bank.reset_bank()
    agent = load()
    agents = InMemoryAgentStore()
    await agents.publish(agent)
    embedder = HashingEmbedder()
    index = await build_index(embedder, agent_index_texts(agent))

    async def index_for(_agent):
        return index

    engine = TurnEngine(
        agents,
        sessions,
        EngineDeps(llm=llm, embedder=embedder, tools=InProcessDispatcher(registry)),
        index_for=index_for,
    )
    await sessions.create(SessionState(id="s", agent_id=agent.id, customer_id="c"))

    counter = iter(range(1, 1000))

    async def say(text: str, event_id: str | None = None):
        event_id = event_id or f"m{next(counter)}"
        return await engine.handle("s", [InboundMessage(event_id=event_id, text=text)])

    return say


async def test_seed_conversation_ends_with_exactly_one_transfer(concierge) -> None:
    replies = [(await concierge(text)) for text in SEED]
    texts = [r.reply.text for r in replies]

    assert "stock price" in texts[0] and "transfer money" in texts[0]
    assert "username" in texts[1] and "authentication" in texts[1]
    assert "password" in texts[2]
    assert "logged in" in texts[3] and "account" in texts[3]
    assert "1000.00" in texts[4] and "transfer" in texts[4]
    assert "how much" in texts[5].lower()
    assert (
        texts[6]
        == "Done! I transferred 500.00 USD to account 1234324. Your new balance is $500.00."
    )

    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]
    assert bank.BANK.accounts["1234567890"].balance == Decimal("500.00")
    final = replies[-1].state
    assert set(final.completed_journeys) == {"authenticate", "balance", "transfer"}
    assert final.suspended_journeys == ()
    # No question was asked twice: each customer answer was needed exactly once.
    assert len(set(texts)) == len(texts)


async def test_a_transfer_asked_in_one_message_is_not_asked_again_after_the_prerequisites(
    concierge,
) -> None:
    # Values given ahead of their step: the amount and the destination, said before the login
    # and the balance check, are kept for the transfer and its two questions are never asked.
    replies = [
        (await concierge(text))
        for text in ["Transfer $250 from savings to 1234324", "seldo", "monkey", "Savings"]
    ]
    texts = [r.reply.text for r in replies]

    assert "username" in texts[0] and "password" in texts[1] and "account" in texts[2]
    assert (
        texts[3]
        == "Done! I transferred 250.00 USD to account 1234324. Your new balance is $24750.00."
    )
    assert bank.BANK.transfers == [{"from": "5555000011", "to": "1234324", "amount": "250.00"}]
    assert not any("how much" in t.lower() or "account id" in t.lower() for t in texts)
    assert set(replies[-1].state.completed_journeys) == {"authenticate", "balance", "transfer"}


async def test_prerequisites_run_in_order_and_the_transfer_resumes_by_itself(concierge) -> None:
    replies = [(await concierge(text)) for text in SEED[:5]]

    started = {t.journey_id: t.how for r in replies for t in r.trace.journeys}
    assert started["transfer"] in {"entry", "llm"}
    assert replies[1].state.suspended_journeys == ("transfer",)
    assert replies[3].state.active_journey_ids == ["balance"]  # auth done, balance next
    assert replies[4].state.active_journey_ids == ["transfer"]  # resumed without being asked


async def test_redelivered_final_message_does_not_transfer_twice(concierge) -> None:
    replies = [(await concierge(text)) for text in SEED]

    # The channel delivers the last message again (same event id): the turn is replayed.
    again = await concierge("500", event_id="m7")

    assert again.replayed
    assert again.reply == replies[-1].reply
    assert len(bank.BANK.transfers) == 1


async def test_an_account_that_is_not_found_takes_the_failure_transition_and_asks_again(
    concierge,
) -> None:
    for text in ["What is my balance?", "seldo", "monkey"]:
        await concierge(text)

    missed = await concierge("Chequing")

    assert missed.state.journey_paths["balance"][-1] == "ask_account"
    assert [c.status for c in missed.trace.tool_calls] == ["error"]
    assert any(t.how == "on_failure" for t in missed.trace.journeys)
    assert "no account named" in missed.reply.text and "account" in missed.reply.text.lower()
    assert "balance" not in missed.state.completed_journeys

    found = await concierge("Savings")

    assert "25000.00" in found.reply.text
    assert "balance" in found.state.completed_journeys


async def test_a_failed_transfer_stays_put_never_claims_success_and_retries_only_after_a_yes(
    concierge, monkeypatch
) -> None:
    for text in SEED[:6]:
        await concierge(text)
    real_transfer = bank.BANK.transfer
    monkeypatch.setattr(
        bank.BANK, "transfer", lambda *_: {"status": "failed", "reason": "the bank is closed"}
    )

    failed = await concierge("500")

    assert [(c.tool, c.status) for c in failed.trace.tool_calls][-1] == ("transfer_money", "error")
    assert failed.state.journey_paths["transfer"][-1] == "transfer"  # stays at the step
    assert "transfer" not in failed.state.completed_journeys
    assert "Done!" not in failed.reply.text and "the bank is closed" in failed.reply.text
    assert failed.state.failed_steps == {"transfer": "transfer"}

    monkeypatch.setattr(bank.BANK, "transfer", real_transfer)
    asked = await concierge("please try again")

    assert bank.BANK.transfers == []  # a retry of a failed consequential step asks first
    assert "Please confirm — Try again: Transfer money to another account" in asked.reply.text
    assert "amount 500" in asked.reply.text and "to_account_id 1234324" in asked.reply.text

    done = await concierge("yes")

    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]
    assert "transfer" in done.state.completed_journeys
    assert done.reply.text.startswith("Done! I transferred 500.00 USD")


async def test_an_inferred_amount_is_confirmed_before_the_transfer(concierge) -> None:
    for text in SEED[:6]:
        await concierge(text)

    asked = await concierge("1k")  # the model reads 1000; the customer never wrote "1000"

    assert bank.BANK.transfers == []
    assert [c.status for c in asked.trace.tool_calls][-1] == "awaiting_confirmation"
    assert "Please confirm — Transfer money to another account" in asked.reply.text
    assert "amount 1000" in asked.reply.text and "account_id 1234567890" in asked.reply.text
    assert [o["id"] for o in asked.reply.data["options"]] == ["confirm", "cancel"]

    done = await concierge("yes")

    assert bank.BANK.transfers == [{"from": "1234567890", "to": "1234324", "amount": "1000.00"}]
    assert "transfer" in done.state.completed_journeys


async def test_the_password_reaches_authenticate_and_no_stored_item_trace_or_later_prompt(
    concierge, llm: RecordingLLM, sessions: InMemorySessionStore
) -> None:
    password = SEED[3]  # "monkey": declared `secret` in agent.yaml
    replies = []
    for i, text in enumerate(SEED):
        if i == 3:
            before = len(llm.prompts)
        replies.append(await concierge(text))
        if i == 3:
            during = llm.prompts[before:]

    assert "logged in" in replies[3].reply.text  # authenticate got the real password
    assert any(password in p for p in during)  # node selection had to read it
    assert password not in during[-1]  # …but the reply prompt of that very turn did not
    assert all(password not in p for p in llm.prompts[before + len(during) :])
    stored = await sessions.load("s")
    traces = [await sessions.trace("s", r.trace.turn_id) for r in replies]
    assert password not in stored.model_dump_json()
    assert password not in json.dumps(traces)
    assert all(password not in (r.reply.text or "") for r in replies)
    typed = next(e for e in stored.events if e.turn_id == replies[3].trace.turn_id)
    assert typed.text == "•••"
