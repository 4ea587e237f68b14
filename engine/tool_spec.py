"""What the engine knows of a tool: its typed signature (`ToolSpec` and its `ToolParameter`s), its
`ToolKind` (general, selector, interrupter) and when the customer must agree to a call first
(`ConfirmPolicy`). The implementation lives elsewhere: `engine.toolkit` derives a `ToolSpec` from an
`@tool` function, and an `AgentSnapshot` lists the specs of the tools its agent may call.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

_FROZEN = ConfigDict(frozen=True, extra="forbid")


ParameterType = Literal["string", "integer", "number", "boolean", "array", "object"]


class ToolParameter(BaseModel):
    model_config = _FROZEN
    name: str
    type: ParameterType = "string"
    description: str = ""
    enum: tuple[str, ...] = ()
    required: bool = True
    default: Any = None
    # The model phrases this value itself (a search query): exempt from grounding. Only on
    # non-consequential tools; validation refuses it elsewhere.
    composed: bool = False
    # A secret (a password): the tool receives it, nothing stored or shown to a model keeps it.
    secret: bool = False


class ToolKind(StrEnum):
    GENERAL = "general"  # never interrupts the turn
    SELECTOR = "selector"  # interrupts: the customer picks one item of a list
    INTERRUPTER = "interrupter"  # interrupts: returns an action (link, form); a later event resumes


ConfirmPolicy = Literal["always", "when_inferred", "never"]

# A selector named for what the customer chooses ("choose_size") fills that thing ("size").
_PICK_PREFIXES = ("choose_", "pick_", "select_")


class ToolSpec(BaseModel):
    """What the engine knows of a tool: its typed signature. The implementation lives elsewhere.

    `confirm` says when the customer must agree to the exact call first: `always`,
    `when_inferred` (some value was derived rather than said as is) or `never`. Unset, it is
    `when_inferred` for consequential tools and `never` for the others.

    `fills` (selectors and interrupters) names the collected value the customer's pick, or an
    interrupter's single result, is stored as, so later tools get it by that name; unset, it is
    the tool's name without a `choose_` / `pick_` / `select_` prefix (see `pick_name`)."""

    model_config = _FROZEN
    name: str
    description: str = ""
    parameters: tuple[ToolParameter, ...] = ()
    kind: ToolKind = ToolKind.GENERAL
    consequential: bool = False
    confirm: ConfirmPolicy | None = None
    fills: str | None = None
    timeout_seconds: float = 10.0

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters if p.required)

    @property
    def confirmation(self) -> ConfirmPolicy:
        if self.confirm is not None:
            return self.confirm
        return "when_inferred" if self.consequential else "never"

    @property
    def pick_name(self) -> str:
        """The value a pick from this tool fills: `fills`, else the name without its prefix."""
        if self.fills:
            return self.fills
        for prefix in _PICK_PREFIXES:
            if self.name.startswith(prefix) and len(self.name) > len(prefix):
                return self.name[len(prefix) :]
        return self.name
