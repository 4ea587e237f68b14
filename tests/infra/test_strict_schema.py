"""Pydantic schemas → OpenAI strict structured-output schemas, and reading nulls back."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from infra.llm.strict_schema import NotStrictCompatible, restore_defaults, strict_json_schema


class Tone(StrEnum):
    FRIENDLY = "friendly"
    FORMAL = "formal"


class Step(BaseModel):
    id: str
    note: str = ""


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Selection(BaseModel):
    step: Step = Field(description="the chosen step")
    alternatives: list[Step]
    previous: Step | None = None
    tone: Tone = Tone.FRIENDLY
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    tree: Node | None = None


def walk(node: Any) -> list[dict[str, Any]]:
    """Every schema object in `node`, for checking rules that hold everywhere."""
    if isinstance(node, dict):
        return [node, *(x for v in node.values() for x in walk(v))]
    if isinstance(node, list):
        return [x for v in node for x in walk(v)]
    return []


def test_every_object_requires_all_its_properties_and_allows_nothing_else() -> None:
    schema = strict_json_schema(Selection)

    objects = [s for s in walk(schema) if s.get("type") == "object"]
    assert len(objects) >= 6
    for obj in objects:
        assert obj["required"] == list(obj["properties"])
        assert obj["additionalProperties"] is False


def test_fields_with_defaults_become_nullable_and_defaults_and_titles_go() -> None:
    properties = strict_json_schema(Selection)["properties"]

    assert properties["tone"] == {
        "anyOf": [{"enum": ["friendly", "formal"], "type": "string"}, {"type": "null"}]
    }
    assert not any("default" in s or "title" in s for s in walk(properties) if "type" in s)


def test_definitions_are_inlined_keeping_descriptions_except_recursive_ones() -> None:
    schema = strict_json_schema(Selection)

    step = schema["properties"]["step"]
    assert step["description"] == "the chosen step" and "properties" in step
    assert list(schema["$defs"]) == ["Node"]  # recursion cannot be inlined
    refs = {s["$ref"] for s in walk(schema) if "$ref" in s}
    assert refs == {"#/$defs/Node"}
    assert all(len(s) == 1 for s in walk(schema) if "$ref" in s)  # no siblings next to $ref


def test_discriminated_unions_become_any_of() -> None:
    pet = strict_json_schema(Selection)["properties"]["pet"]

    assert "oneOf" not in pet and "discriminator" not in pet
    assert [v["properties"]["kind"]["const"] for v in pet["anyOf"]] == ["cat", "dog"]


def test_free_form_fields_are_reported_by_path() -> None:
    class Loose(BaseModel):
        arguments: dict[str, int]
        anything: Any

    with pytest.raises(NotStrictCompatible) as raised:
        strict_json_schema(Loose)

    assert raised.value.problems == [
        "#/properties/arguments: free-form mappings (dict fields) are not allowed",
        "#/properties/anything: unconstrained value (Any) is not allowed",
    ]


def test_nulls_for_defaulted_fields_become_defaults_at_every_depth() -> None:
    answer = {
        "step": {"id": "s1", "note": None},
        "alternatives": [{"id": "s2", "note": None}],
        "previous": None,
        "tone": None,
        "pet": {"kind": "dog", "good": None},
        "tree": {"name": "root", "children": None},
    }

    selection = Selection.model_validate(restore_defaults(answer, Selection))

    assert selection.step.note == "" and selection.alternatives[0].note == ""
    assert selection.previous is None  # nullable: null is a value, kept
    assert selection.tone is Tone.FRIENDLY
    assert selection.pet == Dog(kind="dog", good=True)
    assert selection.tree == Node(name="root", children=[])


def test_nulls_for_required_fields_are_left_for_validation_to_reject() -> None:
    assert restore_defaults({"id": None, "note": None}, Step) == {"id": None}
