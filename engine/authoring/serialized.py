"""Loading the document form of an agent — YAML or JSON — compiled through the same builder as
Python, so both forms of one agent give equal snapshots with the same version.

The file is read and parsed here; its schema is `engine.authoring.document`, its compilation to
builder calls `engine.authoring.document_compiler`, and the way back (`dump_agent`)
`engine.authoring.document_writer`.

```yaml
agent: {id: bank, name: Bank concierge, description: …, composition_mode: fluid, config: {…}}
tools:
  - {name: check_funds, description: …, kind: general, parameters: [{name: amount, type: number}]}
guidelines:
  - id: lost_card                      # optional: derived from condition + action
    condition: The customer reports a lost or stolen card
    action: Block the card right away and tell the customer it is blocked
    tools: [block_card]
    criticality: high                  # also: description, tags, composition_mode, enabled,
    continuous: false                  #   metadata, priority: 0 (numeric; higher wins),
                                       #   customer_dependent: true | {customer_action,
    priority_over: [transfer]          #   agent_action}; relations: priority_over, depends_on,
                                       #   entails, disambiguates (ids, or {journey: id})
journeys:
  - id: transfer                       # optional: derived from the title
    title: Money transfer
    conditions: [The customer wants to transfer money]
    requires: [authenticate, balance]  # prerequisite journeys
    priority: 0                        # numeric priority of the journey and its guidelines
    states:                            # ids default to s1, s2, … in this order
      - {id: ask, chat: Ask for the destination and amount,
         collects: {destination: str, amount: decimal>0}}
      - {id: check, tool: check_funds, action: Tell whether the funds suffice}
      - {id: decide, fork: Whether the funds suffice}
    transitions:                       # the root state is `root`; `to: END` ends the journey
      - {from: root, to: ask}
      - {from: ask, to: check, when: The customer gave the destination and the amount}
      - {from: decide, to: END, when: The funds do not suffice}
    guidelines: [ … ]                  # scoped to the journey
relationships: [{kind: priority, source: …, target: …}]   # any relationship, by reference
terms: [{name: …, description: …, synonyms: […]}]
variables: [{name: …, description: …, default: …}]
canned_responses: [{id: …, template: "Your balance is {{balance}}", tags: […], signals: […]}]
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.authoring.agent_builder import Agent
from engine.authoring.document import AgentDocument, document_problems
from engine.authoring.document_compiler import Absent, DocumentCompiler
from engine.authoring.document_text import parse_document_text
from engine.errors import InvalidAgentDefinition
from engine.model import AgentSnapshot
from engine.tools.spec import ToolSpec
from engine.validation.agent import problems

Source = str | os.PathLike[str] | Mapping[str, Any]


def load_agent(source: Source, *, tools: Sequence[ToolSpec] | None = None) -> AgentSnapshot:
    """Read an agent document (a `.yaml`/`.yml`/`.json` path, or an already parsed mapping),
    compile and validate it. Raises `InvalidAgentDefinition` listing every problem: those of the
    document's shape, of its references and of the agent as a whole, in one list.

    `tools`: the `@tool` specs of the agent's tools registry (`ToolRegistry.specs`). With them,
    the document may name its tools only (or omit the section), and a full declaration must
    match its `@tool` function."""
    compiled = _compile(source, tools)
    agent, found = compiled.agent, compiled.problems
    if agent is None:
        raise InvalidAgentDefinition(found)
    try:
        snapshot = agent.compile()
    except InvalidAgentDefinition as error:
        raise InvalidAgentDefinition([*found, *error.problems]) from None
    found += problems(
        snapshot,
        reported_tools=compiled.reported_tools,
        incomplete_journeys=compiled.incomplete_journeys,
    )
    if found:
        raise InvalidAgentDefinition(found)
    return snapshot


def agent_from_document(source: Source, *, tools: Sequence[ToolSpec] | None = None) -> Agent:
    """The builder an agent document compiles to, before `build()`: extend it in Python (add
    tools, guidelines) if some of the agent is better written in code. `tools` as in
    `load_agent`."""
    compiled = _compile(source, tools)
    if compiled.agent is None or compiled.problems:
        raise InvalidAgentDefinition(compiled.problems)
    return compiled.agent


@dataclass(frozen=True)
class _Compiled:
    agent: Agent | None  # None when the agent header itself is broken
    problems: list[str]
    reported_tools: set[str] = field(default_factory=set)
    incomplete_journeys: set[str] = field(default_factory=set)


def _compile(source: Source, tools: Sequence[ToolSpec] | None) -> _Compiled:
    """The builder and every problem found on the way to it."""
    raw = _read(source)
    document, found, absent = _valid_part(raw)
    if document is None:
        return _Compiled(None, found)
    compiler = DocumentCompiler(document, registry=tools, absent=absent)
    agent = compiler.compile()
    return _Compiled(
        agent, found + compiler.problems, compiler.reported_tools, compiler.incomplete_journeys
    )


def _valid_part(raw: Mapping[str, Any]) -> tuple[AgentDocument | None, list[str], Absent]:
    """The document without the elements that break its schema, and their problems: a broken
    guideline must not hide the problems of the rest of the agent."""
    try:
        return AgentDocument.model_validate(raw), [], Absent()
    except ValidationError as error:
        found = document_problems(error, raw)
        broken = [tuple(detail["loc"]) for detail in error.errors()]
    if any(not loc or loc[0] not in _SECTIONS for loc in broken):
        return None, found, Absent()  # the header (or the document itself) is broken
    pruned: dict[str, Any] = dict(raw)
    left_out: dict[str, set[str]] = {section: set() for section in _SECTIONS}
    for section in {str(loc[0]) for loc in broken}:
        items = raw[section]
        bad = {loc[1] for loc in broken if loc[0] == section and len(loc) > 1}
        if not _is_sequence(items) or not all(isinstance(i, int) for i in bad):
            pruned[section] = []  # the section itself has the wrong shape
            continue
        pruned[section] = [item for i, item in enumerate(items) if i not in bad]
        left_out[section] = {_label(items[i]) for i in bad if isinstance(i, int)}
    try:
        document = AgentDocument.model_validate(pruned)
    except ValidationError:
        return None, found, Absent()
    absent = Absent(
        tools=frozenset(left_out["tools"]),
        guidelines=frozenset(left_out["guidelines"]),
        journeys=frozenset(left_out["journeys"]),
    )
    return document, found, absent


_SECTIONS = (
    "tools",
    "guidelines",
    "journeys",
    "relationships",
    "terms",
    "variables",
    "canned_responses",
)


def _is_sequence(node: Any) -> bool:
    return isinstance(node, list | tuple)


def _label(item: Any) -> str:
    """The id (or a tool's name) by which other elements refer to a left-out element."""
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        for key in ("id", "name"):
            if isinstance(item.get(key), str):
                return str(item[key])
    return ""


def _read(source: Source) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    path = Path(source)
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise InvalidAgentDefinition([f"{path}: unsupported file type; use .yaml, .yml or .json"])
    # Size, alias and nesting limits apply to files as to API bodies (document_text).
    data = parse_document_text(
        path.read_bytes(), "json" if suffix == ".json" else "yaml", str(path)
    )
    if not isinstance(data, Mapping):
        raise InvalidAgentDefinition([f"{path}: expected a mapping with an 'agent' section"])
    return data
