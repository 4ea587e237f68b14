"""Reading the parts every engine prompt shares (`engine.context.render_context`).

The engine's prompt builders are pure functions with fixed formats, so the offline provider reads
them back instead of guessing. Everything format-specific lives in small parsing functions; when a
marker is missing they raise `UnrecognizedPrompt`, which names the marker, so a change in a prompt
builder fails loudly in `tests/infra/test_offline_llm.py` rather than quietly in a demo.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from engine.errors import LLMError


class UnrecognizedPrompt(LLMError):
    """The offline provider could not read a prompt: the engine's prompt format and the parser in
    `infra.offline` disagree. Update the parser named in the message to the builder's format."""


CONVERSATION_HEADER = "Conversation (most recent last):\n"
TOOL_RESULTS_HEADER = "Tool results from this turn:\n"
FACTS_HEADER = "Known facts about the customer:\n"
GLOSSARY_HEADER = "Glossary:\n"
NO_MESSAGES = "(no messages yet)"

# Headers that may follow the conversation block, in any prompt kind.
_AFTER_CONVERSATION = (
    "\n\nLanguage: ",
    "\n\nTool results from this turn:\n",
    "\n\nAnswer with JSON only",
    "\n\n## Answer",
    "\n\nTask: ",
    "\n\n## Journey map",
    "\n\nTools you may call now:",
    "\n\nWhat you noticed:",
    "\n\nValues the customer already gave:",
    "\n\nInstructions for this reply",
    "\n\nNo specific instruction applies",
    "\n\nYou cannot proceed without this information",
    "\n\nNotes:\n",
    "\n\nRules:",
    "\n\nOptions:\n",
    "\n\nApproved replies",
)

# `Tool name: payload` or `Tool name(arg=value, …): payload` (a result with its arguments)
_TOOL_LINE = re.compile(r"^Tool (?P<tool>[^:(]+?)(?:\((?P<args>.*?)\))?: (?P<payload>.*)$")
_RESULT_LINE = re.compile(r"^- (?P<tool>[^:(]+?)(?:\((?P<args>.*?)\))?: (?P<payload>.*)$")


@dataclass(frozen=True)
class Message:
    """One line of the rendered conversation. `role` is customer, agent or tool."""

    role: str
    text: str
    tool: str = ""
    arguments: str = ""  # a tool line's arguments as shown


@dataclass(frozen=True)
class ToolData:
    """A tool's result as the LLM sees it: parsed JSON when it is JSON, else the text."""

    tool: str
    data: Any
    arguments: str = ""  # as shown: `k="v", n=2`; empty when the call took none


@dataclass(frozen=True)
class SharedContext:
    """The context block of a prompt: conversation, this turn's tool results, customer facts."""

    messages: tuple[Message, ...]
    tool_results: tuple[ToolData, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)
    agent_description: str = ""
    glossary: dict[str, tuple[str, ...]] = field(default_factory=dict)  # term → its synonyms

    @property
    def latest_customer_messages(self) -> tuple[str, ...]:
        """The customer's messages since the agent last spoke (tool lines in between skipped)."""
        found: list[str] = []
        for message in reversed(self.messages):
            if message.role == "agent":
                break
            if message.role == "customer":
                found.append(message.text)
        return tuple(reversed(found))

    @property
    def latest_customer_text(self) -> str:
        return " ".join(self.latest_customer_messages).strip()

    @property
    def previous_agent_message(self) -> str | None:
        """The agent's last message before the latest customer message(s)."""
        seen_customer = False
        for message in reversed(self.messages):
            if message.role == "customer":
                seen_customer = True
            elif message.role == "agent":
                return message.text if seen_customer or not self.latest_customer_messages else None
        return None

    @property
    def customer_messages(self) -> tuple[str, ...]:
        return tuple(m.text for m in self.messages if m.role == "customer")

    def recent_tool_results(self) -> tuple[ToolData, ...]:
        """This turn's tool results; else the tool lines after the latest customer message."""
        if self.tool_results:
            return self.tool_results
        recent: list[ToolData] = []
        for message in reversed(self.messages):
            if message.role != "tool":
                break
            recent.append(ToolData(message.tool, _json_or_text(message.text), message.arguments))
        return tuple(reversed(recent))


def require(prompt: str, marker: str, parser: str) -> int:
    """The index of `marker` in `prompt`, or `UnrecognizedPrompt` naming the parser to update."""
    index = prompt.find(marker)
    if index < 0:
        raise UnrecognizedPrompt(
            f"offline {parser}: the prompt has no {marker.strip()!r} section; the engine's prompt "
            f"format changed — update infra/offline ({parser}) to match it"
        )
    return index


def section(prompt: str, header: str, *, parser: str, ends: tuple[str, ...] = ("\n\n",)) -> str:
    """The text after `header` up to the first of `ends` (or the end of the prompt)."""
    start = require(prompt, header, parser) + len(header)
    return prompt[start : _first_end(prompt, start, ends)]


def optional_section(prompt: str, header: str, ends: tuple[str, ...] = ("\n\n",)) -> str | None:
    start = prompt.find(header)
    if start < 0:
        return None
    start += len(header)
    return prompt[start : _first_end(prompt, start, ends)]


def _first_end(prompt: str, start: int, ends: tuple[str, ...]) -> int:
    positions = [i for i in (prompt.find(e, start) for e in ends) if i >= 0]
    return min(positions) if positions else len(prompt)


def parse_shared_context(prompt: str, *, parser: str) -> SharedContext:
    """Read `render_context`'s block out of any engine prompt."""
    block = section(prompt, CONVERSATION_HEADER, parser=parser, ends=_AFTER_CONVERSATION)
    tools_block = optional_section(prompt, TOOL_RESULTS_HEADER)
    facts_block = optional_section(prompt, FACTS_HEADER)
    description = ""
    agent_line = re.search(r"^Agent: (?P<name>.*)$", prompt, re.M)
    if agent_line and " — " in agent_line["name"]:
        description = agent_line["name"].split(" — ", 1)[1]
    return SharedContext(
        messages=parse_conversation(block),
        tool_results=parse_tool_results(tools_block or ""),
        facts=_parse_facts(facts_block or ""),
        agent_description=description,
        glossary=parse_glossary(optional_section(prompt, GLOSSARY_HEADER) or ""),
    )


_TERM = re.compile(r"^- (?P<name>.+?)(?: \(also: (?P<synonyms>.*?)\))?: ")


def parse_glossary(block: str) -> dict[str, tuple[str, ...]]:
    """`- name (also: a, b): description` lines → {name: (a, b)}: the agent's own vocabulary."""
    terms: dict[str, tuple[str, ...]] = {}
    for line in block.splitlines():
        m = _TERM.match(line)
        if m:
            synonyms = m["synonyms"] or ""
            terms[m["name"].strip()] = tuple(x.strip() for x in synonyms.split(",") if x.strip())
    return terms


def parse_conversation(block: str) -> tuple[Message, ...]:
    """`Customer: …`, `Agent: …` and `Tool name: {json}` lines; other lines continue a message."""
    if block.strip() == NO_MESSAGES:
        return ()
    messages: list[Message] = []
    for line in block.split("\n"):
        tool = _TOOL_LINE.match(line)
        if line.startswith("Customer: "):
            messages.append(Message("customer", line[len("Customer: ") :]))
        elif line.startswith("Agent: "):
            messages.append(Message("agent", line[len("Agent: ") :]))
        elif tool and " " not in tool["tool"].strip():
            messages.append(
                Message("tool", tool["payload"], tool=tool["tool"], arguments=tool["args"] or "")
            )
        elif messages:
            last = messages[-1]
            messages[-1] = Message(last.role, f"{last.text}\n{line}", last.tool, last.arguments)
        elif line.strip():
            messages.append(Message("customer", line))
    return tuple(messages)


def parse_tool_results(block: str) -> tuple[ToolData, ...]:
    results = []
    for line in block.splitlines():
        m = _RESULT_LINE.match(line)
        if m:
            payload = _json_or_text(m["payload"])
            results.append(ToolData(m["tool"].strip(), payload, m["args"] or ""))
    return tuple(results)


def _parse_facts(block: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for line in block.splitlines():
        if line.startswith("- ") and ": " in line:
            name, payload = line[2:].split(": ", 1)
            facts[name.strip()] = _json_or_text(payload)
    return facts


def _json_or_text(payload: str) -> Any:
    text = payload.strip()
    if text[:1] in "{[" or text in ("true", "false", "null") or _looks_numeric(text):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def _looks_numeric(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+(\.\d+)?", text))


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested tool data as dotted scalar keys: {"account": {"id": 1}} → {"account.id": 1}."""
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
    elif isinstance(data, list):
        if prefix and all(not isinstance(v, dict | list) for v in data):
            out[prefix[:-1]] = ", ".join(str(v) for v in data)
        else:
            for i, value in enumerate(data):
                out.update(flatten(value, f"{prefix}{i}."))
    elif prefix:
        out[prefix[:-1]] = data
    else:
        out["result"] = data
    return out
