"""What every prompt of a turn shares: the conversation and the facts around it.

`TurnContext` is built once per turn; the `render_*` functions are pure and deterministic so that
prompt builders can be snapshot-tested.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.language.tags import language_name
from engine.model import AgentSnapshot, Term
from engine.ports import ToolOutcome
from engine.sessions.history import HISTORY_LIMIT  # most recent events shown to the LLM
from engine.sessions.session import Event, EventKind, EventSource, SessionState
from engine.values.runs import ReadingContext, reading_context


@dataclass(frozen=True)
class TurnContext:
    agent: AgentSnapshot
    session: SessionState
    history: Sequence[Event]  # the whole interaction including this turn's customer messages
    variables: dict[str, Any] = field(default_factory=dict)
    terms: Sequence[Term] = ()
    tool_results: Sequence[ToolOutcome] = ()  # staged in this turn so far
    language: str = "en"  # the session's language this turn (`engine.language.session`)

    def with_tool_results(self, results: Sequence[ToolOutcome]) -> TurnContext:
        return TurnContext(
            self.agent,
            self.session,
            self.history,
            self.variables,
            self.terms,
            tuple(results),
            self.language,
        )

    @property
    def reading(self) -> ReadingContext:
        """How this turn reads the customer's values: its today in the agent's time zone."""
        now = self.history[-1].created_at if self.history else None
        config = self.agent.config
        return reading_context(config.timezone, now, self.language, config.languages)

    @property
    def last_customer_text(self) -> str:
        for e in reversed(self.history):
            if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER:
                return e.text or ""
        return ""


# A person's messages (while the session was handed off) are the business speaking, like the
# agent's; named apart so the agent resuming knows what the person already said and promised.
_SPEAKERS = {EventSource.CUSTOMER: "Customer", EventSource.HUMAN: "Agent (a person from our team)"}


def render_history(events: Sequence[Event], limit: int = HISTORY_LIMIT) -> str:
    """The interaction as numbered lines; tool events show the data the LLM may see."""
    shown = [
        e
        for e in events
        if e.kind is EventKind.MESSAGE or (e.kind is EventKind.TOOL and not e.data.get("erased"))
    ][-limit:]
    if not shown:
        return "(no messages yet)"
    lines = []
    for e in shown:
        if e.kind is EventKind.MESSAGE:
            who = _SPEAKERS.get(e.source, "Agent")
            lines.append(f"{who}: {e.text or ''}")
        else:
            call = tool_call_text(str(e.data.get("tool")), e.data.get("arguments"))
            lines.append(f"Tool {call}: {_compact(e.data.get('llm_view'))}")
    return "\n".join(lines)


def render_variables(variables: dict[str, Any]) -> str:
    if not variables:
        return ""
    return "\n".join(f"- {k}: {_compact(v)}" for k, v in sorted(variables.items()))


def render_terms(terms: Sequence[Term]) -> str:
    if not terms:
        return ""
    lines = []
    for t in terms:
        syn = f" (also: {', '.join(t.synonyms)})" if t.synonyms else ""
        lines.append(f"- {t.name}{syn}: {t.description}")
    return "\n".join(lines)


def render_tool_results(results: Sequence[ToolOutcome]) -> str:
    if not results:
        return ""
    return "\n".join(
        f"- {tool_call_text(r.tool, r.arguments)}: {_compact(llm_view_of(r))}" for r in results
    )


def tool_call_text(tool: str, arguments: Any) -> str:
    """`get_user_age(user_id="u1")`: a result is shown with the arguments that produced it, so
    two calls of one tool are told apart; a call without arguments is just the tool's name."""
    if not isinstance(arguments, dict) or not arguments:
        return tool
    shown = ", ".join(f"{k}={_compact_json(v)}" for k, v in arguments.items())
    return f"{tool}({shown})"


def llm_view_of(outcome: ToolOutcome) -> Any:
    """What the LLM sees of a tool result: its data if present, else the error (never the view)."""
    if outcome.data is not None:
        return outcome.data
    return {"error": outcome.error} if outcome.error else None


def render_context(ctx: TurnContext) -> str:
    """The shared context block whole: the agent's part, then the turn's."""
    return f"{render_agent_context(ctx)}\n\n{render_turn_context(ctx)}"


def render_agent_context(ctx: TurnContext) -> str:
    """The part of the context that holds for every turn of a session: who the agent is and its
    glossary. Prompts put it in their stable prefix, which a provider's prompt cache serves."""
    parts = [
        f"Agent: {ctx.agent.name}"
        + (f" — {ctx.agent.description}" if ctx.agent.description else "")
    ]
    terms = render_terms(ctx.terms)
    if terms:
        parts.append(f"Glossary:\n{terms}")
    return "\n\n".join(parts)


def render_turn_context(ctx: TurnContext) -> str:
    """The part of the context that is this turn's: the customer's facts, the conversation,
    this turn's tool results and the language note. Prompts put it after their stable part. The
    conversation comes before this turn's results: it only grows, so the next turn's prompt
    shares it up to its last message."""
    parts = []
    variables = render_variables(ctx.variables)
    if variables:
        parts.append(f"Known facts about the customer:\n{variables}")
    parts.append(f"Conversation (most recent last):\n{render_history(ctx.history)}")
    tools = render_tool_results(ctx.tool_results)
    if tools:
        parts.append(f"Tool results from this turn:\n{tools}")
    default = ctx.agent.config.languages[0]
    if ctx.language != default:
        parts.append(language_note(ctx.language, default))
    return "\n\n".join(parts)


LANGUAGE_NOTE = "Language: "


def language_note(language: str, default: str) -> str:
    """What a prompt says when the customer writes another language than the agent's own (its
    conditions, steps and instructions): judge the meaning, not the words."""
    return (
        f"{LANGUAGE_NOTE}the customer writes {language_name(language)}; the agent's conditions, "
        f"steps and instructions are written in {language_name(default)}. Judge what the "
        "customer means, whatever the language."
    )


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
