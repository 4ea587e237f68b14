"""The tool stage's deterministic parts: gating, argument filling and validation.

- Only tools attached to matched guidelines or to the selected tool steps of active journeys are
  offered; a proposed call to anything else is refused (and traced).
- Arguments are filled from values the journey collected, context variables and earlier tool
  results — without an LLM call — and validated against the tool's schema.
- A missing required argument becomes a question to the customer; no value is ever invented.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, Field

from engine.context import TurnContext, render_agent_context, render_turn_context
from engine.errors import ToolArgumentError
from engine.ports import ToolOutcome
from engine.prompt_text import Prompt, stable_then_turn
from engine.tools.spec import ToolParameter, ToolSpec
from engine.values.provenance import rules_text
from engine.values.types import coerce


class ToolArgument(BaseModel):
    name: str
    value: str = Field(
        description=(
            "the value, written in the form its parameter's type declares (a listed choice, "
            "YYYY-MM-DD, a plain number, '40.00 USD', a JSON array for a list)"
        )
    )


class ProposedCall(BaseModel):
    tool: str
    arguments: list[ToolArgument] = Field(default_factory=list)


class ToolCallPlan(BaseModel):
    """The LLM's answer: which offered tools to call now, with arguments it found. The rationale
    comes first so a model reasons about each argument's source before writing the calls."""

    rationale: str = Field(
        default="",
        description="per tool: why it is due, and where each argument came from",
    )
    calls: list[ProposedCall] = Field(default_factory=list)


def coerce_argument(param: ToolParameter, value: Any) -> Any:
    """The typed value of an argument (`engine.values.types`); raise ToolArgumentError naming
    what is wrong — a value that does not read as its type never reaches the tool."""
    try:
        return coerce(param.shape, value)
    except ValueError as exc:
        shown = value if isinstance(value, str | int | float | Decimal) else str(value)
        raise ToolArgumentError(f"{param.name}: {shown!r} {exc}") from None


def validate_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Coerce known arguments, drop unknown ones, apply defaults; raise on a bad or missing one."""
    clean: dict[str, Any] = {}
    problems: list[str] = []
    for param in spec.parameters:
        if param.name in arguments and arguments[param.name] not in (None, ""):
            try:
                clean[param.name] = coerce_argument(param, arguments[param.name])
            except ToolArgumentError as exc:
                problems.append(str(exc))
        elif param.required:
            problems.append(f"{param.name}: missing")
        elif param.default is not None:
            clean[param.name] = param.default
    if problems:
        raise ToolArgumentError(f"tool {spec.name!r}: " + "; ".join(problems))
    return clean


def known_values(
    collected: Mapping[str, Any],
    variables: Mapping[str, Any],
    results: Sequence[ToolOutcome],
) -> dict[str, Any]:
    """Values that can fill arguments by name: earlier tool data (flat dict keys), then context
    variables, then collected values — later sources win, so the customer's words override. A
    tool's fields are also known as `tool.field`, for parameters that declare that source."""
    values: dict[str, Any] = {}
    for r in results:
        if isinstance(r.data, Mapping) and r.error is None:
            flat = {k: v for k, v in r.data.items() if not isinstance(v, Mapping | list)}
            values.update(flat)
            values.update({f"{r.tool}.{k}": v for k, v in flat.items()})
        elif r.error is None and r.data is not None and not isinstance(r.data, Mapping | list):
            values[r.tool] = r.data
    values.update(variables)
    values.update(collected)
    return values


def fill_arguments(spec: ToolSpec, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Arguments found by name — a parameter that declares its source from that tool's latest
    result first — and the names of required parameters still missing."""
    args: dict[str, Any] = {}
    for p in spec.parameters:
        value = values.get(p.source) if p.source else None
        if value in (None, ""):
            value = values.get(p.name)
        if value not in (None, ""):
            args[p.name] = value
    missing = [p.name for p in spec.parameters if p.required and p.name not in args]
    return args, missing


def missing_argument_question(spec: ToolSpec, missing: Iterable[str]) -> str:
    described = []
    for name in missing:
        param = next((p for p in spec.parameters if p.name == name), None)
        hint = f" ({param.description})" if param and param.description else ""
        described.append(f"{name}{hint}")
    return f"To {spec.description or spec.name}, ask the customer for: " + ", ".join(described)


def tool_signature(spec: ToolSpec) -> str:
    """A tool as the model reads it: each parameter's type and the form a value of it is written
    in, and where its value comes from when the author declared it."""
    params = []
    for p in spec.parameters:
        kind = f"array of {p.items}" if p.type == "array" else p.type
        enum = f" one of {list(p.enum)}" if p.enum else ""
        req = "required" if p.required else "optional"
        notes = [p.description] if p.description else []
        if not p.enum:
            notes.append(f"written as {p.shape.describe()}")
        if p.source:
            notes.append(f"source: the result of {p.source}")
        if p.derived:
            notes.append("may be worked out from the customer's words")
        if p.composed:
            notes.append("you may compose it in your own words")
        desc = f" — {'; '.join(notes)}" if notes else ""
        params.append(f"    - {p.name}: {kind}{enum}, {req}{desc}")
    body = "\n".join(params) if params else "    (no parameters)"
    marker = " [consequential: it changes something for the customer]" if spec.consequential else ""
    return f"- {spec.name}: {spec.description}{marker}\n{body}"


_TOOL_GUIDANCE = """\
How to decide:
- Call a tool only when the reason it is offered holds now. A result already shown (in the \
conversation or this turn's tool results) for the same arguments does not need the call again, unless the customer asks again (a fresh check, \
a retry) or one of its inputs changed since.
- One tool may be called several times with different arguments (two accounts: two calls).
- Write each value in the form its parameter declares, not as typed: a listed choice by its \
listed name, a date as YYYY-MM-DD, an amount as a plain number with its currency code \
("100,000$" → 100000.00 USD).
- The latest value wins: "actually, 400" replaces the 300 said before."""

# The heading of the other guidelines in force, with what they are for: said where they are
# listed, so no other part has to point at them (it once said "below" of a section above it).
INSTRUCTIONS_HEADING = (
    "Instructions in force (your other guidelines that hold now; one can shape an argument, "
    "such as a rule that converts an amount or picks an account: apply it):"
)


def build_tool_call_prompt(
    ctx: TurnContext,
    specs: Sequence[ToolSpec],
    reasons: Mapping[str, str],
    known: Mapping[str, Any],
    *,
    instructions: Sequence[str] = (),
) -> Prompt:
    """Ask which offered tools to call now and with which arguments (pure). `instructions` are
    the other guidelines matched this turn, as text: they may shape an argument."""
    tools = "\n".join(
        tool_signature(s)
        + (f"\n    offered because: {reasons[s.name]}" if s.name in reasons else "")
        for s in specs
    )
    # `tool.field` keys are for declared sources; the model reads each value once, by name
    shown = {k: v for k, v in known.items() if "." not in k}
    known_text = json.dumps(shown, ensure_ascii=False, default=str, sort_keys=True)
    stable = [
        "You are the customer-service agent described below. Before your next reply, decide "
        "which of the tools offered to you to call now, and with which arguments.",
        render_agent_context(ctx),
        _TOOL_GUIDANCE,
    ]
    parts = [
        # one of three texts, by the kinds of tool offered this turn: not part of the stable
        # prefix, which must be the same whatever the turn offers
        rules_text(
            consequential=any(s.consequential for s in specs),
            harmless=not all(s.consequential for s in specs),
        ),
        f"Tools you may call now:\n{tools}",
        f"Values already known: {known_text}",
    ]
    today = _today(ctx)
    if today:
        parts.append(f"Today's date: {today}")
    if instructions:
        parts.append(INSTRUCTIONS_HEADING + "\n" + "\n".join(f"- {i}" for i in instructions))
    parts.append(render_turn_context(ctx))
    parts.append(
        "Rules: answer with JSON only, the rationale first: "
        '{"rationale": "...", "calls": [{"tool": "...", "arguments": [{"name": "...", '
        '"value": "..."}]}]}. An empty `calls` list means no tool is due.'
    )
    return stable_then_turn(stable, parts)


def _today(ctx: TurnContext) -> str:
    """Today where the agent's customers are (its time zone): the date "tomorrow" or "next
    Friday" is counted from — the same the engine counts from when it checks the value."""
    today = ctx.reading.today
    return today.isoformat() if today else ""


def selector_options(outcome: ToolOutcome) -> list[dict[str, Any]]:
    """The items a selector offers, as [{"id", "label", "value"}]: from `control.options`, else
    `view.options`, else a list in `data` (dicts with id/label/name, or plain values)."""
    raw = outcome.control.get("options")
    if raw is None and outcome.view:
        raw = outcome.view.get("options")
    if raw is None and isinstance(outcome.data, list):
        raw = outcome.data
    options: list[dict[str, Any]] = []
    for i, item in enumerate(raw or [], start=1):
        if isinstance(item, Mapping):
            oid = str(item.get("id", i))
            label = str(item.get("label") or item.get("name") or item.get("title") or oid)
            options.append({"id": oid, "label": label, "value": dict(item)})
        else:
            options.append({"id": str(i), "label": str(item), "value": item})
    return options


def resolve_pick(
    options: Sequence[Mapping[str, Any]], choice: str | None, text: str | None
) -> Any | None:
    """Which option the customer picked: a button/list id, its number ("2"), its position in
    words ("the second", "the last one"), or its label typed out, alone or with courtesy words
    around it ("large please", "I'll take the medium one"). Returns the option's value, or None
    when the answer picks nothing (or is ambiguous: "extra large" is not "large")."""
    for option in options:
        if choice is not None and str(choice) == str(option["id"]):
            return option["value"]
    answer = (text or choice or "").strip().lower().rstrip(".!")
    if not answer:
        return None
    if answer.isdigit() and 1 <= int(answer) <= len(options):
        return options[int(answer) - 1]["value"]
    exact = [
        o for o in options if str(o["label"]).lower() == answer or str(o["id"]).lower() == answer
    ]
    if len(exact) == 1:
        return exact[0]["value"]
    core = _pick_core(answer)
    position = _pick_position(core, len(options))
    if position is not None:
        return options[position]["value"]
    if core != answer:
        exact = [o for o in options if str(o["label"]).lower() == core]
        if len(exact) == 1:
            return exact[0]["value"]
    partial = [o for o in options if core and core in str(o["label"]).lower()]
    return partial[0]["value"] if len(partial) == 1 else None


def named_option(
    options: Sequence[Mapping[str, Any]], texts: Sequence[str]
) -> Mapping[str, Any] | None:
    """The one option the customer's words name: its label (or a plain text value) as whole
    words, case and spacing ignored — "a large with ham" names "large". None when no option or
    several are named ("large or medium"; "extra large" when "large" is offered too), when a
    label is only part of a word ("larger"), and for labels without a letter: a number said
    with other words answers something else (a quantity, a PIN), never a pick."""
    named = []
    for option in options:
        value = option.get("value")
        names = {str(option["label"]), *([value] if isinstance(value, str) else [])}
        if any(_names(n, t) for n in names if any(ch.isalpha() for ch in n) for t in texts):
            named.append(option)
    return named[0] if len(named) == 1 else None


def _names(name: str, text: str) -> bool:
    """Whether `text` says `name` as whole words, not qualified by the word before it: "a large
    with ham" names "large"; "extra large" and "not large" do not (the customer wants something
    else than the option)."""
    pattern = r"(?<!\w)" + re.escape(name.strip().casefold()).replace(r"\ ", r"\s+") + r"(?!\w)"
    lowered = text.casefold()
    for m in re.finditer(pattern, lowered):
        before = re.search(r"([\w']+)\s*$", lowered[: m.start()])
        if before is None or _LEAD_IN.fullmatch(before.group(1)):
            return True
    return False


# Words around a pick that say nothing about which option it is: courtesy, articles, "one",
# and the verbs of choosing ("I'll take the large one, please" → "large").
_PICK_FILLER = re.compile(
    r"\b(please|thanks|thank you|ok|okay|sure|yes|the|a|an|one|option|i'?ll|i'?d|i|will|would|"
    r"like|take|have|go|with|want|get|choose|pick|let'?s|me|give|number|no\.?)\b"
)
# The words that may come right before an option named among other words ("I'd like a large",
# "make it large", "2 large pizzas"): any other word may qualify it ("extra large").
_LEAD_IN = re.compile(
    _PICK_FILLER.pattern + r"|to|it|for|and|or|just|make|order|size|\d+|two|three|four|five"
)
_ORDINALS = {
    "first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "sixth": 5, "seventh": 6,
    "eighth": 7, "ninth": 8, "tenth": 9, "1st": 0, "2nd": 1, "3rd": 2, "4th": 3, "5th": 4,
}  # fmt: skip


def _pick_core(answer: str) -> str:
    return " ".join(_PICK_FILLER.sub(" ", re.sub(r"[,;!?]", " ", answer)).split())


def _pick_position(core: str, count: int) -> int | None:
    """The 0-based position a pick names ("second", "last", "2"), or None."""
    if core in {"last", "final"}:
        return count - 1 if count else None
    index = _ORDINALS.get(core)
    if index is None and core.isdigit():
        index = int(core) - 1
    return index if index is not None and 0 <= index < count else None
