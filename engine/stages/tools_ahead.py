"""Tools run ahead: a read-only tool's predicted call, run beside round 1 (`speculation: on`).

The copy that predicts a turn's decisions (`engine.stages.speculation`) stops at a predicted tool
call — unless every call it would make is to a tool its author declared `speculative` (it only
reads: no side effect, safe to call with arguments the turn may not use). Then those calls run
for real, through the turn's own dispatcher, while round 1 is still out, and the copy drafts the
reply with their results. `ToolsAhead` is both sides of that:

- the copy's `run_ahead`: starts the calls (one batch, ids and idempotency keys of their own:
  `{turn}:ahead:{n}`, never one the verified turn would give a call) and returns their outcomes
  under the copy's call ids;
- the verified turn's dispatcher (`dispatch`, the `ToolDispatcher` port): a call whose tool,
  arguments and context are exactly those of a call that ran ahead takes that outcome — awaited
  if it is still running, so one call never runs twice — under the verified call's id; every
  other call goes to the real dispatcher. A failed ahead run is not reused: the call runs again.

What ran ahead reaches the verified turn only as the outcome of a call the verified turn made
itself, through the same port as any other: its events, trace, state and reply are those of a
turn that dispatched the call. What the turn did not use is traced in `TurnTrace.tools_ahead`
("discarded"; "failed" for a run that gave an error) and forgotten.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.model import AgentSnapshot
from engine.ports import ToolCall, ToolContext, ToolDispatcher, ToolOutcome
from engine.trace import ToolCallRecord

# Calls one turn may run ahead: a prediction that calls more is not drafted (a lookup or two is
# what a reply waits on; a predictor asking for every tool is wrong, and a backend's load).
MAX_AHEAD_CALLS = 4


@dataclass
class _Ahead:
    """One call run ahead: what was asked, in which context, and the batch that runs it."""

    call: ToolCall  # as the backend got it (its own id and idempotency key)
    context: ToolContext
    batch: asyncio.Task[dict[str, ToolOutcome]]
    used: bool = False

    def same_call(self, call: ToolCall, context: ToolContext) -> bool:
        return _same(self.call, call) and self.context == context

    async def outcome(self) -> ToolOutcome | None:
        """Its outcome when it ran and succeeded; None when it failed (or was stopped)."""
        try:
            outcome = (await asyncio.shield(self.batch)).get(self.call.id)
        except asyncio.CancelledError:
            if self.batch.cancelled():
                return None
            raise
        return outcome if outcome is not None and outcome.error is None else None


class ToolsAhead:
    """The calls one turn ran ahead, and the verified turn's dispatcher that reuses them."""

    def __init__(self, real: ToolDispatcher, agent: AgentSnapshot, session_id: str, turn_id: str):
        self._real = real
        self._agent = agent
        self._session_id = session_id
        self._turn_id = turn_id
        self._runs: list[_Ahead] = []
        # Set when the verified turn dispatches: from then on nothing more runs ahead (the copy
        # is behind the turn it predicts, and a call must not run on both sides).
        self.closed = False

    def running(self) -> bool:
        """Whether a call run ahead has not come back yet."""
        return any(not r.batch.done() for r in self._runs)

    def refusal(self, calls: Sequence[ToolCall]) -> str | None:
        """Why these predicted calls may not run ahead (None: they may)."""
        if self.closed:
            return "the turn reached its tools first"
        not_speculative = sorted(
            {
                c.tool
                for c in calls
                if not (self._agent.has_tool(c.tool) and self._agent.tool(c.tool).speculative)
            }
        )
        if not_speculative:
            return f"a call to {', '.join(not_speculative)} (not speculative) is predicted"
        if len(self._runs) + len(calls) > MAX_AHEAD_CALLS:
            return f"more than {MAX_AHEAD_CALLS} tool calls are predicted"
        return None

    async def run_ahead(self, calls: Sequence[ToolCall], context: ToolContext) -> list[ToolOutcome]:
        """Run the copy's `calls` (check `refusal` first) for real, as one batch; their
        outcomes under the copy's call ids. A call identical to one already run ahead is not
        run again."""
        planned: list[_Ahead | ToolCall] = []
        fresh: list[ToolCall] = []
        for call in calls:
            known: _Ahead | ToolCall | None = next(
                (r for r in self._runs if r.same_call(call, context)), None
            )
            known = known or next((c for c in fresh if _same(c, call)), None)
            if known is None:
                n = len(self._runs) + len(fresh)
                fresh.append(
                    ToolCall(
                        id=f"{self._turn_id}:ahead:{n}",
                        tool=call.tool,
                        arguments=dict(call.arguments),
                        idempotency_key=f"{self._session_id}:{self._turn_id}:ahead:{n}",
                    )
                )
            planned.append(known or fresh[-1])
        batch = asyncio.create_task(self._run_batch(fresh, context)) if fresh else None
        made: dict[str, _Ahead] = {}
        runs: list[_Ahead] = []
        for item in planned:
            if isinstance(item, ToolCall):
                assert batch is not None
                if item.id not in made:
                    made[item.id] = _Ahead(item, context, batch)
                    self._runs.append(made[item.id])
                item = made[item.id]
            runs.append(item)
        outcomes = []
        for call, run in zip(calls, runs, strict=True):
            ran = (await asyncio.shield(run.batch)).get(run.call.id)
            ran = ran or ToolOutcome(call_id=run.call.id, tool=call.tool, error="no result")
            outcomes.append(replace(ran, call_id=call.id))
        return outcomes

    async def _run_batch(
        self, calls: Sequence[ToolCall], context: ToolContext
    ) -> dict[str, ToolOutcome]:
        try:
            outcomes = await self._real.dispatch(calls, context)
        except Exception as exc:  # errors are results: this run is simply not reused
            return {c.id: ToolOutcome(c.id, c.tool, error=f"dispatch failed: {exc}") for c in calls}
        return {o.call_id: o for o in outcomes}

    async def dispatch(self, calls: Sequence[ToolCall], context: ToolContext) -> list[ToolOutcome]:
        """The verified turn's dispatcher: each call that ran ahead exactly so (and succeeded)
        takes that outcome; the others run through the real dispatcher."""
        self.closed = True
        reused: dict[str, tuple[_Ahead, ToolOutcome]] = {}
        for call in calls:
            run = next((r for r in self._runs if not r.used and r.same_call(call, context)), None)
            outcome = await run.outcome() if run is not None else None
            if run is not None and outcome is not None:
                run.used = True  # one verified call takes it; a second identical call runs
                reused[call.id] = (run, replace(outcome, call_id=call.id))
        rest = [c for c in calls if c.id not in reused]
        ran = {o.call_id: o for o in await self._real.dispatch(rest, context)} if rest else {}
        return [
            reused[c.id][1] if c.id in reused else ran[c.id]
            for c in calls
            if c.id in reused or c.id in ran
        ]

    async def settle(self) -> list[ToolCallRecord]:
        """Stop what still runs unused, and say what became of each call run ahead."""
        records = []
        for run in self._runs:
            if not run.batch.done():
                run.batch.cancel()  # unused (a used run's batch is done): a read, stopped
            await asyncio.wait({run.batch})
            stopped = run.batch.cancelled()
            outcome = None if stopped else run.batch.result().get(run.call.id)
            failed = not stopped and (outcome is None or outcome.error is not None)
            status = "used" if run.used else "failed" if failed else "discarded"
            if stopped:
                detail = "stopped: the turn ended first"
            else:
                detail = "no result" if outcome is None else outcome.error or ""
            records.append(
                ToolCallRecord(
                    call_id=run.call.id,
                    tool=run.call.tool,
                    arguments=dict(run.call.arguments),
                    status=status,
                    detail=detail,
                    duration_ms=outcome.duration_ms if outcome is not None else 0.0,
                )
            )
        self._runs = []
        return records


def _same(one: ToolCall, other: ToolCall) -> bool:
    """The same tool with the same arguments."""
    return one.tool == other.tool and _canonical(one.arguments) == _canonical(other.arguments)


def _canonical(arguments: dict[str, Any]) -> str:
    """Arguments as one exact text: equal only when every value is the same value of the same
    type (`Decimal("1.0")` is not `Decimal("1.00")`, `1` is not `True`)."""
    return repr(sorted(arguments.items()))
