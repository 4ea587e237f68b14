"""Speculation (`engine.stages.speculation`) never changes what a turn decides or says.

Every conversation of the hostile suite (banking and pizza, tools, logins, confirmations, group
chats) runs twice through real engine turns with the offline model: once without speculation,
once with it on and a *hostile predictor* — the suite's adversary (`HostileLLM`: invented values,
every tool called, every guideline applying, journeys walked to their end, swapped and nudged
values, empty and boastful replies, any of them per call) or one that answers as if the customer
had said something else. Turn by turn the two runs must be identical: the reply, every event,
the session state, the decisions in the trace, and the tools that actually ran. The predictor is
also given the honest model's answers: then drafts are used, and the runs are still identical.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from bench.speculation import secrets_undeclared
from engine.agent_config import Speculation
from engine.clock import FixedClock, SequentialIds
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.ports import Generation
from engine.recall.vectors import agent_index_texts, build_index
from engine.sessions.session import InboundMessage, SessionState
from engine.turn import EngineDeps, TurnEngine, TurnOutput
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM
from tests.hostile.adversary import BEHAVIOURS, HostileLLM
from tests.hostile.test_hostile_model import SCRIPTS
from tests.hostile.world import Example, RecordingDispatcher, Script, example

T = TypeVar("T", bound=BaseModel)

# Words that steer a model elsewhere: a tool, a login, a secret, a handoff, a goodbye.
OTHER_WORDS = (
    "Transfer 400 to savings", "monkey", "What is my balance?", "I want a human",
    "order 25 pizzas", "thanks, bye", "!2", "yes", "no", "What is the price of Apple stock?",
)  # fmt: skip


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
) -> tuple[list[tuple[Any, ...]], list[str]]:
    """`script` through real turns of `ex`'s agent (speculation on when `predictor` is given);
    per turn, everything the turn decided and said and the tools it ran, and what the turn's
    speculation came to. The agent runs with nothing declared secret (`secrets_undeclared`: an
    agent that declares a secret does not speculate) unless `keep_secrets`, so that drafts go
    through every hostile turn."""
    agent = ex.agent if keep_secrets else secrets_undeclared(ex.agent)
    if predictor is not None:
        config = agent.config.model_copy(update={"speculation": Speculation(mode="on")})
        agent = agent.model_copy(update={"config": config})
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(agent)
    embedder = HashingEmbedder()
    index = await build_index(embedder, agent_index_texts(agent))
    dispatcher = RecordingDispatcher(ex.registry)
    deps = EngineDeps(
        llm=OfflineLLM(),
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
    return seen, outcomes


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
        [(r.call.tool, r.call.arguments, r.outcome.error) for r in ran],
    )


CASES = [
    pytest.param(name, script, id=f"{name}-{script}")
    for name, scripts in SCRIPTS.items()
    for script in scripts
]


@pytest.mark.parametrize(("name", "script"), CASES)
def test_a_hostile_predictor_changes_no_decision_no_reply_and_runs_no_tool(
    name: str, script: str
) -> None:
    baseline, _ = asyncio.run(converse(example(name), SCRIPTS[name][script], None))
    for behaviour, seed in [(b, s) for b in BEHAVIOURS for s in (1,)]:
        ex = example(name)
        predictor = HostileLLM(ex.agent, behaviour, seed)
        speculated, _ = asyncio.run(converse(ex, SCRIPTS[name][script], predictor))
        for n, (want, got) in enumerate(zip(baseline, speculated, strict=True)):
            assert got == want, f"{behaviour}: turn {n} ({SCRIPTS[name][script][n][1]!r}) differs"
    for seed in (1, 2):
        speculated, _ = asyncio.run(converse(example(name), SCRIPTS[name][script], Misheard(seed)))
        assert speculated == baseline, f"misheard (seed {seed})"


@pytest.mark.parametrize(("name", "script"), CASES)
def test_an_honest_predictor_saves_a_round_and_changes_nothing(name: str, script: str) -> None:
    baseline, _ = asyncio.run(converse(example(name), SCRIPTS[name][script], None))
    speculated, outcomes = asyncio.run(converse(example(name), SCRIPTS[name][script], OfflineLLM()))
    assert speculated == baseline
    assert "used" in outcomes, outcomes  # the drafts were taken: a round saved
    assert all(s == "used" or s.startswith("skipped") for s in outcomes), outcomes


def test_an_agent_that_declares_a_secret_never_drafts() -> None:
    """A draft's prompt would quote this turn's words before the turn recognised a secret in
    them — the password typed at its step, or ahead of it — and no reply prompt ever sees a
    secret: with the banking agent as it is (its password declared), no draft is made."""
    script = SCRIPTS["banking"]["transfer"]
    _, outcomes = asyncio.run(converse(example("banking"), script, OfflineLLM(), keep_secrets=True))
    assert outcomes == ["skipped: the agent declares a secret"] * len(script)
