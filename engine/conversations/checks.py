"""Checking one turn of a conversation test against what the engine did.

Every check is deterministic and reads only the turn's output (reply, trace, new session state),
except `judged`, which asks a model whether the reply meets a natural-language expectation: its
prompt builder is a pure function and its answer has a schema, like every LLM call here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from engine.conversations.spec import Expectation, ToolCallExpectation
from engine.ports import SchematicLLM
from engine.prompt_text import Prompt
from engine.sessions.session import Event, EventKind, EventSource
from engine.trace import ToolCallRecord
from engine.turn import TurnOutput
from engine.values.grounding import same_value as same_typed
from engine.values.money import parse_money_text

# A call the gate let through to the dispatcher; "awaiting_confirmation" and the like were not run.
DISPATCHED = frozenset({"ok", "error", "interrupted"})


@dataclass(frozen=True)
class Unmet:
    """One expectation that did not hold: what was expected and what the turn showed instead."""

    expected: str
    saw: str


def reply_text(output: TurnOutput) -> str:
    """The reply's text ("" when the turn produced no reply)."""
    return (output.reply.text or "") if output.reply is not None else ""


def check_turn(expect: Expectation, output: TurnOutput) -> list[Unmet]:
    """Every deterministic expectation of `expect` that `output` does not meet, in field order.
    `judged` is not checked here (it needs a model): see `judge_reply`."""
    text = reply_text(output)
    unmet: list[Unmet] = []
    shown = f"reply {text!r}"
    for wanted in expect.reply_contains:
        if wanted.lower() not in text.lower():
            unmet.append(Unmet(f"reply contains {wanted!r}", shown))
    for unwanted in expect.reply_not_contains:
        if unwanted.lower() in text.lower():
            unmet.append(Unmet(f"reply does not contain {unwanted!r}", shown))
    if expect.reply_matches is not None and not re.search(expect.reply_matches, text):
        unmet.append(Unmet(f"reply matches /{expect.reply_matches}/", shown))
    unmet.extend(_guidelines(expect, output))
    unmet.extend(_journeys(expect, output))
    unmet.extend(_tools(expect, output))
    unmet.extend(_collected(expect, output))
    return unmet


def _guidelines(expect: Expectation, output: TurnOutput) -> list[Unmet]:
    matched = output.trace.matched_guideline_ids
    saw = f"matched guidelines {matched or 'none'}"
    unmet = [
        Unmet(f"guideline {g!r} matched", saw) for g in expect.guideline_matched if g not in matched
    ]
    unmet += [
        Unmet(f"guideline {g!r} not matched", saw)
        for g in expect.guideline_not_matched
        if g in matched
    ]
    return unmet


def _journeys(expect: Expectation, output: TurnOutput) -> list[Unmet]:
    state = output.state
    unmet: list[Unmet] = []
    for journey, step in expect.journey_step.items():
        path = state.journey_paths.get(journey, ())
        at = path[-1] if path else None
        if at != step:
            where = (
                f"journey {journey!r} at step {at!r}"
                if at is not None
                else f"journey {journey!r} not active (active: {state.active_journey_ids or 'none'})"
            )
            unmet.append(Unmet(f"journey {journey!r} at step {step!r}", where))
    for journey in expect.journey_completed:
        if journey not in state.completed_journeys:
            done = list(state.completed_journeys) or "none"
            unmet.append(Unmet(f"journey {journey!r} completed", f"completed journeys {done}"))
    return unmet


def _tools(expect: Expectation, output: TurnOutput) -> list[Unmet]:
    calls = output.trace.tool_calls
    dispatched = [c for c in calls if c.status in DISPATCHED]
    saw = f"tool calls {_describe_calls(calls)}"
    unmet = [
        Unmet(_describe_expected_call(wanted), saw)
        for wanted in expect.tool_called
        if not any(_call_meets(call, wanted) for call in calls)
    ]
    if expect.no_tool_called is True and dispatched:
        unmet.append(Unmet("no tool called", saw))
    elif isinstance(expect.no_tool_called, list):
        for name in expect.no_tool_called:
            if any(c.tool == name for c in dispatched):
                unmet.append(Unmet(f"tool {name!r} not called", saw))
    return unmet


def _call_meets(call: ToolCallRecord, wanted: ToolCallExpectation) -> bool:
    if call.tool != wanted.tool:
        return False
    if wanted.status is None:
        if call.status not in DISPATCHED:
            return False
    elif call.status != wanted.status:
        return False
    return all(
        name in call.arguments and same_value(call.arguments[name], value)
        for name, value in wanted.arguments.items()
    )


def same_value(seen: Any, expected: Any) -> bool:
    """Equal, or equal as text: a YAML `500` meets an argument the tool received as "500" or
    Decimal("500"), and "500.00" meets 500 (numbers compare as numbers); an amount of money
    ("500.00 USD") meets its number (500) and its own writing ("500 USD"); dates and times meet
    their writing ("15:00")."""
    if seen == expected or same_typed(seen, expected):
        return True
    money = parse_money_text(str(seen))
    if money is not None:
        wanted = parse_money_text(str(expected))
        if wanted is not None:
            return money[1] == wanted[1] and money[0] == wanted[0]
        seen = money[0]
    try:
        return float(str(seen)) == float(str(expected))
    except ValueError:
        return str(seen).strip() == str(expected).strip()


def _describe_expected_call(wanted: ToolCallExpectation) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in wanted.arguments.items())
    status = f" with status {wanted.status!r}" if wanted.status else ""
    return f"tool {wanted.tool!r} called" + (f" with {args}" if args else "") + status


def _describe_calls(calls: list[ToolCallRecord]) -> str:
    if not calls:
        return "none"
    return "; ".join(
        f"{c.tool}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())}) → {c.status}"
        for c in calls
    )


def _collected(expect: Expectation, output: TurnOutput) -> list[Unmet]:
    unmet: list[Unmet] = []
    for key, value in expect.collected.items():
        journey, _, name = key.rpartition(".")
        values = output.state.collected_values(journey or None)
        if name not in values or not same_value(values[name], value):
            seen = output.state.collected_values()
            unmet.append(
                Unmet(f"collected {key} = {value!r}", f"collected values {seen or 'none'}")
            )
    return unmet


# ------------------------------------------------------------------------------------------------
# judged expectations


class JudgedReply(BaseModel):
    """The judge's verdict on one reply against one natural-language expectation."""

    satisfied: bool
    reason: str


def transcript_lines(events: Iterable[Event]) -> dict[int, tuple[str, str]]:
    """Offset → (speaker, text) of the customer's and the agent's messages among `events`, as the
    session stores them: what the judge reads of the conversation. A secret is masked there, as
    in every prompt of the agent's own — pass the turn's `masked_events` too, to mask one typed
    before the turn that recognised it."""
    lines: dict[int, tuple[str, str]] = {}
    for event in events:
        if event.kind is not EventKind.MESSAGE:
            continue
        if event.source is EventSource.CUSTOMER:
            choice = event.data.get("choice")
            lines[event.offset] = ("customer", f"(picked {choice})" if choice else event.text or "")
        elif event.source is EventSource.AGENT and event.text:
            lines[event.offset] = ("agent", event.text)
    return lines


JUDGE_ROLE = (
    "You judge one reply of a customer-service agent in an automated test.\n"
    "Decide whether the agent's LAST reply satisfies the expectation. Judge only the "
    "expectation, not style; answer satisfied=false when in doubt, and give a one-sentence "
    "reason naming what in the reply decided it.\n\n"
)


def judge_prompt(expectation: str, conversation: list[tuple[str, str]], reply: str) -> Prompt:
    """The judge's prompt: its instructions (the stable prefix), then the conversation so far
    (speaker, text), the reply, the expectation."""
    lines = "\n".join(f"{speaker}: {text}" for speaker, text in conversation)
    return Prompt(
        JUDGE_ROLE
        + f"Conversation so far:\n{lines}\n\n"
        + f"The agent's last reply:\n{reply}\n\n"
        + f"Expectation:\n{expectation}\n",
        len(JUDGE_ROLE),
    )


async def judge_reply(
    llm: SchematicLLM,
    expectation: str,
    conversation: list[tuple[str, str]],
    reply: str,
    *,
    model: str,
) -> Unmet | None:
    """None when the model judges the reply meets `expectation`, else what it found instead."""
    generation = await llm.generate(
        judge_prompt(expectation, conversation, reply), JudgedReply, model=model
    )
    verdict = generation.value
    if verdict.satisfied:
        return None
    return Unmet(f"judged: {expectation}", f"reply {reply!r} — judge: {verdict.reason}")
