"""Speculation (`engine.stages.speculation`) never changes what a turn decides or says.

Every conversation of the hostile suite (banking and pizza, tools, logins, confirmations, group
chats) runs twice through real engine turns with the offline model: once without speculation,
once with it on and a *hostile predictor* — the suite's adversary (`HostileLLM`: invented values,
every tool called, every guideline applying, journeys walked to their end, swapped and nudged
values, empty and boastful replies, any of them per call) or one that answers as if the customer
had said something else. Turn by turn the two runs must be identical: the reply, every event,
the session state, the decisions in the trace, and the writes that actually ran. The predictor
is also given the honest model's answers: then drafts are used, and the runs are still identical.

The suite's lookups are declared `speculative` (`READS`), so a predicted lookup runs ahead for
real (`engine.stages.tools_ahead`) — with the adversary's arguments, or extra ones. Per turn, the
backend's runs are checked apart (`check_reads`): nothing but a lookup ever ran ahead, and a
lookup the turn needed succeeded at most once more than without speculation only when it had
not run (a reused outcome is never run twice). The model answers round 1 after the event loop
has turned a while (`Slow`), as a real model's ~400 ms, so the copy gets ahead and runs things.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from bench.speculation import reference, secrets_undeclared
from engine.agent_config import Speculation
from engine.clock import FixedClock, SequentialIds
from engine.matching.guidelines import GuidelineMatchBatch
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.model import AgentSnapshot
from engine.ports import Generation
from engine.recall.vectors import agent_index_texts, build_index
from engine.sessions.session import InboundMessage, SessionState
from engine.turn import EngineDeps, TurnEngine, TurnOutput
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM
from tests.hostile.adversary import BEHAVIOURS, HostileLLM
from tests.hostile.test_hostile_model import SCRIPTS
from tests.hostile.world import Example, Ran, RecordingDispatcher, Script, example

T = TypeVar("T", bound=BaseModel)

# Words that steer a model elsewhere: a tool, a login, a secret, a handoff, a goodbye.
OTHER_WORDS = (
    "Transfer 400 to savings", "monkey", "What is my balance?", "I want a human",
    "order 25 pizzas", "thanks, bye", "!2", "yes", "no", "What is the price of Apple stock?",
)  # fmt: skip


# The suite's tools that only read (a stock, an account id, a balance, funds, an order's
# status): declared speculative here. A login, a transfer and an order never are.
READS = frozenset(
    {
        "lookup_stock_symbol",
        "lookup_stock_price",
        "lookup_account_id",
        "get_account_balance",
        "check_funds",
        "lookup_order_status",
    }
)


def with_speculative_reads(agent: AgentSnapshot) -> AgentSnapshot:
    data = agent.model_dump()
    for tool in data["tools"]:
        tool["speculative"] = tool["name"] in READS
    return AgentSnapshot.model_validate(data).with_content_version()


class Slow:
    """The model, answering round 1 (matching) after the event loop ran `ticks` times: a real
    model takes ~400 ms where the predictor answers at once (no clock involved)."""

    def __init__(self, model: Any, ticks: int = 40) -> None:
        self.model = model
        self.ticks = ticks

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        if schema is GuidelineMatchBatch:
            for _ in range(self.ticks):
                await asyncio.sleep(0)
        return await self.model.generate(prompt, schema, model=model)


class Misheard:
    """A predictor that answers as the honest model would if the customer had said something
    else this turn (another of `OTHER_WORDS`, drawn per call)."""

    def __init__(self, seed: int) -> None:
        self.honest = OfflineLLM()
        self.random = random.Random(seed)
        self.turn_text = ""

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        said = self.turn_text
        if said and said in prompt:
            prompt = prompt.replace(said, self.random.choice(OTHER_WORDS))
        return await self.honest.generate(prompt, schema, model=model)


async def converse(
    ex: Example, script: Script, predictor: Any, *, keep_secrets: bool = False
) -> tuple[list[tuple[Any, ...]], list[str], list[list[Ran]]]:
    """`script` through real turns of `ex`'s agent (speculation on when `predictor` is given);
    per turn, everything the turn decided and said and the writes it ran, what the turn's
    speculation came to, and every call the backend ran. The agent runs with its lookups
    speculative (`READS`) and nothing declared secret (`secrets_undeclared`: an agent that
    declares a secret does not speculate) unless `keep_secrets`, so that drafts and lookups run
    ahead go through every hostile turn."""
    agent = ex.agent if keep_secrets else with_speculative_reads(secrets_undeclared(ex.agent))
    if predictor is not None:
        config = agent.config.model_copy(update={"speculation": Speculation(mode="on")})
        agent = agent.model_copy(update={"config": config})
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(agent)
    embedder = HashingEmbedder()
    index = await build_index(embedder, agent_index_texts(agent))
    dispatcher = RecordingDispatcher(ex.registry)
    deps = EngineDeps(
        llm=OfflineLLM() if predictor is None else Slow(OfflineLLM()),
        embedder=embedder,
        tools=dispatcher,
        clock=FixedClock(),
        ids=SequentialIds(),
        predictor=predictor,
    )

    async def index_for(_agent: Any) -> Any:
        return index

    engine = TurnEngine(agents, sessions, deps, index_for=index_for)
    await sessions.create(SessionState(id="s", agent_id=agent.id, customer_id="chat"))
    seen: list[tuple[Any, ...]] = []
    outcomes: list[str] = []
    runs: list[list[Ran]] = []
    for n, (sender, said) in enumerate(script):
        if hasattr(predictor, "turn_text"):
            predictor.turn_text = said
        choice, text = (said[1:], "") if said.startswith("!") else (None, said)
        message = InboundMessage(
            event_id=f"m{n}", text=text, choice=choice, metadata={"customer_id": sender}
        )
        ran = len(dispatcher.ran)
        output = await engine.handle("s", [message])
        seen.append(_decided(output, dispatcher.ran[ran:]))
        outcomes.append(output.trace.speculation)
        runs.append(dispatcher.ran[ran:])
    return seen, outcomes, runs


def _decided(output: TurnOutput, ran: Sequence[Any]) -> tuple[Any, ...]:
    trace = output.trace
    return (
        output.reply.model_dump() if output.reply else None,
        [e.model_dump() for e in output.new_events],
        output.state.model_dump(exclude={"version"}),
        trace.matched_guideline_ids,
        trace.applied_guideline_ids,
        [j.model_dump() for j in trace.journeys],
        [(c.tool, c.status, c.arguments) for c in trace.tool_calls],
        trace.collected,
        trace.notes,
        # the writes the backend ran (a lookup may run ahead: `check_reads`)
        [(r.call.tool, r.call.arguments, r.outcome.error) for r in ran if r.call.tool not in READS],
    )


def check_reads(baseline: Sequence[Sequence[Ran]], speculated: Sequence[Sequence[Ran]]) -> int:
    """Per turn: only lookups ran ahead; every lookup the turn ran without speculation ran with
    it too; and a lookup that succeeded ran successfully no more often than without
    speculation, or once when it had not run then (a prediction's arguments): an outcome run
    ahead and taken is never run a second time. Returns how many calls ran ahead."""
    ahead = 0
    for n, (want, got) in enumerate(zip(baseline, speculated, strict=True)):
        early = [r for r in got if ":ahead:" in r.call.id]
        assert all(r.call.tool in READS for r in early), f"turn {n}: a write ran ahead"
        ahead += len(early)

        def calls(runs: Sequence[Ran], ok: bool = False) -> Counter[str]:
            return Counter(
                f"{r.call.tool} {sorted(r.call.arguments.items())!r}"
                for r in runs
                if r.call.tool in READS and (r.outcome.error is None or not ok)
            )

        missing = calls(want) - calls(got)
        assert not missing, f"turn {n}: lookups the turn needed did not run: {missing}"
        for call, count in calls(got, ok=True).items():
            assert count <= max(calls(want, ok=True)[call], 1), f"turn {n}: {call} ran twice"
    return ahead


CASES = [
    pytest.param(name, script, id=f"{name}-{script}")
    for name, scripts in SCRIPTS.items()
    for script in scripts
]


@pytest.mark.parametrize(("name", "script"), CASES)
def test_a_hostile_predictor_changes_no_decision_no_reply_and_runs_no_write(
    name: str, script: str
) -> None:
    baseline, _, runs = asyncio.run(converse(example(name), SCRIPTS[name][script], None))
    ahead = 0
    for behaviour, seed in [(b, s) for b in BEHAVIOURS for s in (1,)]:
        ex = example(name)
        predictor = HostileLLM(ex.agent, behaviour, seed)
        speculated, _, ran = asyncio.run(converse(ex, SCRIPTS[name][script], predictor))
        for n, (want, got) in enumerate(zip(baseline, speculated, strict=True)):
            assert got == want, f"{behaviour}: turn {n} ({SCRIPTS[name][script][n][1]!r}) differs"
        ahead += check_reads(runs, ran)
    for seed in (1, 2):
        misheard = Misheard(seed)
        speculated, _, ran = asyncio.run(converse(example(name), SCRIPTS[name][script], misheard))
        assert speculated == baseline, f"misheard (seed {seed})"
        ahead += check_reads(runs, ran)
    if any(r.call.tool in READS for turn in runs for r in turn):
        assert ahead, "the conversation looks something up: the adversary's lookups ran ahead"


@pytest.mark.parametrize(("name", "script"), CASES)
def test_an_honest_predictor_saves_a_round_and_changes_nothing(name: str, script: str) -> None:
    baseline, _, runs = asyncio.run(converse(example(name), SCRIPTS[name][script], None))
    speculated, outcomes, ran = asyncio.run(
        converse(example(name), SCRIPTS[name][script], OfflineLLM())
    )
    assert speculated == baseline
    assert "used" in outcomes, outcomes  # the drafts were taken: a round saved
    assert all(s == "used" or s.startswith("skipped") for s in outcomes), outcomes
    check_reads(runs, ran)
    # each lookup that answered ran ahead and was taken, or ran in its turn: as often as
    # without speculation (one that failed ahead is run again by the turn: not compared)
    assert [_answered_reads(turn) for turn in ran] == [_answered_reads(turn) for turn in runs]


def _answered_reads(runs: Sequence[Ran]) -> list[tuple[str, str]]:
    return sorted(
        (r.call.tool, repr(r.call.arguments))
        for r in runs
        if r.call.tool in READS and r.outcome.error is None
    )


def test_an_agent_that_declares_a_secret_never_drafts() -> None:
    """A draft's prompt would quote this turn's words before the turn recognised a secret in
    them — the password typed at its step, or ahead of it — and no reply prompt ever sees a
    secret: with the banking agent as it is (its password declared), no draft is made."""
    script = SCRIPTS["banking"]["transfer"]
    _, outcomes, _ = asyncio.run(
        converse(example("banking"), script, OfflineLLM(), keep_secrets=True)
    )
    assert outcomes == ["skipped: the agent declares a secret"] * len(script)


def test_the_reference_scenario_looks_the_order_up_ahead_and_replies_in_one_round() -> None:
    """`python -m bench speculation`'s reference scenario: the turn that asks for the shipment
    status runs the speculative `lookup_order` ahead and takes its draft (one round, two
    without speculation); the turn that would register the return (`submit_return`, a write)
    runs nothing ahead."""
    result = asyncio.run(reference())
    looks_up, returns = 2, 3  # "… what is the shipment status of ORD-5521?", "It arrived damaged."
    assert (result.off[looks_up].rounds, result.on[looks_up].rounds) == (2, 1)
    assert result.on[looks_up].speculation == "used"
    assert result.on[looks_up].ahead == ("lookup_order used",)
    assert result.on[returns].speculation == (
        "skipped: a call to submit_return (not speculative) is predicted"
    )
    assert all("submit_return" not in a for turn in result.on for a in turn.ahead)
