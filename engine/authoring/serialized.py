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
    continuous: false                  #   metadata, customer_dependent: true | {customer_action,
    priority_over: [transfer]          #   agent_action}; relations: priority_over, depends_on,
                                       #   entails, disambiguates (ids, or {journey: id})
journeys:
  - id: transfer                       # optional: derived from the title
    title: Money transfer
    conditions: [The customer wants to transfer money]
    requires: [authenticate, balance]  # prerequisite journeys
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.authoring.agent_builder import Agent
from engine.authoring.document import AgentDocument, document_problems
from engine.authoring.document_compiler import DocumentCompiler
from engine.document_text import parse_document_text
from engine.errors import InvalidAgentDefinition
from engine.model import AgentSnapshot

Source = str | os.PathLike[str] | Mapping[str, Any]


def load_agent(source: Source) -> AgentSnapshot:
    """Read an agent document (a `.yaml`/`.yml`/`.json` path, or an already parsed mapping),
    compile and validate it. Raises `InvalidAgentDefinition` listing every problem."""
    return agent_from_document(source).build()


def agent_from_document(source: Source) -> Agent:
    """The builder an agent document compiles to, before `build()`: extend it in Python (add
    tools, guidelines) if some of the agent is better written in code."""
    raw = _read(source)
    try:
        document = AgentDocument.model_validate(raw)
    except ValidationError as error:
        raise InvalidAgentDefinition(document_problems(error, raw)) from None
    return DocumentCompiler(document).compile()


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
