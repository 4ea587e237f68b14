"""What the engine knows of a tool: its typed signature (`ToolSpec` and its `ToolParameter`s), its
`ToolKind` (general, selector, interrupter) and when the customer must agree to a call first
(`ConfirmPolicy`). The implementation lives elsewhere: `engine.toolkit` derives a `ToolSpec` from an
`@tool` function, and an `AgentSnapshot` lists the specs of the tools its agent may call.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from engine.values.types import ValueKind, ValueShape, compiled_pattern, currency_code

_FROZEN = ConfigDict(frozen=True, extra="forbid")


# The types a parameter can have (`engine.values.types`); `array` is a list of `items`.
ParameterType = Literal[
    "string", "integer", "number", "boolean", "date", "datetime", "time", "money", "array"
]
ItemType = Literal["string", "integer", "number", "boolean", "date", "datetime", "time", "money"]
# The Python and collected-field spellings an author may write for them.
_TYPE_ALIASES = {
    "str": "string",
    "text": "string",
    "int": "integer",
    "decimal": "number",
    "float": "number",
    "bool": "boolean",
    "list": "array",
}
_KINDS: dict[str, ValueKind] = {
    "string": "str",
    "integer": "int",
    "number": "decimal",
    "boolean": "bool",
    "date": "date",
    "datetime": "datetime",
    "time": "time",
    "money": "money",
}
_SOURCE = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)?")


def supported_types() -> str:
    """The parameter types Waypoint reads, as an author writes them."""
    return ", ".join([*get_args(ItemType), "a list of these (array with items)", "an enum"])


def _type_name(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    name = _TYPE_ALIASES.get(value.strip().lower(), value.strip().lower())
    allowed = get_args(ParameterType) if what == "type" else get_args(ItemType)
    if name not in allowed:
        raise ValueError(
            f"unsupported {what} {value!r}: Waypoint reads {supported_types()} — a value it "
            "cannot read would reach the tool as text"
        )
    return name


class ToolParameter(BaseModel):
    """One parameter of a tool: its type (what the tool receives, see `engine.values.types`) and
    where its value may come from (`engine.values.provenance`)."""

    model_config = _FROZEN
    name: str
    type: ParameterType = "string"
    # The type of each item of an `array`.
    items: ItemType | None = None
    description: str = ""
    enum: tuple[str, ...] = ()
    required: bool = True
    default: Any = None
    # The model phrases this value itself (a search query): exempt from grounding. Only on
    # non-consequential tools; validation refuses it elsewhere.
    composed: bool = False
    # A secret (a password): the tool receives it, nothing stored or shown to a model keeps it.
    secret: bool = False
    # `money`: the currency of an amount the customer gives without naming one.
    currency: str | None = None
    # `string`: the shape of the whole value (an account id: `\d{7,12}`), a regular expression.
    # The customer's words are read for exactly this shape; anything else is refused.
    pattern: str | None = None
    # The tool result this value comes from, `tool.field` ("lookup_account_id.account_id") or
    # `tool` (its whole result): the latest successful result of that tool for this sender, for
    # this request, grounds it. Checked by validation.
    source: str | None = None
    # The model may derive this value from the customer's words (a category for "keyboards", a
    # converted unit): allowed on a harmless tool; on a consequential one it is confirmed.
    derived: bool = False

    @field_validator("currency")
    @classmethod
    def _currency_code(cls, value: str | None) -> str | None:
        return currency_code(value)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return compiled_pattern(value)

    @field_validator("source")
    @classmethod
    def _tool_dot_field(cls, value: str | None) -> str | None:
        if value is not None and not _SOURCE.fullmatch(value.strip()):
            raise ValueError(
                f"source {value!r} must name a tool's result field ('tool.field'), or a tool "
                "whose whole result is the value ('tool')"
            )
        return None if value is None else value.strip()

    @model_validator(mode="before")
    @classmethod
    def _known_types(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        try:
            kind = _type_name(data.get("type", "string"), "type")
            items = data.get("items")
            items = None if items is None else _type_name(items, "items")
        except ValueError as exc:
            raise ValueError(f"parameter {data.get('name')!r}: {exc}") from None
        # An array without `items` is a list of text (how lists were declared before).
        if kind == "array" and items is None:
            items = "string"
        return {**data, "type": kind, "items": items}

    @model_validator(mode="after")
    def _items_only_for_arrays(self) -> ToolParameter:
        if self.type != "array" and self.items is not None:
            raise ValueError(f"items is only for an array, not for a {self.type}")
        return self

    @property
    def kind(self) -> ValueKind:
        """The value kind of this parameter (of each item, for an array)."""
        if self.enum:
            return "enum"
        return _KINDS[self.items if self.type == "array" and self.items else self.type]

    @property
    def shape(self) -> ValueShape:
        return ValueShape(
            kind=self.kind,
            choices=self.enum,
            pattern=self.pattern,
            currency=self.currency,
            many=self.type == "array",
        )

    @property
    def source_tool(self) -> tuple[str, str] | None:
        """(tool, field) of a declared `source`."""
        if self.source is None:
            return None
        tool, _, field = self.source.partition(".")
        return tool, field


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
    the tool's name without a `choose_` / `pick_` / `select_` prefix (see `pick_name`).

    `speculative` declares that the tool only reads: no side effect, safe to call with arguments
    the turn may not end up using. With `speculation: on`, a call to it that the turn's
    predicted decisions make runs ahead, beside round 1, so the reply can be drafted with its
    result (`engine.stages.tools_ahead`). Only a general tool that is not consequential and
    never asks first may say so (`waypoint validate`)."""

    model_config = _FROZEN
    name: str
    description: str = ""
    parameters: tuple[ToolParameter, ...] = ()
    kind: ToolKind = ToolKind.GENERAL
    consequential: bool = False
    confirm: ConfirmPolicy | None = None
    fills: str | None = None
    timeout_seconds: float = 10.0
    speculative: bool = False

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
