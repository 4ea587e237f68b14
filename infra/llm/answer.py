"""Reading a model's JSON answer (text, or a tool call's decoded input) into the requested pydantic
schema.

Failures raise `LLMOutputInvalid` with a short message meant to be shown to the model in
`TurnLLM`'s repair attempt: what was wrong, where, without pydantic's documentation links.
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from engine.errors import LLMOutputInvalid
from infra.llm.strict_schema import restore_defaults

T = TypeVar("T", bound=BaseModel)

# Some OpenAI-compatible models wrap JSON in a Markdown fence even in JSON mode.
_FENCE = re.compile(r"^```(?:json)?\s*\n?(?P<body>.*?)\n?```$", re.DOTALL)
_MAX_ERRORS = 8


def parse_answer(content: str, schema: type[T]) -> T:
    """Validate `content` (JSON text) against `schema`. Raises `LLMOutputInvalid(raw=content)`."""
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group("body").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMOutputInvalid(
            f"the answer is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            raw=content,
        ) from exc
    return validate_answer(data, schema, raw=content)


def validate_answer(data: object, schema: type[T], *, raw: str) -> T:
    """Validate already-decoded JSON `data` (a tool call's input, a parsed answer) against
    `schema`, nulls of defaulted fields read as absent. Raises `LLMOutputInvalid(raw=raw)`."""
    try:
        return schema.model_validate(restore_defaults(data, schema))
    except ValidationError as exc:
        raise LLMOutputInvalid(
            f"the answer does not match the {schema.__name__} schema: {describe_errors(exc)}",
            raw=raw,
        ) from exc


def describe_errors(exc: ValidationError) -> str:
    """`field.path: message` for the first few errors, e.g. `items.0.score: Field required`."""
    errors = exc.errors(include_url=False)
    parts = [
        f"{'.'.join(str(p) for p in error['loc']) or '(root)'}: {error['msg']}"
        for error in errors[:_MAX_ERRORS]
    ]
    if len(errors) > _MAX_ERRORS:
        parts.append(f"and {len(errors) - _MAX_ERRORS} more")
    return "; ".join(parts)
