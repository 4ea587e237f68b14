"""The conversations the benchmarks replay, and how to replay them on a `TurnRunner`.

Each workload is an agent plus a way to open sessions and the customer messages to send:
- the banking concierge (examples/banking) walking stock price → transfer (which runs the
  authentication and balance journeys first, as prerequisites) in ten turns;
- a synthetic scale agent: conversations of four turns (see `bench.scale_agents`);
- a reference scenario: one prepared session, one measured turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.harness import TurnRunner, TurnSample
from bench.scale_agents import ScaleAgent, scale_conversation
from bench.synthetic_tools import SyntheticTools
from bench.worked_example import reference_session
from engine.model import AgentSnapshot
from engine.ports import ToolDispatcher
from engine.sessions.session import SessionState

BANKING_CONVERSATION = (
    "Hello!",
    "What is the price of Apple stock?",
    "Apple",
    "I want to transfer money",
    "My username is seldo",
    "monkey",
    "Checking",
    "1234324",
    "100",
    "Thanks, that's all",
)


BANKING_LABEL = "banking concierge"
REFERENCE_LABEL = "reference: "  # + the variant


@dataclass(frozen=True)
class Workload:
    """An agent, its tools, and how to produce conversation number n: (opening state, messages).
    `kind` is "banking", "synthetic" or "reference" (one prepared session, one measured turn)."""

    label: str
    kind: str
    snapshot: AgentSnapshot
    tools: ToolDispatcher
    conversation: Callable[[int, str], tuple[SessionState, Sequence[str]]]
    reset: Callable[[], None] = lambda: None  # e.g. a fresh bank between passes


def banking_workload() -> Workload:
    from engine.toolkit import InProcessDispatcher
    from examples import banking
    from examples.banking import bank
    from examples.banking.tools import registry

    snapshot = banking.load()

    def conversation(n: int, session_id: str) -> tuple[SessionState, Sequence[str]]:
        state = SessionState(id=session_id, agent_id=snapshot.id, customer_id=f"customer-{n}")
        return state, BANKING_CONVERSATION

    def reset() -> None:
        bank.BANK = bank.Bank()

    tools = InProcessDispatcher(registry)
    return Workload(BANKING_LABEL, "banking", snapshot, tools, conversation, reset)


def scale_workload(agent: ScaleAgent) -> Workload:
    def conversation(n: int, session_id: str) -> tuple[SessionState, Sequence[str]]:
        state = SessionState(id=session_id, agent_id=agent.snapshot.id, customer_id=f"c-{n}")
        return state, scale_conversation(agent, n)

    return Workload(agent.shape.label, "synthetic", agent.snapshot, SyntheticTools(), conversation)


def reference_workload(variant: str) -> Workload:
    snapshot = reference_session(variant, "probe").snapshot

    def conversation(n: int, session_id: str) -> tuple[SessionState, Sequence[str]]:
        scenario = reference_session(variant, session_id)
        return scenario.session, (scenario.message,)

    return Workload(
        f"{REFERENCE_LABEL}{variant}", "reference", snapshot, SyntheticTools(), conversation
    )


async def replay(
    runner: TurnRunner,
    workload: Workload,
    conversations: int,
    *,
    session_prefix: str,
    first: int = 0,
    on_turn: Callable[[TurnSample], None] | None = None,
) -> list[TurnSample]:
    """Run `conversations` conversations of `workload` (numbers first, first+1, …), each in a
    fresh session; the runner must already have the agent published."""
    samples: list[TurnSample] = []
    for n in range(first, first + conversations):
        workload.reset()
        session_id = f"{session_prefix}-{n}"
        state, messages = workload.conversation(n, session_id)
        await runner.open_session(state)
        for t, text in enumerate(messages):
            sample = await runner.turn(
                session_id, text, agent=workload.label, conversation=n, turn=t
            )
            samples.append(sample)
            if on_turn is not None:
                on_turn(sample)
    return samples
