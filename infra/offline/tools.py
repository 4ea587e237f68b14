"""Tool-call planning (`ToolCallPlan`) from `engine.tools.calls.build_tool_call_prompt`.

Every offered tool whose result is not already in this turn's tool results is called. Arguments
come from the known values (same name), then from the customer's words — the latest message(s)
first, then earlier ones, newest first — through `values.extract_values`: enum options named,
numbers, ticker symbols for a `symbol`, ids after a cue ("order 123"). A bare answer counts only
for parameters the agent's last message asked for. Last, a source parameter (`from_account_id`)
takes the known value of its plain name (`account_id`, the customer's own account looked up
earlier). What is not found is left out (the engine asks the customer for a missing required
argument).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from engine.tools.calls import ProposedCall, ToolArgument, ToolCallPlan
from infra.offline.choices import with_vocabulary
from infra.offline.prompt import UnrecognizedPrompt, parse_shared_context, section
from infra.offline.slots import BOOL, DATE, ENUM, INT, NUMBER, TEXT, Slot
from infra.offline.values import extract_values

PARSER = "tool call parser (infra/offline/tools.py)"
_TOOL = re.compile(r"^- (?P<name>[^:\s]+): ?(?P<description>.*)$")
_PARAM = re.compile(
    r"^    - (?P<name>[^:]+): (?P<type>string|integer|number|boolean|date|datetime|time|money|"
    r"array(?: of \w+)?)"
    r"(?: one of (?P<enum>\[.*?\]))?, (?P<required>required|optional)(?: — (?P<description>.*))?$"
)
_TYPES = {
    "string": TEXT,
    "integer": INT,
    "number": NUMBER,
    "boolean": BOOL,
    "date": DATE,
    "time": TEXT,
    "datetime": TEXT,
    "money": NUMBER,
}


@dataclass(frozen=True)
class OfferedParameter:
    name: str
    type: str
    enum: tuple[str, ...]
    required: bool
    description: str

    @property
    def slot(self) -> Slot | None:
        if self.type not in _TYPES:
            return None  # lists are never read out of a sentence
        kind = ENUM if self.enum else _TYPES[self.type]
        return Slot(self.name, kind, self.enum, self.description)


@dataclass(frozen=True)
class OfferedTool:
    name: str
    description: str
    parameters: tuple[OfferedParameter, ...]
    reason: str = ""


def parse_offered_tools(prompt: str) -> tuple[tuple[OfferedTool, ...], dict[str, object]]:
    """The tools offered and the values already known."""
    block = section(prompt, "Tools you may call now:\n", parser=PARSER, ends=("\n\nValues ",))
    known_text = section(prompt, "Values already known: ", parser=PARSER)
    try:
        known = json.loads(known_text)
    except json.JSONDecodeError as exc:
        raise UnrecognizedPrompt(f"offline {PARSER}: known values are not JSON: {exc}") from exc
    tools: list[OfferedTool] = []
    for line in block.splitlines():
        head = _TOOL.match(line)
        param = _PARAM.match(line)
        if head:
            tools.append(OfferedTool(head["name"], head["description"], ()))
        elif param and tools:
            enum = tuple(str(e) for e in ast.literal_eval(param["enum"])) if param["enum"] else ()
            parameter = OfferedParameter(
                param["name"].strip(),
                param["type"],
                enum,
                param["required"] == "required",
                param["description"] or "",
            )
            last = tools[-1]
            tools[-1] = OfferedTool(
                last.name, last.description, (*last.parameters, parameter), last.reason
            )
        elif line.startswith("    offered because: ") and tools:
            last = tools[-1]
            reason = line.removeprefix("    offered because: ")
            tools[-1] = OfferedTool(last.name, last.description, last.parameters, reason)
        elif line.strip() and line.strip() != "(no parameters)":
            raise UnrecognizedPrompt(f"offline {PARSER}: cannot read tool line {line!r}")
    if not tools:
        raise UnrecognizedPrompt(f"offline {PARSER}: no tools are offered")
    return tuple(tools), dict(known)


def plan_tool_calls(prompt: str) -> ToolCallPlan:
    """Call each offered tool once, with the arguments that can be found."""
    tools, known = parse_offered_tools(prompt)
    context = parse_shared_context(prompt, parser=PARSER)
    done = {r.tool for r in context.tool_results}
    asked = (context.previous_agent_message or "").lower()
    calls = []
    for tool in tools:
        if tool.name in done:
            continue
        arguments = {p.name: str(known[p.name]) for p in tool.parameters if _given(known, p.name)}
        missing = [p for p in tool.parameters if p.name not in arguments and p.slot is not None]
        # the latest messages first; earlier customer messages only fill what is still missing
        sources = [context.latest_customer_text, *reversed(context.customer_messages[:-1])]
        for i, text in enumerate(sources):
            if not missing or not text:
                continue
            answering = [p.name for p in missing if i == 0 and _asked_for(asked, p.name)]
            slots = [with_vocabulary(p.slot, context.glossary) for p in missing if p.slot]
            found = extract_values(slots, text, answering=answering, offered=asked)
            arguments.update(found)
            missing = [p for p in missing if p.name not in found]
        for p in missing:
            source = _source_value(p.name, known)
            if source is not None:
                arguments[p.name] = source
        calls.append(
            ProposedCall(
                tool=tool.name,
                arguments=[ToolArgument(name=k, value=v) for k, v in arguments.items()],
            )
        )
    rationale = "calling " + ", ".join(c.tool for c in calls) if calls else "results already here"
    return ToolCallPlan(calls=calls, rationale=rationale)


_SOURCE_WORDS = frozenset({"from", "source", "origin", "sender", "debit", "my", "own"})


def _source_value(name: str, known: dict[str, object]) -> str | None:
    """`from_account_id` ← a known `account_id`: the customer's own account (looked up earlier)
    is where money comes from. Only ever for a source, never for a destination."""
    wanted = [w for w in re.split(r"[_\s]+", name.lower()) if w]
    rest = [w for w in wanted if w not in _SOURCE_WORDS]
    if len(rest) == len(wanted) or not rest:
        return None
    key = "_".join(rest)
    return str(known[key]) if _given(known, key) else None


def _given(known: dict[str, object], name: str) -> bool:
    return known.get(name) not in (None, "")


def _asked_for(agent_message: str, name: str) -> bool:
    words = [w for w in re.split(r"[_\s]+", name.lower()) if len(w) > 2 and w != "name"]
    return bool(words) and all(w in agent_message for w in words)
