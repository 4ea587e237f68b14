"""Validation of an agent's tools: what each declares, and the tools guidelines and steps name.

Part of `engine.validation`; each problem names the tool to fix.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from engine.agent_config import HANDOFF_TOOL
from engine.model import AgentSnapshot
from engine.tool_spec import ToolKind
from engine.validation_wording import did_you_mean, known_hint


def unknown_tool_problems(
    owner: str, tools: Sequence[str], snapshot: AgentSnapshot, reported: frozenset[str]
) -> Iterator[str]:
    """The tools `owner` (a guideline or a step) names that are not registered, except those in
    `reported` (reported already where the document named them) and the built-in handoff."""
    known = {t.name for t in snapshot.tools}
    for name in tools:
        if name not in known and name not in reported and name != HANDOFF_TOOL:
            yield (
                f"{owner}: tool '{name}' is not registered{did_you_mean(name, known)} "
                f"{known_hint('tools', known)}"
            )


def tool_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """Tools that declare a value they fill but cannot fill one."""
    for t in snapshot.tools:
        if t.fills is not None and t.kind is ToolKind.GENERAL:
            yield (
                f"tool '{t.name}' declares fills: '{t.fills}', but only a selector or an "
                "interrupter fills a value; set kind: selector or interrupter, or remove fills"
            )
        elif t.fills is not None and not t.fills.isidentifier():
            yield f"tool '{t.name}': fills '{t.fills}' must be a field name (letters, digits, _)"


def composed_parameter_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """Consequential tools with a composed parameter (one the model phrases)."""
    for spec in snapshot.tools:
        composed = [p.name for p in spec.parameters if p.composed]
        if composed and spec.consequential:
            names = ", ".join(f"'{n}'" for n in composed)
            yield (
                f"tool '{spec.name}': parameter {names} is composed (the model phrases it), but "
                "the tool is consequential; a consequential tool runs only on values the "
                "customer gave — remove composed or make the tool non-consequential"
            )
