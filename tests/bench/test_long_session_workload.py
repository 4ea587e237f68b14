"""The long-session benchmark's customer is one a real bank could have: every question the agent
asks gets its answer, every visit's transfer completes, and nothing is left pending — so the
turns it measures at 10, 100 and 1,000 are turns of a conversation, not of a stuck session."""

from __future__ import annotations

import asyncio

import pytest

from bench.fake_llm import BenchLLM, LatencyModel
from bench.harness import TurnRunner
from bench.long_session import CHECKPOINTS, LONG_SESSION_VISIT, long_session_message
from bench.ports import in_memory_ports
from bench.scenarios import BANKING_CONVERSATION, banking_workload
from bench.tokens import EstimateCounter
from engine.sessions.session import SessionState
from infra.embeddings import HashingEmbedder

pytestmark = pytest.mark.timeout(600)  # headroom for a loaded 2-core machine

VISITS = 2


def test_every_checkpoint_sends_the_goodbye_after_a_transfer() -> None:
    assert long_session_message(1) == BANKING_CONVERSATION[0]
    assert long_session_message(11) == LONG_SESSION_VISIT[0]
    said = {long_session_message(turn) for turn in CHECKPOINTS}
    assert said == {"Thanks, that's all"}
    before = {long_session_message(turn - 1) for turn in CHECKPOINTS}
    assert before == {"100", "yes"}  # the message that completed the transfer


async def _run_visits() -> tuple[list[tuple[str, str]], list[SessionState], list[dict[str, str]]]:
    from examples.banking import bank

    workload = banking_workload()
    embedder = HashingEmbedder()
    runner = TurnRunner(
        in_memory_ports(embedder),
        BenchLLM(LatencyModel(0.0), EstimateCounter()),
        tools=workload.tools,
        embedder=embedder,
    )
    await runner.publish(workload.snapshot)
    workload.reset()
    state, _ = workload.conversation(0, "long")
    await runner.open_session(state)
    exchanges: list[tuple[str, str]] = []
    after_goodbye: list[SessionState] = []
    for turn in range(1, len(BANKING_CONVERSATION) + VISITS * len(LONG_SESSION_VISIT) + 1):
        text = long_session_message(turn)
        await runner.turn("long", text, agent=workload.label, turn=turn)
        output = runner.last_output
        assert output is not None and output.reply is not None, f"turn {turn} got no reply"
        exchanges.append((text, output.reply.text or ""))
        if text == "Thanks, that's all":
            after_goodbye.append(output.state)
    return exchanges, after_goodbye, list(bank.BANK.transfers)


def test_each_visit_completes_its_transfer_and_leaves_nothing_pending() -> None:
    exchanges, after_goodbye, transfers = asyncio.run(_run_visits())
    assert [t["amount"] for t in transfers] == ["100.00"] + ["5.00"] * VISITS
    assert all(t["to"] == "1234324" for t in transfers)
    for state in after_goodbye:  # the end of the first conversation and of every visit
        assert state.pending_confirmation is None
        assert state.active_journey_ids == []
    visit_replies = [reply for _, reply in exchanges[len(BANKING_CONVERSATION) :]]
    # one confirmation per visit: the transfer, its account looked up for the balance request
    assert sum("Please confirm" in reply for reply in visit_replies) == VISITS
    assert not any("username" in reply.lower() for reply in visit_replies)  # logged in already
    # The visits are the same conversation each time: what a turn reads at turn 100 is what it
    # reads at turn 1,000, and the same replies come back visit after visit.
    first, second = (
        visit_replies[i * len(LONG_SESSION_VISIT) : (i + 1) * len(LONG_SESSION_VISIT)]
        for i in range(VISITS)
    )
    differs = [i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b]
    assert differs == [LONG_SESSION_VISIT.index("yes")]  # only the new balance after the transfer
