"""Reading a turn's messages for secrets typed ahead: "my password is monkey" before (or without)
any step asking for it.

A value said ahead of its step is recognised the way a journey's values ahead are: the model
reports it for a field, and the engine keeps it only where the customer's own words of this turn
hold it (`engine.matching.values_ahead`). Node selection does that for the journeys it runs; a
secret field of a journey that is not running (the login, when the customer opens with their
password) is read by this small call, asked for the agent's declared secret names only. What it
keeps is a secret of the turn, masked in everything the turn stores (`engine.privacy.secrets`) — never a
value for any step: the step that needs it still asks.

Pure: the prompt is a function of its inputs (snapshot-tested), the grounding is code.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from engine.context import TurnContext, language_note, render_history
from engine.matching.collected_values import CollectedItem
from engine.model import AgentSnapshot
from engine.privacy.secrets import typed_in
from engine.prompt_text import Prompt, stable_then_turn
from engine.sessions.session import Event, EventKind, EventSource

SECRET_FIELDS_HEADER = "Secret fields:\n"


class SecretsSaid(BaseModel):
    """The values the customer's latest messages give for the agent's secret fields. No
    rationale: one would quote the value, and an answer the engine cannot match to the
    customer's words is kept in the trace (its items only are masked by name)."""

    # Required: an answer without it (a model that answered another question) is not valid,
    # rather than read as "nothing typed".
    values: list[CollectedItem] = Field(
        description="each value given for a secret field; empty if none"
    )


@dataclass(frozen=True)
class SecretField:
    """A declared secret name as the prompt shows it: where the agent asks for it."""

    name: str
    type: str  # the collected field's type, or the tool parameter's
    asked: tuple[str, ...]  # "Ask for the customer's password" (journey "Authentication"), …


def secret_fields(agent: AgentSnapshot, names: Collection[str]) -> list[SecretField]:
    """The secret names of `names` with what the agent says of each: the steps that collect it
    and the tools that take it (a name only the session's earlier version declared has none)."""
    fields: list[SecretField] = []
    for name in sorted(names):
        asked: list[str] = []
        types: list[str] = []
        for journey in agent.journeys:
            for node in journey.nodes:
                for field in node.collects:
                    if field.name == name:
                        types.append(field.type)
                        step = node.action or field.description or node.id
                        asked.append(f'{step} (journey "{journey.title}")')
        for tool in agent.tools:
            for parameter in tool.parameters:
                if parameter.name == name:
                    types.append(parameter.type)
                    said = parameter.description or tool.description
                    asked.append(f"{said} (tool {tool.name})" if said else f"tool {tool.name}")
        fields.append(SecretField(name, types[0] if types else "str", tuple(dict.fromkeys(asked))))
    return fields


def latest_exchange(ctx: TurnContext) -> list[Event]:
    """The agent's last message before this turn (what the customer may be answering) and the
    customer's messages of this turn: all the secret reading is shown of the conversation."""
    first = ctx.session.next_offset()
    before = [
        e
        for e in ctx.history
        if e.offset < first and e.kind is EventKind.MESSAGE and e.source is not EventSource.CUSTOMER
    ][-1:]
    now = [
        e
        for e in ctx.history
        if e.offset >= first and e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]
    return [*before, *now]


def build_secret_reading_prompt(ctx: TurnContext, fields: Sequence[SecretField]) -> Prompt:
    """The prompt asking which values the customer's latest messages give for `fields`."""
    lines = []
    for field in fields:
        where = "; ".join(field.asked) or "asked by an earlier version of the agent"
        lines.append(f"- {field.name} ({field.type}): {where}")
    parts = [
        "You find the secret values (passwords, PINs, codes) a customer typed in their latest "
        "messages, so that they can be hidden from everything the agent stores.",
        f"Agent: {ctx.agent.name}"
        + (f" — {ctx.agent.description}" if ctx.agent.description else ""),
        "Task: for each value the customer's latest messages give for one of the secret fields "
        "below — before the agent asks for it, in passing, or answering the agent's last "
        "message — answer the field's name and the value exactly as the customer typed it. The "
        "customer may name the field in any language or words of their own.",
        'Rules: a field named without a value gives nothing ("I forgot my password"); a value '
        "for anything else (a username, an account number) is not listed; never guess or "
        "complete a value.",
        SECRET_FIELDS_HEADER + "\n".join(lines),
    ]
    turn = [f"Conversation (most recent last):\n{render_history(latest_exchange(ctx))}"]
    default = ctx.agent.config.languages[0]
    if ctx.language != default:
        turn.append(language_note(ctx.language, default))
    turn += [
        'Answer with JSON only: {"values": [{"name": …, "value": …}]}; an empty list when the '
        "messages give none.",
    ]
    return stable_then_turn(parts, turn)


def typed_secrets(
    answer: SecretsSaid, names: Collection[str], texts: Iterable[str]
) -> list[tuple[str, str]]:
    """The (name, value) pairs of `answer` that the engine keeps: a declared secret name (in any
    case, as fields match), and a value that stands in `texts` — the customer's messages of this
    turn as stored — whole, as masking will find it there (`engine.privacy.secrets.typed_in`). A value
    the model invented, completed or took from anywhere else is no secret: kept, it would mask
    an innocent word for the session's lifetime."""
    by_folded = {name.casefold(): name for name in names}
    said = [t for t in texts if t]
    kept: list[tuple[str, str]] = []
    for item in answer.values:
        name = by_folded.get(item.name.strip().casefold())
        if name is not None and typed_in(item.value, said):
            kept.append((name, item.value.strip()))
    return kept
