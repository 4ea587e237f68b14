"""Collected fields: the typed values a chat step collects, and their one-line shorthand.

    collects={"username": "str", "amount": "decimal>0", "account": "enum:checking|savings",
              "count": "int>=1<=10", "note": "str?", "password": "secret"}

Shorthand grammar: a type (`str`, `int`, `decimal`, `bool`, `date`, `datetime`, `time`, `money`
with an optional currency: `money:USD`), then optional bounds for numbers and amounts (`>x`
exclusive, `>=x`, `<=x`), then an optional `?` for "not required"; or
`enum:choice|choice|…` with an optional trailing `?`; or `secret` (a `str` the engine never
stores nor shows, see `engine.privacy.secrets`), optionally `secret?`. Anything else (a description, a
secret of another type, a text of a given shape) is written as a mapping: `{"type": "str",
"description": "…"}`, `{"type": "int", "secret": True}`, `{"type": "str", "pattern": "\\d{7,10}"}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, get_args

from engine.authoring.construct import construct
from engine.errors import InvalidAgentDefinition
from engine.model import CollectedField, FieldType

FieldSpec = str | Mapping[str, Any]
FieldsSpec = Mapping[str, FieldSpec] | Sequence[CollectedField | Mapping[str, Any]]

_NUMERIC = ("int", "decimal", "money")
_SCALAR = re.compile(
    r"^(?P<type>str|int|decimal|bool|datetime|date|time|money)"
    r"(?::(?P<currency>[A-Za-z]{3}))?"
    r"(?P<bounds>(?:(?:>=|<=|>)-?\d+(?:\.\d+)?)*)"
    r"(?P<optional>\?)?$"
)
_BOUND = re.compile(r"(>=|<=|>)(-?\d+(?:\.\d+)?)")
_ENUM = re.compile(r"^enum:(?P<choices>[^?]*)(?P<optional>\?)?$")
_BOUND_FIELD = {">": "gt", ">=": "ge", "<=": "le"}
_SECRET = re.compile(r"^secret(?P<optional>\?)?$")


def _shorthand_error(name: str, spec: str, reason: str) -> InvalidAgentDefinition:
    types = ", ".join(t for t in get_args(FieldType) if t != "enum")
    return InvalidAgentDefinition(
        [
            f"field '{name}': cannot read {spec!r}: {reason} "
            f"(write a type — {types} — with optional bounds like 'decimal>0', "
            "or 'enum:a|b'; a trailing '?' makes it optional)"
        ]
    )


def parse_field_shorthand(name: str, spec: str) -> CollectedField:
    """`parse_field_shorthand("amount", "decimal>0")` → `CollectedField(type="decimal", gt=0)`."""
    text = spec.strip()
    secret = _SECRET.match(text)
    if secret:
        return CollectedField(name=name, type="str", secret=True, required=not secret["optional"])
    enum = _ENUM.match(text)
    if enum:
        choices = tuple(c.strip() for c in enum["choices"].split("|") if c.strip())
        if not choices:
            raise _shorthand_error(name, spec, "an enum needs choices")
        return CollectedField(
            name=name, type="enum", choices=choices, required=not enum["optional"]
        )
    scalar = _SCALAR.match(text.replace(" ", ""))
    if not scalar:
        raise _shorthand_error(name, spec, "unknown type or syntax")
    bounds: dict[str, float] = {}
    for operator, number in _BOUND.findall(scalar["bounds"]):
        key = _BOUND_FIELD[operator]
        if key in bounds:
            raise _shorthand_error(name, spec, f"the bound '{operator}' is given twice")
        bounds[key] = float(number)
    if bounds and scalar["type"] not in _NUMERIC:
        raise _shorthand_error(name, spec, "only int, decimal and money fields take bounds")
    if scalar["currency"] and scalar["type"] != "money":
        raise _shorthand_error(name, spec, "only a money field takes a currency ('money:USD')")
    currency = {"currency": scalar["currency"].upper()} if scalar["currency"] else {}
    return CollectedField.model_validate(
        {
            "name": name,
            "type": scalar["type"],
            "required": not scalar["optional"],
            **bounds,
            **currency,
        }
    )


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def field_shorthand(field: CollectedField) -> str | None:
    """The shorthand that parses back to exactly `field`, or None if it has no such form."""
    optional = "" if field.required else "?"
    if field.description:
        return None
    if field.secret:
        unbounded = (field.gt, field.ge, field.le) == (None, None, None)
        plain = field.type == "str" and not field.choices and unbounded
        return f"secret{optional}" if plain else None
    if field.type == "enum":
        expressible = (
            field.choices
            and all(c == c.strip() and c and not set(c) & {"|", "?"} for c in field.choices)
            and (field.gt, field.ge, field.le) == (None, None, None)
        )
        return f"enum:{'|'.join(field.choices)}{optional}" if expressible else None
    if field.choices or field.pattern:
        return None
    bounds = [
        f"{operator}{_number(value)}"
        for operator, value in ((">", field.gt), (">=", field.ge), ("<=", field.le))
        if value is not None
    ]
    if bounds and field.type not in _NUMERIC:
        return None
    currency = f":{field.currency}" if field.currency else ""
    return f"{field.type}{currency}{''.join(bounds)}{optional}"


def _named_field(name: str, spec: FieldSpec) -> CollectedField:
    if isinstance(spec, str):
        return parse_field_shorthand(name, spec)
    if isinstance(spec, Mapping):
        if "name" in spec:
            raise InvalidAgentDefinition(
                [f"field '{name}': the key already names the field; drop 'name' inside"]
            )
        return construct(CollectedField, f"field '{name}'", name=name, **spec)
    raise InvalidAgentDefinition(
        [f"field '{name}': expected a shorthand string or a mapping, got {type(spec).__name__}"]
    )


def collected_fields(spec: FieldsSpec | None) -> tuple[CollectedField, ...]:
    """Read the `collects=` argument of a chat state: a mapping of name → shorthand or mapping,
    or a sequence of `CollectedField` (or mappings with a `name`)."""
    if spec is None:
        return ()
    if isinstance(spec, Mapping):
        return tuple(_named_field(str(name), value) for name, value in spec.items())
    if isinstance(spec, str):
        raise InvalidAgentDefinition(
            ["collects: expected a mapping of field name → type, e.g. {'amount': 'decimal>0'}"]
        )
    fields: list[CollectedField] = []
    for index, item in enumerate(spec):
        if isinstance(item, CollectedField):
            fields.append(item)
        elif isinstance(item, Mapping):
            fields.append(construct(CollectedField, f"collects[{index}]", **item))
        else:
            raise InvalidAgentDefinition(
                [f"collects[{index}]: expected a CollectedField or a mapping with a 'name'"]
            )
    return tuple(fields)


def describe_fields(fields: Sequence[CollectedField]) -> str:
    """`("destination_account", "amount")` → `"the destination account and the amount"`."""
    names = [f"the {f.name.replace('_', ' ')}" for f in fields]
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"
