"""docs/agent.schema.json is what `AgentDocument` generates, and it accepts both examples."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from engine.authoring.document_schema import agent_document_schema_text

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "agent.schema.json"


def test_the_committed_schema_equals_the_generated_one() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == agent_document_schema_text(), (
        "docs/agent.schema.json is stale: run `make schema`"
    )


def test_the_schema_accepts_both_examples_and_refuses_a_misspelt_key() -> None:
    schema = json.loads(COMMITTED.read_text(encoding="utf-8"))
    for example in ("banking", "pizza"):
        jsonschema.validate(
            yaml.safe_load((ROOT / "examples" / example / "agent.yaml").read_text()), schema
        )
    broken = {"agent": {"id": "a", "name": "A"}, "guidelines": [{"conditon": "typo"}]}
    assert not jsonschema.Draft202012Validator(schema).is_valid(broken)
