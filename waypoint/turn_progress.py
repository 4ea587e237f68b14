"""What the local stack's turn is doing right now, for `waypoint chat`'s spinner.

The engine reports nothing as it runs (and must not learn to); the local stack wraps the two ports
a turn waits on — the model and the tool dispatcher — and names the stage from what each call is
for: the schema of an LLM call says which stage asked (guideline matching, journey step selection,
tool planning, composition), a dispatch names its tools. Between calls the last stage stays shown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.ports import (
    Generation,
    SchematicLLM,
    ToolCall,
    ToolContext,
    ToolDispatcher,
    ToolOutcome,
)

T = TypeVar("T", bound=BaseModel)

# The schema each stage asks the model for → what the spinner says.
STAGE_OF_SCHEMA = {
    "GuidelineMatchBatch": "matching guidelines",
    "CustomerDependentBatch": "matching guidelines",
    "DisambiguationVerdict": "matching guidelines",
    "JourneyNodeSelection": "choosing the journey step",
    "ToolCallPlan": "planning tool calls",
    "ComposedReply": "composing the reply",
    "CannedChoice": "choosing a canned reply",
}


class TurnProgress:
    """The current stage of the turn in flight (one conversation at a time: `waypoint chat`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stage = "queued"
        self._since = time.monotonic()

    def report(self, stage: str) -> None:
        with self._lock:
            self._stage, self._since = stage, time.monotonic()

    @property
    def stage(self) -> str:
        with self._lock:
            return self._stage

    def seconds_in_stage(self) -> float:
        with self._lock:
            return time.monotonic() - self._since


class ReportingLLM:
    """The model, telling `progress` which stage is waiting on it."""

    def __init__(self, inner: SchematicLLM, progress: TurnProgress) -> None:
        self.inner = inner
        self.progress = progress

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        name = getattr(schema, "__name__", "")
        self.progress.report(STAGE_OF_SCHEMA.get(name, f"asking the model ({name})"))
        return await self.inner.generate(prompt, schema, model=model)

    def __getattr__(self, name: str) -> Any:  # anything else an adapter offers (close, …)
        return getattr(self.inner, name)


class ReportingDispatcher:
    """The tool dispatcher, telling `progress` which tools are running."""

    def __init__(self, inner: ToolDispatcher, progress: TurnProgress) -> None:
        self.inner = inner
        self.progress = progress

    async def dispatch(self, calls: Sequence[ToolCall], context: ToolContext) -> list[ToolOutcome]:
        names = ", ".join(dict.fromkeys(c.tool for c in calls)) or "tools"
        self.progress.report(f"running {names}")
        return await self.inner.dispatch(calls, context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
