"""The engine's own lines in the customer's language: Waypoint's message catalogs and an agent's
overrides.

Every line the engine writes itself, never the model — the confirmation line and its buttons,
what did not run, the fallback reply, handoff notices, the notice of an ended journey, a channel's
"choose an option" — is a key of a message catalog: `engine/language/catalogs/<tag>.yaml`, one
per shipped language (`engine.language.tags.SHIPPED`), English the reference every other has the
keys of. Code inserts the values under named placeholders, `{{name}}`, and never assembles
grammar itself:

- a value that is a list is joined the language's way (its `list_separator` and `list_and`
  lines: "a, b and c", "a、b和c");
- a placeholder may ask for a form of its value: `{{action|lower_first}}` (the first letter in
  lower case, for a phrase placed mid-sentence in English) or `{{journey|lower}}`.

`Lines` holds one agent's lines: its overrides (`AgentConfig.messages`, language → key → line)
before the shipped catalogs. A line is looked up in the asked language, then in the agent's
default language, then in English; a tag without a catalog of its own reads the shipped catalog
of its language ("es-MX" → "es", "pt-PT" → "pt-BR").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from engine.language.tags import SHIPPED, base

CATALOGS = Path(__file__).with_name("catalogs")
REFERENCE = "en"  # the catalog that defines the keys and their placeholders

_PLACEHOLDER = re.compile(r"{{\s*(\w+)\s*(?:\|\s*(\w+)\s*)?}}")

# The forms a placeholder may ask for: `{{name|form}}`.
FORMS: Mapping[str, Callable[[str], str]] = MappingProxyType(
    {
        "lower_first": lambda text: text[:1].lower() + text[1:],
        "lower": str.lower,
    }
)

Value = object  # str, or a sequence of str (joined per language), or anything str() writes


class Say(Protocol):
    """A line in one language (the turn's): `say("declined", action=...)`."""

    def __call__(self, key: str, /, **values: Value) -> str: ...


class UnknownLine(KeyError):
    """No catalog has this key: a typo in code, or a line not yet in the English catalog."""


# --------------------------------------------------------------------------------------------------
# Shipped catalogs


@cache
def shipped(tag: str) -> Mapping[str, str]:
    """The lines of the shipped catalog `tag` (one of `SHIPPED`), read once per process — on the
    first line a container writes, not on import. A catalog written as every shipped one is
    (`read_flat_catalog`) is read without PyYAML, whose import would cost a cold turn ≈ 17 ms;
    anything else is read by YAML's safe loader."""
    if tag not in SHIPPED:
        raise ValueError(f"no catalog ships for {tag!r}; shipped: {', '.join(SHIPPED)}")
    path = CATALOGS / f"{tag}.yaml"
    text = path.read_text(encoding="utf-8")
    data: object = read_flat_catalog(text)
    if data is None:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(text, Loader=loader)  # a safe loader
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"{path}: a catalog maps each key to one line of text")
    return MappingProxyType(data)


# A line of a flat catalog: a key at the start of the line, one space, a double-quoted value
# holding only what a JSON string may hold (`\\`, `\"` and the escapes JSON shares with YAML).
_FLAT_LINE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*): ("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*")')
# Plain keys YAML reads as something else than text (booleans, null): left to YAML to refuse.
_NOT_TEXT_KEYS = frozenset(
    f(word)
    for word in ("yes", "no", "true", "false", "on", "off", "null")
    for f in (str.lower, str.title, str.upper)
)


def read_flat_catalog(text: str) -> dict[str, str] | None:
    """The key → line mapping of a catalog written as the shipped ones are — comment lines,
    blank lines, and `key: "line"` lines — exactly as YAML's safe loader reads it; None when any
    line has another form (an inline comment, a YAML-only escape, a nested key, a repeated key):
    YAML reads those."""
    data: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _FLAT_LINE.fullmatch(line)
        if match is None or match.group(1) in data or match.group(1) in _NOT_TEXT_KEYS:
            return None
        data[match.group(1)] = json.loads(match.group(2))
    return data


def catalog_tag(tag: str) -> str | None:
    """The shipped catalog that writes `tag`'s lines: its own, else its language's (the first
    shipped with the same base language); None when Waypoint ships none for it."""
    if tag in SHIPPED:
        return tag
    return next((s for s in SHIPPED if base(s) == base(tag)), None)


def keys() -> tuple[str, ...]:
    """Every line the engine writes, in the reference catalog's order."""
    return tuple(shipped(REFERENCE))


def placeholders(text: str) -> frozenset[str]:
    """The names of a line's placeholders, without their forms: {"action", "error"}."""
    return frozenset(m.group(1) for m in _PLACEHOLDER.finditer(text))


def unknown_forms(text: str) -> list[str]:
    """The forms a line asks for that do not exist (`{{action|upper}}` → ["upper"])."""
    return [
        m.group(2) for m in _PLACEHOLDER.finditer(text) if m.group(2) and m.group(2) not in FORMS
    ]


# --------------------------------------------------------------------------------------------------
# One agent's lines


class Lines:
    """The engine's lines for one agent: `overrides` (language → key → line) over the shipped
    catalogs; `default` is the agent's default language."""

    def __init__(
        self, overrides: Mapping[str, Mapping[str, str]] | None = None, default: str = REFERENCE
    ) -> None:
        self.overrides = overrides or {}
        self.default = default

    def template(self, key: str, language: str) -> str:
        """The line `key` as written, before its values: in `language`, else in the agent's
        default language, else in English."""
        if key not in shipped(REFERENCE):
            raise UnknownLine(key)
        for tag in dict.fromkeys((language, self.default, REFERENCE)):
            found = self._own_or_shipped(key, tag)
            if found is not None:
                return found
        raise UnknownLine(key)  # (unreachable: the reference catalog has every key)

    def line(self, key: str, language: str, /, **values: Value) -> str:
        """The line `key` in `language`, its placeholders filled with `values` (a list joined
        the language's way)."""
        return self._render(self.template(key, language), language, values)

    def joined(self, items: Sequence[str], language: str) -> str:
        """`items` as a list reads in `language`: "a, b and c", "a、b和c"; "" for none."""
        items = [str(i) for i in items]
        if len(items) <= 1:
            return "".join(items)
        separator = self.template("list_separator", language)
        head = separator.join(items[:-1])
        return self._render(
            self.template("list_and", language), language, {"head": head, "last": items[-1]}
        )

    def speaker(self, language: str) -> Say:
        """`line`, bound to one language."""

        def say(key: str, /, **values: Value) -> str:
            return self.line(key, language, **values)

        return say

    def missing(self, language: str) -> list[str]:
        """The keys neither the agent nor a shipped catalog gives in `language` itself (they
        would be read in the default language, or in English)."""
        return [k for k in keys() if self._own_or_shipped(k, language) is None]

    def _own_or_shipped(self, key: str, tag: str) -> str | None:
        own = self.overrides.get(tag, {}).get(key)
        if own is not None:
            return own
        shipped_tag = catalog_tag(tag)
        return shipped(shipped_tag).get(key) if shipped_tag is not None else None

    def _render(self, text: str, language: str, values: Mapping[str, Value]) -> str:
        def fill(match: re.Match[str]) -> str:
            name, form = match.group(1), match.group(2)
            if name not in values:
                raise KeyError(f"the line {text!r} needs a value for {{{{{name}}}}}")
            value = values[name]
            written = (
                self.joined(list(value), language)
                if isinstance(value, Sequence) and not isinstance(value, str)
                else str(value)
            )
            return FORMS[form](written) if form in FORMS else written

        return _PLACEHOLDER.sub(fill, text)


SHIPPED_LINES = Lines()


def line(key: str, language: str, /, **values: Value) -> str:
    """The shipped line `key` in `language` (else English), its placeholders filled."""
    return SHIPPED_LINES.line(key, language, **values)
