"""The JSON Schema of an agent document (`agent.yaml`), generated from `AgentDocument`.

Published as `docs/agent.schema.json` (regenerate with `waypoint schema -o docs/agent.schema.json`
or `make schema`) so editors can complete and check an agent file; a test keeps the committed
file equal to what this module generates.
"""

from __future__ import annotations

import json
from typing import Any

from engine.authoring.document import AgentDocument

SCHEMA_ID = "https://github.com/waypoint/waypoint/docs/agent.schema.json"


def agent_document_schema() -> dict[str, Any]:
    """The schema of what `load_agent` reads (aliases such as `from`/`to` as written)."""
    schema = AgentDocument.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Waypoint agent document",
        **{key: value for key, value in schema.items() if key != "title"},
    }


def agent_document_schema_text() -> str:
    """The schema as the committed file holds it: sorted keys, two-space indent, final newline."""
    return json.dumps(agent_document_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
