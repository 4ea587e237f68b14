"""Validation of an agent's tools: what each declares, and the tools guidelines and steps name.

Part of `engine.validation.agent`; each problem names the tool to fix.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.agent_config import HANDOFF_TOOL
from engine.model import AgentSnapshot
from engine.tools.spec import ToolKind, ToolSpec
from engine.validation.wording import did_you_mean, known_hint


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
        if t.speculative:
            yield from _speculative_problems(t)


def _speculative_problems(t: ToolSpec) -> Iterator[str]:
    """A tool declared `speculative` runs ahead on a predicted call (`engine.stages.tools_ahead`):
    only a tool that just reads, with nothing to ask first and nothing secret, may."""
    why = f"tool '{t.name}' is speculative (it runs ahead on a predicted call), but "
    if t.consequential:
        yield (
            why + "it is consequential (it changes something for the customer); only a tool "
            "that just reads may run on a prediction — remove speculative"
        )
    if t.kind is not ToolKind.GENERAL:
        yield (
            why + f"it is a {t.kind.value}, which waits for the customer; only a general tool "
            "runs ahead — remove speculative"
        )
    if t.confirm == "always":
        yield (
            why + "it asks the customer before every call (confirm: always); running it ahead "
            "would run it before their yes — remove speculative or the confirmation"
        )
    secret = [p.name for p in t.parameters if p.secret]
    if secret:
        yield (
            why + f"parameter '{secret[0]}' is secret; an agent that declares a secret never "
            "speculates, and a secret is never sent on a prediction — remove speculative"
        )


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


def value_source_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """Where parameters say their values come from (`engine.values.provenance`): a declared
    `source` names another tool of the agent; a `pattern` is for text; a `currency` for money;
    `derived` may not stand beside `composed`; the agent's time zone is one we know."""
    known = {t.name: t for t in snapshot.tools}
    for spec in snapshot.tools:
        for p in spec.parameters:
            where = f"tool '{spec.name}': parameter '{p.name}'"
            if p.source_tool is not None:
                tool, _ = p.source_tool
                if tool == spec.name:
                    yield (
                        f"{where} takes its value from the tool's own result ({p.source}); a "
                        "tool's earlier result is never the source of its next call — name the "
                        "tool that looks the value up"
                    )
                elif tool not in known:
                    yield (
                        f"{where}: source '{p.source}' names no tool of this agent"
                        f"{did_you_mean(tool, set(known))} {known_hint('tools', set(known))}"
                    )
                elif known[tool].consequential:
                    yield (
                        f"{where}: source '{p.source}' is a consequential tool's result; name "
                        "the lookup that gives the value"
                    )
            if p.pattern and (p.kind not in ("str",)):
                yield f"{where} has a pattern, which only text (type string) takes"
            if p.currency and p.kind != "money":
                yield f"{where} has a currency, which only money takes"
            if p.derived and p.composed:
                yield f"{where} is both derived and composed; a composed value is the model's own"
    timezone = snapshot.config.timezone
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        yield (
            f"config.timezone '{timezone}' is not a known time zone (write an IANA name such as "
            "'Europe/Madrid' or 'America/New_York'); relative dates are counted in it"
        )
