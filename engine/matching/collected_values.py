"""Collected values: what the customer gave for the fields a journey step collects, typed.

The node selector's answer carries values in the customer's terms (`CollectedItem`);
`coerce_collected` turns them into typed, validated values (`engine.values.types`: numbers as
`int` / `Decimal`, dates as `date`, money as `Money`, enum choices in their canonical spelling)
and says what it dropped and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from engine.model import CollectedField, Journey
from engine.values.money import Money
from engine.values.types import coerce


class CollectedItem(BaseModel):
    """A value the customer gave for a field a step collects, in the customer's terms."""

    model_config = ConfigDict(coerce_numbers_to_str=True)
    name: str
    value: str

    @field_validator("value", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        # models often answer `true` or `300` for a string field; the text is what we validate
        if isinstance(value, bool):
            return "true" if value else "false"
        return value


_NOT_GIVEN = frozenset({"", "null", "none", "n/a", "unknown"})


def coerce_value(field: CollectedField, raw: str) -> Any:
    """The typed value of `raw` for `field` (`engine.values.types`), within its bounds; raises
    ValueError saying what is wrong."""
    value = coerce(field.shape, raw)
    number = value.amount if isinstance(value, Money) else value
    if isinstance(number, int | Decimal) and not isinstance(number, bool):
        _check_bounds(field, Decimal(number))
    return value


def _check_bounds(field: CollectedField, number: Decimal) -> None:
    if field.gt is not None and not number > Decimal(str(field.gt)):
        raise ValueError(f"must be greater than {bound_text(field.gt)}")
    if field.ge is not None and not number >= Decimal(str(field.ge)):
        raise ValueError(f"must be at least {bound_text(field.ge)}")
    if field.le is not None and not number <= Decimal(str(field.le)):
        raise ValueError(f"must be at most {bound_text(field.le)}")


def bound_text(value: float) -> str:
    """A bound as a person writes it: `300`, not `300.0`."""
    return str(int(value)) if float(value).is_integer() else str(value)


def coerce_collected(
    journey: Journey, items: Sequence[CollectedItem], node_ids: Iterable[str]
) -> tuple[dict[str, Any], list[str]]:
    """Validate the model's values against the fields of the given steps.

    Field names match case-insensitively, enum choices too (the canonical choice is kept);
    values are typed (`engine.values.types`). Values for unknown fields, for steps not
    in `node_ids`, or that fail validation are dropped with a note. A later item for the same
    field wins (a correction)."""
    values, _, notes = coerce_items(journey, items, node_ids)
    return values, notes


def coerce_items(
    journey: Journey, items: Sequence[CollectedItem], node_ids: Iterable[str]
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """`coerce_collected`, also returning the rejected field names (→ reason): answer
    verification holds the walk at a step whose value failed, so the agent asks again."""
    allowed = set(node_ids)
    owners: dict[str, tuple[str, CollectedField]] = {}
    for node in journey.nodes:
        for fld in node.collects:
            owners.setdefault(fld.name.lower(), (node.id, fld))
    values: dict[str, Any] = {}
    rejected: dict[str, str] = {}
    notes: list[str] = []
    for item in items:
        owner = owners.get(item.name.strip().lower())
        if owner is None:
            notes.append(f"ignored a value for unknown field {item.name!r}")
            continue
        node_id, fld = owner
        if node_id not in allowed:
            notes.append(f"ignored {fld.name!r}: the journey has not reached its step")
            continue
        if fld.type != "str" and item.value.strip().lower() in _NOT_GIVEN:
            continue  # the model filled the slot with "nothing": not an answer, not an error
        try:
            values[fld.name] = coerce_value(fld, item.value)
            rejected.pop(fld.name, None)
        except ValueError as exc:
            values.pop(fld.name, None)
            rejected[fld.name] = str(exc)
            notes.append(f"rejected {fld.name}={item.value!r}: {exc}")
    return values, rejected, notes
