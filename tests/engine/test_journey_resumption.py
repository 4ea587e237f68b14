"""Resuming a journey the customer left mid-way (docs/semantics.md, "Resuming a journey").

"I want to transfer money" / "200" / "forget it" / "ok, let's finish that transfer": the fourth
turn offers the run the customer left at the step it was left (LEFT HERE), and a model that
resumes it continues that run — its steps still visited, its values still known — while the
values given before the customer left are shown and confirmed before money moves. A run that
ended (through any END, a fork's included) is never offered again.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.compose import ComposedReply
from engine.context import TurnContext
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.matching.journey_graph import (
    NodeView,
    Path,
    build_node_views,
    compact_path,
    current_run,
    exited_run,
    resume_run,
)
from engine.matching.journey_prompt import build_node_selection_prompt
from engine.matching.journeys import select_journey_step
from engine.matching.projection import journey_condition_guideline_id
from engine.model import AgentSnapshot, CollectedField, Guideline, Journey, NodeKind
from engine.sessions.session import CollectedValue, Event, EventKind, EventSource, SessionState
from engine.testing import ScriptedLLM
from engine.toolkit import ToolResult
from engine.toolkit import tool as as_tool
from tests.engine.pipeline_kit import (
    Harness,
    chain_journey,
    compose_echo,
    last_customer_message,
    match_when,
    step_number,
    tool_harness,
)
from tests.engine.test_journey_graph import (
    chat,
    entry,
    fork,
    journeys_and_answers,
    make_journey,
    tool,
)
from tests.engine.test_journey_selection import turn_llm

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SENT: list[dict[str, Any]] = []
ACCOUNT_ID = r"\d{7,10}"


@as_tool(
    description="Send money to an account",
    consequential=True,
    patterns={"to_account_id": ACCOUNT_ID},
)
def send_money(to_account_id: str, amount: Decimal) -> ToolResult:
    SENT.append({"to": to_account_id, "amount": Decimal(str(amount))})
    return ToolResult(data={"sent": f"{amount}"})


def transfer() -> tuple[Journey, Guideline]:
    """How much, where to, then `send_money`."""
    steps = [
        ("ask_amount", "Ask how much to transfer",
         {"collects": (CollectedField(name="amount", type="decimal", gt=0),)}),
        ("ask_destination", "Ask for the account ID to transfer to",
         {"collects": (CollectedField(name="to_account_id", pattern=ACCOUNT_ID),)}),
        ("send", "tool:send_money", {"action": "Say the transfer is done"}),
    ]  # fmt: skip
    return chain_journey(
        "transfer", "Money transfer", "The customer wants to transfer money", steps
    )


TRANSFER = transfer()
STEP = {n: step_number(TRANSFER[0], n) for n in ("ask_amount", "ask_destination", "send")}
LEFT_AT = re.compile(r"backtracking_target_step=(\d+)")


def walk(
    *steps: str, collected: dict[str, str] | None = None, back: str | None = None
) -> dict[str, Any]:
    return {
        "journey_applies": True,
        "requires_backtracking": back is not None,
        "backtracking_target_step": back,
        "step_advancement": list(steps),
        "next_step": steps[-1],
        "collected": [{"name": k, "value": v} for k, v in (collected or {}).items()],
    }


class Customer:
    """A model that reads the node-selection prompt like a careful one: it resumes a run the
    customer left when they say to finish it (`resume=True`), else starts afresh."""

    def __init__(self, *, resume: bool = True) -> None:
        self.resume = resume
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> dict[str, Any]:
        self.prompts.append(prompt)
        message = last_customer_message(prompt).lower()
        amount, destination = STEP["ask_amount"], STEP["ask_destination"]
        left = LEFT_AT.search(prompt)
        if "forget it" in message:
            return {"journey_applies": False, "next_step": None}
        if left and self.resume:
            return walk(left.group(1), back=left.group(1))
        if message == "200":
            return walk(amount, destination, collected={"amount": "200"})
        if re.fullmatch(r"\d{7}", message):
            return walk(destination, STEP["send"], collected={"to_account_id": message})
        return walk(amount)


def harness(model: Customer) -> Harness:
    SENT.clear()
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"transfer money": lambda m: "forget" not in m}))
    llm.on(JourneyNodeSelection, model)
    llm.on(ComposedReply, compose_echo)
    return tool_harness(llm, send_money, journeys=[TRANSFER])


async def left_after_200(model: Customer) -> Harness:
    h = harness(model)
    await h.start()
    for text in ("I want to transfer money", "200", "forget it"):
        await h.say(text)
    return h


# -- bug 1: a run left mid-way is offered where it was left, and resumes there -------------------


async def test_a_journey_left_mid_way_is_offered_at_the_step_it_was_left() -> None:
    model = Customer()
    h = await left_after_200(model)

    await h.say("ok, let's finish that transfer")

    prompt = model.prompts[-1]
    assert "nothing to backtrack to" not in prompt
    assert f"an earlier run was exited at step {STEP['ask_destination']} (LEFT HERE)" in prompt
    destination = prompt[prompt.index(f"STEP {STEP['ask_destination']}:") :]
    assert destination.splitlines()[1].startswith("  - LEFT HERE")


async def test_resuming_continues_the_run_where_it_was_left() -> None:
    h = await left_after_200(Customer())

    out = await h.say("ok, let's finish that transfer")

    assert "Ask for the account ID" in out.reply.text
    assert "Ask how much" not in out.reply.text
    assert out.state.journey_paths["transfer"] == ("ask_amount", "ask_destination")
    assert out.state.collected_values("transfer") == {"amount": Decimal("200")}
    (move,) = out.trace.journeys
    assert move.how == "resumed" and move.node_id == "ask_destination"


async def test_a_value_given_before_the_customer_left_is_confirmed_before_money_moves() -> None:
    h = await left_after_200(Customer())
    await h.say("ok, let's finish that transfer")

    asked = await h.say("7770001")

    assert SENT == []
    assert asked.trace.tool_calls[-1].status == "awaiting_confirmation"
    assert "200" in asked.reply.text and "7770001" in asked.reply.text

    await h.say("yes")

    assert [{"to": "7770001", "amount": Decimal("200")}] == SENT


async def test_a_run_left_and_resumed_twice_keeps_its_values_and_says_so_once() -> None:
    h = await left_after_200(Customer())
    await h.say("ok, let's finish that transfer")
    await h.say("forget it")

    out = await h.say("ok, let's finish that transfer")

    assert "Ask for the account ID" in out.reply.text
    (amount,) = [c for c in out.state.collected if c.name == "amount"]
    assert amount.value == Decimal("200") and amount.bound is False
    assert amount.evidence.count("given before the customer left this run") == 1


async def test_starting_afresh_after_leaving_collects_every_value_again() -> None:
    h = await left_after_200(Customer(resume=False))

    out = await h.say("I want to transfer money")

    assert "Ask how much" in out.reply.text
    assert out.state.journey_paths["transfer"] == ("ask_amount",)
    assert out.state.collected_values("transfer") == {}


async def test_a_model_resuming_a_new_request_never_moves_money_on_the_left_runs_values() -> None:
    # The customer asks for a new transfer and names only the destination; the model resumes
    # the left run anyway and walks on to the transfer. The amount it would use was given
    # before the customer left: it is shown and confirmed, never sent silently.
    class Resuming(Customer):
        def __call__(self, prompt: str) -> dict[str, Any]:
            left = LEFT_AT.search(prompt)
            if left and "7770001" in last_customer_message(prompt):
                return walk(
                    left.group(1), STEP["send"], back=left.group(1),
                    collected={"to_account_id": "7770001"},
                )  # fmt: skip
            return super().__call__(prompt)

    h = await left_after_200(Resuming())

    out = await h.say("I want to transfer money to 7770001")

    assert SENT == []
    assert out.trace.tool_calls[-1].status == "awaiting_confirmation"


# -- bug 2: a run completed through a fork's END branch is not a run left mid-way ----------------


def confirmed_transfer() -> tuple[Journey, Guideline]:
    """How much, where to, a confirmation, then a fork: sent when confirmed, ended when not."""
    journey = make_journey(
        entry(),
        chat("ask_amount", "Ask how much to transfer",
             collects=[CollectedField(name="amount", type="decimal", gt=0)]),
        chat("ask_destination", "Ask for the account ID to transfer to",
             collects=[CollectedField(name="to_account_id", pattern=ACCOUNT_ID)]),
        chat("confirm", "Read the transfer back and ask to confirm",
             customer="confirmed or declined", collects=[CollectedField(name="ok", type="bool")]),
        fork("decided"),
        tool("send", "send_money", action="Say the transfer is done"),
        edges=["root -> ask_amount", "ask_amount -> ask_destination",
               "ask_destination -> confirm", "confirm -> decided",
               "decided -> send: the customer confirmed", "decided -> END: the customer declined",
               "send -> END"],
        jid="transfer", title="Money transfer", conditions=["The customer wants to transfer money"],
    )  # fmt: skip
    condition = Guideline(
        id=journey_condition_guideline_id("transfer", 0),
        condition="The customer wants to transfer money",
        metadata={"journey_condition": "transfer"},
    )
    return journey.model_copy(update={"condition_guideline_ids": (condition.id,)}), condition


def test_a_run_completed_through_a_forks_end_branch_is_not_offered_for_resumption() -> None:
    journey = confirmed_transfer()[0]
    views = build_node_views(journey)
    declined = ("ask_amount", "ask_destination", "confirm", "decided", None)
    assert exited_run(declined, views) == ()
    assert resume_run(declined, views) == declined
    # left at the confirmation (the customer said "forget it" there): resumable
    left = ("ask_amount", "ask_destination", "confirm", None)
    assert exited_run(left, views) == ("ask_amount", "ask_destination", "confirm")


async def test_a_transfer_declined_through_the_fork_is_never_resumed() -> None:
    confirmed = confirmed_transfer()
    journey = confirmed[0]
    number = {n: step_number(journey, n) for n in ("ask_amount", "ask_destination", "confirm")}
    decided = step_number(journey, "decided")
    prompts: list[str] = []

    def model(prompt: str) -> dict[str, Any]:
        prompts.append(prompt)
        message = last_customer_message(prompt).lower()
        if message == "200":
            return walk(
                number["ask_amount"], number["ask_destination"], collected={"amount": "200"}
            )
        if message == "7770001":
            return walk(number["ask_destination"], number["confirm"],
                        collected={"to_account_id": "7770001"})  # fmt: skip
        if message.startswith("no"):
            declined = walk(number["confirm"], decided, collected={"ok": "no"})
            return {**declined, "step_advancement": [number["confirm"], decided, "NONE"],
                    "next_step": "NONE"}  # fmt: skip
        if len(prompts) > 4:  # a model that resumes whatever it is shown: at the confirmation
            return walk(number["confirm"], back=number["confirm"])
        return walk(number["ask_amount"])

    SENT.clear()
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"transfer money": True}))
    llm.on(JourneyNodeSelection, model)
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, send_money, journeys=[confirmed])
    await h.start()
    for text in ("I want to transfer money", "200", "7770001", "no, cancel it"):
        done = await h.say(text)
    assert done.state.journey_paths["transfer"][-2:] == ("decided", None)
    assert "transfer" in done.state.completed_journeys

    again = await h.say("I want to transfer money")

    assert "  - LEFT HERE" not in prompts[-1] and "an earlier run was exited" not in prompts[-1]
    assert again.state.journey_paths["transfer"] == ("ask_amount",)
    assert again.state.collected_values("transfer") == {}
    assert any("no live run" in r for move in again.trace.journeys for r in move.repairs)
    assert SENT == []


# -- properties over random journey graphs -------------------------------------------------------

PROPERTIES = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def graphs_with_fields(draw: st.DrawFn) -> Journey:
    """A random journey graph (forks, tool steps, END edges, cycles) whose chat steps collect a
    field each."""
    journey = draw(journeys_and_answers())[0]
    return journey.model_copy(
        update={
            "nodes": tuple(
                n.model_copy(update={"collects": (CollectedField(name=f"f_{n.id}"),)})
                if n.kind is NodeKind.CHAT and n.action is not None
                else n
                for n in journey.nodes
            )
        }
    )


@st.composite
def walk_from_root(
    draw: st.DrawFn, views: dict[str, NodeView], root: str, *, ending: bool
) -> list[str] | None:
    """A run as a path records it (no action-less root; forks inside it). With `ending`, the
    run ends through an END — at a step or a fork's END branch — and the list is what it
    entered before the `None`; None when the drawn walk never reached a way to end."""
    walk = [root]
    for _ in range(draw(st.integers(min_value=0, max_value=10))):
        here = views[walk[-1]]
        if ending and here.can_end and draw(st.booleans()):
            break
        if not here.successors:
            break
        walk.append(draw(st.sampled_from(here.successors)))
    recorded = walk[1:] if views[root].transit else walk
    if ending:
        performed = any(not views[n].transit for n in recorded)
        return recorded if recorded and views[recorded[-1]].can_end and performed else None
    return recorded


def _context(journey: Journey, path: Path, run: Sequence[str]) -> TurnContext:
    """A session whose journey stands at `path`, holding a value for every field of the run's
    steps, and the customer's latest message."""
    agent = AgentSnapshot(id="a", name="Agent", journeys=(journey,))
    views = build_node_views(journey)
    collected = tuple(
        CollectedValue(journey_id=journey.id, node_id=n, name=f.name, value=f"v_{n}",
                       turn_id="t0", bound=True)
        for n in dict.fromkeys(run) for f in views[n].collects
    )  # fmt: skip
    session = SessionState(
        id="s", agent_id="a", customer_id="c", journey_paths={journey.id: path},
        collected=collected, version=3,
    )  # fmt: skip
    said = Event(id="e9", offset=9, kind=EventKind.MESSAGE, source=EventSource.CUSTOMER,
                 created_at=T0, text="let's carry on with that")  # fmt: skip
    return TurnContext(agent, session, [said])


def _left_here_flags(prompt: str) -> list[str]:
    """The display numbers of the steps the map flags LEFT HERE."""
    flagged, step = [], None
    for line in prompt.splitlines():
        if line.startswith("STEP "):
            step = line[5:].split(":")[0]
        elif line.startswith("  - LEFT HERE") and step is not None:
            flagged.append(step)
    return flagged


def _resume_as_told(prompt: str) -> dict[str, Any]:
    """A model that resumes where the prompt says the run was left."""
    left = LEFT_AT.search(prompt)
    return walk(left.group(1), back=left.group(1)) if left else walk("1")


@PROPERTIES
@given(graphs_with_fields(), st.data())
def test_a_run_left_at_any_step_resumes_there(journey: Journey, data: st.DataObject) -> None:
    """Left at any step from which the journey cannot end (such a step cannot be told from a
    completion): the map flags that step LEFT HERE, and a model resuming as the prompt says
    stands at that step again, in the run it left, with that run's values."""
    views = build_node_views(journey)
    earlier = data.draw(walk_from_root(views, journey.root_id, ending=False))
    run = data.draw(walk_from_root(views, journey.root_id, ending=False)) or []
    prefix: list[str | None] = [*(earlier or []), None] if data.draw(st.booleans()) else []
    for cut in range(len(run)):
        left_at = run[cut]
        if views[left_at].transit or views[left_at].can_end:
            continue
        stored = compact_path((*prefix, *run[: cut + 1], None))
        left_run = current_run(stored[:-1])
        assert exited_run(stored, views)[-1] == left_at
        ctx = _context(journey, stored, left_run)
        prompt = build_node_selection_prompt(
            ctx, journey, views, stored, collected=ctx.session.collected_values(journey.id),
            max_depth=4, explain=False,
        )  # fmt: skip
        assert _left_here_flags(prompt) == [str(views[left_at].index)]

        result = asyncio.run(
            select_journey_step(
                turn_llm(ScriptedLLM().on(JourneyNodeSelection, _resume_as_told)),
                ctx, journey, stored, executed_tools=set(), max_depth=4,
            )
        )  # fmt: skip

        step = result.step
        assert step.resumed and step.outcome == "stay" and step.node_id == left_at
        assert step.path[: len(stored)] == stored  # the path only grows
        assert current_run(step.path) == left_run  # the run left is the current run again
        assert compact_path(step.path) == compact_path(stored[:-1])


@settings(PROPERTIES, max_examples=400)
@given(graphs_with_fields(), st.data())
def test_a_completed_run_never_resumes(journey: Journey, data: st.DataObject) -> None:
    """A run that ended — at a step, after a tool step, or through a fork's END branch — is
    never offered, and a model that tries to resume it at any of its steps starts a fresh run
    that holds none of its values."""
    views = build_node_views(journey)
    completed = data.draw(walk_from_root(views, journey.root_id, ending=True))
    if completed is None:
        return
    stored = compact_path((*completed, None))
    assert exited_run(stored, views) == () and resume_run(stored, views) == stored
    ctx = _context(journey, stored, completed)
    prompt = build_node_selection_prompt(
        ctx, journey, views, stored, collected=ctx.session.collected_values(journey.id),
        max_depth=4, explain=False,
    )  # fmt: skip
    assert _left_here_flags(prompt) == [] and "an earlier run was exited" not in prompt

    for target in dict.fromkeys(n for n in completed if not views[n].transit):
        number = str(views[target].index)
        result = asyncio.run(
            select_journey_step(
                turn_llm(ScriptedLLM().on(JourneyNodeSelection, walk(number, back=number))),
                ctx, journey, stored, executed_tools=set(), max_depth=4,
            )
        )  # fmt: skip
        step = result.step
        assert not step.resumed
        assert step.path[: len(stored)] == stored
        fresh = tuple(n for n in step.path[len(stored) :] if n is not None)
        assert set(current_run(step.path)) <= set(fresh)  # nothing of the ended run carries over
        assert not result.collected  # no value of the ended run is taken as this run's
