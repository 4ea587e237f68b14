"""Conversation tests for an agent: a scripted conversation and what each turn must show.

This is the contract of a conversation test file (`*.conv.yaml`, see docs/conversation-tests.md)
and of its Python form: the same models, built in code. Checking a turn against its expectations
is `engine.conversations.checks`; running a test against an engine is `infra.conversation_tests`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_STRICT = ConfigDict(extra="forbid", frozen=True)


def _as_list(value: Any) -> Any:
    """A single string where a list is expected is a list of one (`reply_contains: "hi"`)."""
    return [value] if isinstance(value, str) else value


class ToolCallExpectation(BaseModel):
    """A tool the turn dispatched, with at least these arguments (a subset match)."""

    model_config = _STRICT
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # ok | error | interrupted; None accepts any dispatched call (not one awaiting confirmation)
    status: str | None = None


class Expectation(BaseModel):
    """What one turn must show. Every field is optional; all given ones must hold."""

    model_config = _STRICT
    reply_contains: list[str] = Field(default_factory=list)  # case-insensitive substrings
    reply_not_contains: list[str] = Field(default_factory=list)
    reply_matches: str | None = None  # a Python regex, searched in the reply
    judged: str | None = None  # judged by the model; skipped with the offline model
    guideline_matched: list[str] = Field(default_factory=list)
    guideline_not_matched: list[str] = Field(default_factory=list)
    journey_step: dict[str, str] = Field(default_factory=dict)  # journey id → step id after turn
    journey_completed: list[str] = Field(default_factory=list)
    tool_called: list[ToolCallExpectation] = Field(default_factory=list)
    no_tool_called: bool | list[str] = False  # true: none at all; a list: none of these tools
    collected: dict[str, Any] = Field(default_factory=dict)  # "field" or "journey.field" → value

    _lists = field_validator(
        "reply_contains",
        "reply_not_contains",
        "guideline_matched",
        "guideline_not_matched",
        "journey_completed",
        mode="before",
    )(_as_list)

    @field_validator("tool_called", mode="before")
    @classmethod
    def _tool_calls(cls, value: Any) -> Any:
        # `tool_called: lookup` and `tool_called: {tool: lookup}` both mean a list of one; in a
        # list, a name is `{tool: name}` too
        if isinstance(value, str | dict):
            value = [value]
        if isinstance(value, list):
            return [{"tool": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("no_tool_called", mode="before")
    @classmethod
    def _no_tools(cls, value: Any) -> Any:
        return _as_list(value)


class Turn(BaseModel):
    """One customer message (text, or a pick of an offered option) and its expectations."""

    model_config = _STRICT
    customer: str = ""
    choice: str | None = None  # the id of a button / list option the customer picked
    # what `customer` means in the agent's own language: the offline model reads this instead
    # (it reads English only); a real model reads the customer's words and ignores it
    means: str | None = None
    expect: Expectation = Field(default_factory=Expectation)

    @model_validator(mode="after")
    def _says_something(self) -> Turn:
        if not self.customer and self.choice is None:
            raise ValueError("a turn needs `customer:` (what the customer says) or `choice:`")
        return self

    def describe(self) -> str:
        """The customer's side of the turn, as a failure report shows it."""
        if self.choice is not None:
            return f"choice {self.choice!r}" + (f", {self.customer!r}" if self.customer else "")
        return repr(self.customer)


class ConversationTest(BaseModel):
    """A scripted conversation with one agent: turns in order, each with its expectations.

    `agent` is a path to the agent file (relative paths resolve against the test file's folder
    when loaded from YAML); `tools` a module exposing the tool `registry`; `setup` an optional
    `module:function` called before every run, to reset the world the tools act on."""

    model_config = _STRICT
    name: str
    agent: Path
    tools: str | None = None
    setup: str | None = None
    customer_id: str = "customer"
    turns: list[Turn] = Field(min_length=1)
    source: Path | None = None  # the file it came from (set by the loader)
