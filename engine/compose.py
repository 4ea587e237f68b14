"""Composition: write the reply from the matched set, in one LLM call.

The composer also reports which instructions it actually followed (`applied`), so no separate
post-reply "which guidelines were applied" analysis call is needed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from engine.agent_config import CompositionMode
from engine.context import TurnContext, render_agent_context, render_turn_context
from engine.language.tags import language_name
from engine.model import AgentSnapshot, Guideline, Journey, JourneyNode
from engine.prompt_text import Prompt, marked, stable_then_turn

COMPOSE_ROLE = "You are a customer-service agent writing your next reply in this conversation."

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
    fragments: list[str] = field(default_factory=list)  # this turn's tool fragments, filled
    language: str = "en"  # the session's language: the reply is written in it


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
    step_modes = [
        m for m in (n.composition_mode or j.composition_mode for j, n in steps) if m is not None
    ]
    if step_modes:
        return max(step_modes, key=_RESTRICTIVENESS.__getitem__)
    guideline_modes = [g.composition_mode for g in guidelines if g.composition_mode is not None]
    if guideline_modes:
        return max(guideline_modes, key=_RESTRICTIVENESS.__getitem__)
    return agent.config.composition_mode


def build_compose_prompt(
    ctx: TurnContext, data: CompositionInput, *, explain: bool = False
) -> Prompt:
    """The fluid composition prompt (pure): the role and the agent (the stable prefix), the
    turn's context, what this reply must do, then the rules (they name the reply's language)."""
    stable = [COMPOSE_ROLE, render_agent_context(ctx)]
    parts = [render_turn_context(ctx)]
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
    if data.fragments:
        parts.append(
            "Wording this turn's tools provided (use it where it fits, word for word):\n"
            + "\n".join(f"- {f}" for f in data.fragments)
        )
    parts.append(
        "Rules: never invent facts, amounts, ids or tool results; use only what is above. "
        f"Write the reply in {language_name(data.language)}, concisely, whatever language the "
        "instructions are written in. Answer with JSON only: `message` is the "
        "reply, `applied` lists the handles of the instructions your reply follows."
        + (" Add nothing else." if not explain else "")
    )
    return stable_then_turn(stable, parts)


def applied_sources(data: CompositionInput, reply: ComposedReply) -> list[str]:
    """Map the composer's reported handles back to guideline ids (unknown handles ignored)."""
    by_handle = {i.handle: i.source_id for i in data.instructions}
    return list(dict.fromkeys(by_handle[h] for h in reply.applied if h in by_handle))


# --------------------------------------------------------------------------------------------------
# Canned composition (canned_fluid, canned_strict)

_FIELD = re.compile(r"{{\s*([\w.]+)\s*}}")


@dataclass(frozen=True)
class Template:
    """An approved template or a tool fragment (transient), offered under a short handle."""

    handle: str
    source_id: str
    text: str
    transient: bool = False

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(_FIELD.findall(self.text)))


class CannedChoice(BaseModel):
    template: str | None = Field(
        default=None, description="handle of the template to send, or null if none fits"
    )
    message: str = Field(default="", description="free text; only when allowed and none fits")
    applied: list[str] = Field(default_factory=list)


def field_values(
    tool_data: Sequence[Any],
    fragments: Sequence[Mapping[str, Any]],
    collected: Mapping[str, Any],
    variables: Mapping[str, Any],
) -> dict[str, str]:
    """Everything a template field can be filled from, flattened to dotted names.
    Later sources win: the customer's collected values override tool data of the same name."""
    values: dict[str, str] = {}
    for data in tool_data:
        _flatten(data, "", values)
    for fragment in fragments:
        _flatten(fragment.get("fields", {}), "", values)
    _flatten(dict(variables), "", values)
    _flatten(dict(collected), "", values)
    return values


def _flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(v, f"{prefix}{k}.", out)
    elif prefix:
        key = prefix[:-1]
        out[key] = _text(value)
        out.setdefault(key.rsplit(".", 1)[-1], out[key])  # nested values answer to their leaf name


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def merge_fragments(per_call: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[Template]:
    """Tool fragments become transient templates. Ids are `tool:fragment`; a clash (two calls of
    the same tool, or a repeated id) is resolved deterministically by call order: `#2`, `#3`…"""
    templates: list[Template] = []
    seen: dict[str, int] = {}
    for tool, fragments in per_call:
        for i, fragment in enumerate(fragments):
            base = f"{tool}:{fragment.get('id') or i}"
            seen[base] = seen.get(base, 0) + 1
            source = base if seen[base] == 1 else f"{base}#{seen[base]}"
            templates.append(Template("", source, str(fragment.get("text", "")), transient=True))
    return templates


def fillable(templates: Sequence[Template], values: Mapping[str, str]) -> list[Template]:
    """Only templates whose every field can be filled are ever offered."""
    return [t for t in templates if t.text and all(f in values for f in t.fields)]


def render_template(template: Template, values: Mapping[str, str]) -> str:
    return _FIELD.sub(lambda m: values[m.group(1)], template.text)


def build_canned_prompt(
    ctx: TurnContext,
    data: CompositionInput,
    templates: Sequence[Template],
    values: Mapping[str, str],
    *,
    strict: bool,
) -> Prompt:
    """Choose the approved template that best carries out the instructions (pure). The fluid
    prompt's stable prefix is this one's too."""
    fluid = build_compose_prompt(ctx, data)
    base = fluid.rsplit("\n\nRules:", 1)[0]
    options = "\n".join(f"- [{t.handle}] {render_template(t, values)}" for t in templates)
    fallback = (
        "If none fits, answer template=null (a standard reply is sent; never write free text)."
        if strict
        else "If none fits well, answer template=null and write the reply yourself in `message`, "
        f"in {language_name(data.language)}."
    )
    text = (
        f"{base}\n\nApproved replies (already filled in):\n{options}\n\n"
        "Rules: choose the approved reply that best carries out the instructions above. "
        f"{fallback} `applied` lists the handles of the instructions your choice follows. "
        "Answer with JSON only."
    )
    return marked(text, fluid.stable_prefix)
