"""Resuming a journey the customer left mid-way (docs/semantics.md, "Resuming a journey").

"I want to transfer money" / "200" / "forget it" / "ok, let's finish that transfer": the fourth
turn offers the run the customer left at the step it was left (LEFT HERE), and a model that
resumes it continues that run — its steps still visited, its values still known — while the
values given before the customer left are shown and confirmed before money moves. A run that
ended (through any END, a fork's included) is never offered again.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.matching.journey_answer import JourneyNodeSelection
from engine.matching.journey_graph import build_node_views, exited_run, resume_run
from engine.model import CollectedField, Guideline, Journey
from engine.projection import journey_condition_guideline_id
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
from tests.engine.test_journey_graph import chat, entry, fork, make_journey, tool

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
    journey, condition = CONFIRMED = confirmed_transfer()
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
    h = tool_harness(llm, send_money, journeys=[CONFIRMED])
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
