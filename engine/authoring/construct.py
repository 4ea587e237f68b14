"""Building model objects from author input, with errors an author can act on."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from engine.errors import InvalidAgentDefinition

M = TypeVar("M", bound=BaseModel)


def describe_validation_error(error: ValidationError) -> list[str]:
    """One line per pydantic error: `"criticality: input should be 'low', 'medium' or 'high'"`."""
    lines: list[str] = []
    for detail in error.errors():
        where = ".".join(str(part) for part in detail["loc"])
        message = detail["msg"][:1].lower() + detail["msg"][1:]
        lines.append(f"{where}: {message}" if where else message)
    return lines


def construct(model: type[M], where: str, **data: Any) -> M:
    """`model(**data)`, but an invalid value raises `InvalidAgentDefinition` naming `where`."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InvalidAgentDefinition(
            [f"{where}: {line}" for line in describe_validation_error(error)]
        ) from None
