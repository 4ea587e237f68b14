"""Speculation: the reply drafted in the same round as matching, used only if nothing changed.

A turn without tools takes two sequential LLM rounds: matching (and node selection), then the
reply. With `speculation: on` (`engine.agent_config.Speculation`) the turn also runs, at the
start of round 1, every decision stage on a copy of its state (`TurnState.fork`) with the
deployment's fast predictor (`EngineDeps.predictor`, the offline model) answering in place of the
model, and asks the real model for the reply those predicted decisions would get — a *draft*,
concurrent with the real round 1. The verified turn then runs exactly as without speculation;
when its reply prompt is character for character the draft's (`TurnLLM.draft`: same purpose,
prompt and schema), the draft's answer is the reply and the turn took one round.

Why this cannot change a decision or a reply: nothing the predictor says reaches the verified
state — the copy has its own containers, model, trace, id generator and tool dispatcher — and a
draft is only ever the answer to the identical request the verified turn makes. A wrong
prediction costs the draft's tokens (traced as a `discarded` call).

Tools: a predicted call ends the speculation for the turn (the reply would wait on the tool's
result anyway) — unless every call the copy would make (its arguments grounded and checked by
the same tool stage) is to a tool declared `speculative`, one that only reads. Those run ahead
for real through the turn's dispatcher, and the copy drafts with their results; the verified
turn takes an ahead outcome only for the very same call (`engine.stages.tools_ahead`). A write
never runs on a prediction. An agent that declares a secret does not speculate: a draft's prompt
would quote this turn's words before the turn recognised a secret in them, and a reply prompt
never sees a secret (docs/secrets.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel

from engine.agent_config import LLMPurpose
from engine.clock import SystemClock, UuidIds
from engine.errors import LLMError
from engine.llm import TurnLLM, estimate_tokens
from engine.ports import Generation, SchematicLLM, ToolCall, ToolContext, ToolOutcome
from engine.stages.activation import activate
from engine.stages.compose import compose_reply
from engine.stages.confirmation import carry_agreement
from engine.stages.handoff import handoff_request
from engine.stages.interrupts import release_stale_interrupt
from engine.stages.match import match_round
from engine.stages.recall import Recalled
from engine.stages.relationships import resolve_relationships, suppress_journeys
from engine.stages.secret_masking import mask_events
from engine.stages.state import TurnState
from engine.stages.tools import run_tools
from engine.stages.tools_ahead import ToolsAhead

T = TypeVar("T", bound=BaseModel)


class _Drafted(Exception):
    """The copy reached its reply: the draft is started, nothing more to decide."""


class _NotDrafted(Exception):
    """The copy's reply is not drafted (why is the message)."""


class _CopyDispatch:
    """The copy's tool dispatcher: runs the predicted calls ahead when all of them are to
    speculative tools (`ToolsAhead`); otherwise runs nothing and remembers why."""

    def __init__(self, ahead: ToolsAhead | None) -> None:
        self.ahead = ahead
        self.refused: str | None = None

    async def dispatch(self, calls: Sequence[ToolCall], context: ToolContext) -> list[ToolOutcome]:
        why = "a tool call is predicted" if self.ahead is None else self.ahead.refusal(calls)
        if why is not None or self.ahead is None:
            self.refused = why
            raise _NotDrafted(why)  # (the tool stage makes it an error: `refused` is checked)
        return await self.ahead.run_ahead(calls, context)


class _Still:
    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now


class _DraftingLLM(TurnLLM):
    """The copy's model: the predictor for every decision; the reply is drafted on the real
    model (`TurnLLM.draft`) instead of composed."""

    def __init__(self, predictor: SchematicLLM, state: TurnState, real: TurnLLM) -> None:
        super().__init__(predictor, state.agent.config, state.trace)
        self._real = real
        self._limit = state.agent.config.speculation.max_prompt_tokens
        self.round = real.round

    async def generate(
        self, purpose: LLMPurpose, prompt: str, schema: type[T], *, label: str = ""
    ) -> Generation[T]:
        if purpose is not LLMPurpose.COMPOSE:
            return await super().generate(purpose, prompt, schema, label=label)
        if self._limit is not None and estimate_tokens(prompt) > self._limit:
            raise _NotDrafted(f"the reply prompt is over {self._limit} tokens")
        self._real.draft(purpose, prompt, schema, label=label)
        raise _Drafted


def start_draft(state: TurnState, recalled: Recalled) -> asyncio.Task[str] | None:
    """Copy `state` now (before round 1 writes to it) and, beside round 1, predict this turn's
    decisions on the copy and draft the reply they would get. The task's result says what
    happened, for the trace ("drafted", or why not); `state` itself is never written."""
    predictor = state.deps.predictor
    if predictor is None or not state.agent.config.speculation.enabled:
        return None
    if state.secrets.names:
        # A draft's prompt quotes this turn's words before the turn has recognised a secret in
        # them (typed ahead, or answering its step): the reply prompt never sees a secret, so
        # an agent that declares one does not speculate.
        state.trace.speculation = "skipped: the agent declares a secret"
        return None
    ahead = None
    if state.deps.tools is not None and any(t.speculative for t in state.agent.tools):
        # The verified turn dispatches through `ahead` from now on: a call that ran ahead
        # exactly so takes that outcome, any other goes to the real dispatcher.
        ahead = ToolsAhead(state.deps.tools, state.agent, state.session.id, state.turn_id)
        state.tools_ahead = ahead
        state.deps = replace(state.deps, tools=ahead)
    dispatcher = _CopyDispatch(ahead)
    # Its own ids, and a clock standing at the turn's start (its messages' time): the copy
    # never reads the turn's clock or draws its ids (a test's clock advances on every reading).
    started = state.events[-1].created_at if state.events else SystemClock().now()
    deps = replace(state.deps, tools=dispatcher, ids=UuidIds(), clock=_Still(started))
    shadow = state.fork(deps, state.llm, state.trace.model_copy(deep=True))
    shadow.llm = _DraftingLLM(predictor, shadow, state.llm)
    return asyncio.create_task(_decide_and_draft(shadow, recalled, dispatcher))


async def _decide_and_draft(
    shadow: TurnState, recalled: Recalled, dispatcher: _CopyDispatch
) -> str:
    """The pipeline's decision stages, in `engine.turn`'s order, on the copy."""
    try:
        ctx = shadow.context()
        steps = await match_round(shadow, ctx, recalled)
        await activate(shadow, ctx, recalled, steps)
        resolution = resolve_relationships(shadow)
        suppress_journeys(shadow, resolution)
        if handoff_request(shadow, resolution) is not None:
            return "skipped: a handoff is predicted"
        await run_tools(shadow, resolution)
        if dispatcher.refused is not None:
            return f"skipped: {dispatcher.refused}"
        release_stale_interrupt(shadow)
        carry_agreement(shadow)
        resolution = resolve_relationships(shadow)
        mask_events(shadow)
        await compose_reply(shadow, resolution)
    except _Drafted:
        return "drafted"
    except _NotDrafted as why:
        return f"skipped: {why}"
    except LLMError as exc:
        return f"skipped: the prediction failed ({type(exc).__name__})"
    return "skipped: the reply needs no model"


async def draft_outcome(state: TurnState, drafting: asyncio.Task[str]) -> str:
    """What came of the draft, now that the verified turn is ready to reply. The copy's own work
    is awaited (the predictor answers at once), but not a call it runs ahead that the turn did
    not wait for: a prediction never delays the reply by a lookup the turn did not need."""
    if not drafting.done() and state.tools_ahead is not None and state.tools_ahead.running():
        drafting.cancel()
        await asyncio.wait({drafting})
        return "skipped: its calls run ahead were still out when the turn was ready to reply"
    return await drafting


async def settle_tools_ahead(state: TurnState) -> None:
    """Stop the calls still running ahead unused, and trace what became of each."""
    if state.tools_ahead is not None:
        state.trace.tools_ahead = await state.tools_ahead.settle()


async def settle_drafts(state: TurnState) -> None:
    """Drafts the reply did not use, and calls run ahead that no call took, are stopped and
    traced as discarded (before the trace is masked: a draft's prompt quotes the conversation
    like any other call's)."""
    await state.llm.settle_drafts()
    await settle_tools_ahead(state)
    if state.trace.speculation == "drafted":
        used = any(c.draft == "used" for c in state.trace.llm_calls)
        state.trace.speculation = "used" if used else "discarded"
