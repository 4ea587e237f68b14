"""Pydantic model → a JSON schema OpenAI accepts for structured outputs with `"strict": true`.

Strict mode accepts a subset of JSON Schema. What pydantic emits, and what we do with it:
- every object must list all its properties in `required` and set `additionalProperties: false`;
  a field pydantic treats as optional (it has a default) becomes nullable instead (`anyOf` with
  `{"type": "null"}`), and `restore_defaults` turns a null the model sent back into "absent" so
  pydantic applies the field's default;
- a `$ref` may not carry sibling keywords (pydantic puts `description` next to it), and several
  OpenAI-compatible servers handle `$ref` poorly anyway, so non-recursive definitions are inlined;
  only recursive ones stay under `$defs`;
- `oneOf` (discriminated unions) becomes `anyOf`; `discriminator`, `title`, `default`, `examples`
  and unsupported `format`s are dropped (titles and defaults only cost prompt tokens).
Schemas strict mode cannot express (`dict[str, X]`, `Any`, multi-`allOf`) raise
`NotStrictCompatible`, naming the offending paths; the adapter then sends a non-strict schema.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

JsonSchema = dict[str, Any]

# Formats the structured-outputs docs list as supported; others are dropped, not rejected.
_SUPPORTED_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_DROPPED_KEYWORDS = frozenset({"title", "default", "examples", "discriminator", "$defs"})
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
_NULL: JsonSchema = {"type": "null"}
_DEFS_PREFIX = "#/$defs/"


class NotStrictCompatible(ValueError):
    """The model's schema uses constructs strict structured outputs cannot express."""

    def __init__(self, model: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"schema {model} cannot be sent with strict=true: " + "; ".join(problems))


@functools.lru_cache(maxsize=256)
def pydantic_schema(model: type[BaseModel]) -> JsonSchema:
    """pydantic's own (validation-mode) JSON schema, cached per model. Do not mutate."""
    return model.model_json_schema()


@functools.lru_cache(maxsize=256)
def strict_json_schema(model: type[BaseModel]) -> JsonSchema:
    """The strict-compatible schema for `model`, cached per model. Do not mutate.

    Raises `NotStrictCompatible` listing every unsupported construct."""
    source = copy.deepcopy(pydantic_schema(model))
    converter = _StrictConverter(source.get("$defs", {}))
    result = converter.convert(source, "#")
    if result.get("type") != "object":
        converter.problems.append("#: the root must be an object")
    if converter.recursive_used:
        result["$defs"] = {
            name: converter.convert(source["$defs"][name], f"#/$defs/{name}")
            for name in sorted(converter.recursive_used)
        }
    if converter.problems:
        raise NotStrictCompatible(model.__name__, converter.problems)
    return result


class _StrictConverter:
    def __init__(self, defs: Mapping[str, JsonSchema]) -> None:
        self.defs = defs
        self.recursive = _recursive_definitions(defs)
        self.recursive_used: set[str] = set()
        self.problems: list[str] = []

    def convert(self, node: JsonSchema, path: str) -> JsonSchema:
        if not set(node) - _ANNOTATIONS:
            self.problems.append(f"{path}: unconstrained value (Any) is not allowed")
            return {}
        if "$ref" in node:
            return self._convert_ref(node, path)
        all_of = node.get("allOf")
        if all_of is not None:
            if len(all_of) != 1:
                self.problems.append(f"{path}: allOf with several schemas is not supported")
                return {}
            merged = {k: v for k, v in node.items() if k != "allOf"}
            return self.convert({**all_of[0], **merged}, path)

        out: JsonSchema = {}
        for key, value in node.items():
            if key in _DROPPED_KEYWORDS:
                continue
            if key == "format" and value not in _SUPPORTED_FORMATS:
                continue
            if key in ("anyOf", "oneOf"):
                out["anyOf"] = self._convert_variants(value, path)
            elif key == "properties":
                out["properties"] = self._convert_properties(node, path)
            elif key == "items" and isinstance(value, dict):
                out["items"] = self.convert(value, f"{path}/items")
            elif key == "prefixItems":
                out[key] = [self.convert(v, f"{path}/prefixItems/{i}") for i, v in enumerate(value)]
            elif key in ("additionalProperties", "required"):
                continue  # set below for objects
            else:
                out[key] = value
        if out.get("type") == "object" or "properties" in node:
            self._close_object(node, out, path)
        return out

    def _convert_ref(self, node: JsonSchema, path: str) -> JsonSchema:
        ref = node["$ref"]
        if not ref.startswith(_DEFS_PREFIX):
            self.problems.append(f"{path}: unsupported $ref {ref!r}")
            return {}
        name = ref.removeprefix(_DEFS_PREFIX)
        if name in self.recursive:
            # Recursion cannot be inlined; a bare $ref is allowed (siblings such as a description
            # are not, so they are dropped).
            self.recursive_used.add(name)
            return {"$ref": ref}
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return self.convert({**self.defs[name], **siblings}, path)

    def _convert_variants(self, variants: list[JsonSchema], path: str) -> list[JsonSchema]:
        out: list[JsonSchema] = []
        for i, variant in enumerate(variants):
            converted = self.convert(variant, f"{path}/anyOf/{i}")
            # Flatten nested unions (an optional union would otherwise nest anyOf in anyOf).
            nested = converted.get("anyOf") if len(converted) == 1 else None
            for item in nested or [converted]:
                if item not in out:
                    out.append(item)
        return out

    def _convert_properties(self, node: JsonSchema, path: str) -> JsonSchema:
        required = set(node.get("required", ()))
        properties: JsonSchema = {}
        for name, schema in node["properties"].items():
            converted = self.convert(schema, f"{path}/properties/{name}")
            if name not in required and not allows_null(converted, {}):
                converted = _nullable(converted)
            properties[name] = converted
        return properties

    def _close_object(self, node: JsonSchema, out: JsonSchema, path: str) -> None:
        extra = node.get("additionalProperties")
        if extra not in (None, False):
            self.problems.append(f"{path}: free-form mappings (dict fields) are not allowed")
        elif "properties" not in node:
            self.problems.append(f"{path}: an object without declared properties is not allowed")
        out["required"] = list(out.get("properties", {}))
        out["additionalProperties"] = False


def _nullable(schema: JsonSchema) -> JsonSchema:
    """`schema` or null; a description moves to the wrapper so the model still sees it."""
    if list(schema) == ["anyOf"]:
        return {"anyOf": [*schema["anyOf"], _NULL]}
    inner = {k: v for k, v in schema.items() if k != "description"}
    wrapper: JsonSchema = {"anyOf": [inner, _NULL]}
    if "description" in schema:
        wrapper["description"] = schema["description"]
    return wrapper


def _recursive_definitions(defs: Mapping[str, JsonSchema]) -> set[str]:
    """Names of the definitions that can reach themselves through `$ref`s."""
    edges = {name: _refs_in(schema) for name, schema in defs.items()}

    def reaches(start: str, target: str) -> bool:
        seen: set[str] = set()
        stack = list(edges.get(start, ()))
        while stack:
            name = stack.pop()
            if name == target:
                return True
            if name not in seen:
                seen.add(name)
                stack.extend(edges.get(name, ()))
        return False

    return {name for name in defs if reaches(name, name)}


def _refs_in(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = set()
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX):
            found.add(ref.removeprefix(_DEFS_PREFIX))
        for value in node.values():
            found |= _refs_in(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs_in(v) for v in node)) if node else set()
    return set()


# -- reading answers back ------------------------------------------------------------------------


def allows_null(schema: JsonSchema, defs: Mapping[str, JsonSchema]) -> bool:
    """Whether `null` is a valid value for `schema` (an empty schema allows anything)."""
    schema = _resolve(schema, defs)
    if not schema:
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    variants = schema.get("anyOf") or schema.get("oneOf") or []
    return any(allows_null(v, defs) for v in variants)


def restore_defaults(data: Any, model: type[BaseModel]) -> Any:
    """Drop the nulls the model sent for optional, non-nullable fields, so pydantic fills in their
    defaults. Strict mode made such fields nullable (the model must send every key); a null there
    means "not given". Ambiguous unions are left alone: validation then reports the problem."""
    root = pydantic_schema(model)
    return _restore(data, root, root.get("$defs", {}))


def _restore(data: Any, schema: JsonSchema, defs: Mapping[str, JsonSchema]) -> Any:
    schema = _resolve(schema, defs)
    if isinstance(data, dict):
        if "properties" in schema:
            return _restore_object(data, schema, defs)
        candidates = [
            v for v in _variants(schema, defs) if "properties" in v and _could_be(data, v, defs)
        ]
        if len(candidates) == 1:
            return _restore_object(data, candidates[0], defs)
        return data
    if isinstance(data, list):
        arrays = [v for v in [schema, *_variants(schema, defs)] if isinstance(v.get("items"), dict)]
        if len(arrays) == 1:
            return [_restore(item, arrays[0]["items"], defs) for item in data]
    return data


def _restore_object(
    data: dict[str, Any], schema: JsonSchema, defs: Mapping[str, JsonSchema]
) -> dict[str, Any]:
    properties: JsonSchema = schema["properties"]
    required = set(schema.get("required", ()))
    out: dict[str, Any] = {}
    for key, value in data.items():
        field_schema = properties.get(key)
        if field_schema is None:
            out[key] = value
        elif value is None and key not in required and not allows_null(field_schema, defs):
            continue
        else:
            out[key] = _restore(value, field_schema, defs)
    return out


def _variants(schema: JsonSchema, defs: Mapping[str, JsonSchema]) -> list[JsonSchema]:
    return [_resolve(v, defs) for v in schema.get("anyOf") or schema.get("oneOf") or []]


def _could_be(data: dict[str, Any], schema: JsonSchema, defs: Mapping[str, JsonSchema]) -> bool:
    """Cheap pre-check for picking a union member: keys are declared and constants agree."""
    properties: JsonSchema = schema["properties"]
    if not set(data) <= set(properties):
        return False
    required = set(schema.get("required", ()))
    for key, value in data.items():
        field_schema = _resolve(properties[key], defs)
        if value is None and key not in required:
            continue  # a null for an optional constant means "the default"
        if "const" in field_schema and field_schema["const"] != value:
            return False
    return True


def _resolve(schema: JsonSchema, defs: Mapping[str, JsonSchema]) -> JsonSchema:
    """Follow `$ref` (siblings win) and unwrap single-member `allOf`."""
    while True:
        if "$ref" in schema and schema["$ref"].startswith(_DEFS_PREFIX):
            target = defs.get(schema["$ref"].removeprefix(_DEFS_PREFIX), {})
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        elif isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            schema = {**schema["allOf"][0], **rest}
        else:
            return schema
