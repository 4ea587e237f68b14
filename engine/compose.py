"""Composition: write the reply from the matched set, in one LLM call.

The composer also reports which instructions it actually followed (`applied`), so no separate
post-reply "which guidelines were applied" analysis call is needed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from engine.context import TurnContext, render_context
from engine.model import AgentSnapshot, CompositionMode, Guideline, Journey, JourneyNode

_RESTRICTIVENESS = {
    CompositionMode.FLUID: 0,
    CompositionMode.CANNED_FLUID: 1,
    CompositionMode.CANNED_STRICT: 2,
}


@dataclass(frozen=True)
class Instruction:
    """One thing the reply must do, with where it came from."""

    handle: str
    text: str
    source_id: str  # guideline id (projected node guidelines included)
    journey_id: str | None = None


@dataclass
class CompositionInput:
    instructions: list[Instruction] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)  # matched observational conditions
    questions: list[str] = field(default_factory=list)  # e.g. missing tool arguments to ask for
    collected: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. "a tool failed: …"


class ComposedReply(BaseModel):
    message: str = Field(description="the reply to send to the customer")
    applied: list[str] = Field(
        default_factory=list, description="handles of the instructions the reply follows"
    )


def effective_composition_mode(
    agent: AgentSnapshot,
    guidelines: Sequence[Guideline],
    steps: Sequence[tuple[Journey, JourneyNode]],
) -> CompositionMode:
    """Most specific wins: a journey step's mode (else its journey's) over a guideline's over the
    agent's. When several candidates at the same level disagree, the most restrictive wins."""
    step_modes = [n.composition_mode or j.composition_mode for j, n in steps]
    step_modes = [m for m in step_modes if m is not None]
    if step_modes:
        return max(step_modes, key=_RESTRICTIVENESS.__getitem__)
    guideline_modes = [g.composition_mode for g in guidelines if g.composition_mode is not None]
    if guideline_modes:
        return max(guideline_modes, key=_RESTRICTIVENESS.__getitem__)
    return agent.config.composition_mode


def build_compose_prompt(ctx: TurnContext, data: CompositionInput, *, explain: bool = False) -> str:
    """The fluid composition prompt (pure)."""
    parts = [
        "You are a customer-service agent writing your next reply in this conversation.",
        render_context(ctx),
    ]
    if data.observations:
        parts.append("What you noticed:\n" + "\n".join(f"- {o}" for o in data.observations))
    if data.collected:
        facts = json.dumps(data.collected, ensure_ascii=False, default=str, sort_keys=True)
        parts.append(f"Values the customer already gave: {facts}")
    if data.instructions:
        lines = "\n".join(f"- [{i.handle}] {i.text}" for i in data.instructions)
        parts.append(f"Instructions for this reply (follow all that still make sense):\n{lines}")
    else:
        parts.append("No specific instruction applies: answer helpfully and briefly.")
    if data.questions:
        parts.append(
            "You cannot proceed without this information; ask the customer for it:\n"
            + "\n".join(f"- {q}" for q in data.questions)
        )
    if data.notes:
        parts.append("Notes:\n" + "\n".join(f"- {n}" for n in data.notes))
    parts.append(
        "Rules: never invent facts, amounts, ids or tool results; use only what is above. "
        "Reply in the customer's language, concisely. Answer with JSON only: `message` is the "
        "reply, `applied` lists the handles of the instructions your reply follows."
        + (" Add nothing else." if not explain else "")
    )
    return "\n\n".join(parts)


def applied_sources(data: CompositionInput, reply: ComposedReply) -> list[str]:
    """Map the composer's reported handles back to guideline ids (unknown handles ignored)."""
    by_handle = {i.handle: i.source_id for i in data.instructions}
    return list(dict.fromkeys(by_handle[h] for h in reply.applied if h in by_handle))


FALLBACK_REPLY = (
    "Sorry — I couldn't finish that just now. Your message is saved; please try again in a moment."
)
