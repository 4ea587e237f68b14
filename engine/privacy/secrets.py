"""Secret values: declared by the author, used by the tool that needs them, kept nowhere else.

A collected field (`collects: {password: secret}`) or a tool parameter (`secret: true`,
`@tool(secret=("password",))`) can be declared secret. Values flow between collected fields and
tool parameters by name, so a name declared secret on either side is secret for the whole agent:
a password collected by a `str` field and passed to a `secret` parameter is masked everywhere.

Only declared names are secret — nothing is guessed from a name (`toppings` is not a PIN).

Within one turn the clear value lives in memory only (`TurnSecrets`): it fills the tool's
argument and grounds it against the customer's message. Everything the turn writes — events
(the customer's own message where it was typed included), collected values, the pending
confirmation, the trace — is masked: by name where a structure names the value, and by value in
any text, since the customer typed it inside a sentence and a model may echo it. Only text is
masked, never the engine's ids (`engine.privacy.text_fields`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from engine.model import AgentSnapshot
from engine.tools.spec import ToolSpec
from engine.values.types import written

MASK = "•••"

# A secret shorter than this is masked only where its name says so, never inside free text:
# masking every "7" or "ab" of a conversation would destroy it and protect little.
MIN_MASKED_CHARS = 3


def declared_secret_names(agent: AgentSnapshot) -> frozenset[str]:
    """Names declared secret anywhere in the agent: collected fields and tool parameters."""
    names = {
        field.name
        for journey in agent.journeys
        for node in journey.nodes
        for field in node.collects
        if field.secret
    }
    names |= {p.name for tool in agent.tools for p in tool.parameters if p.secret}
    return frozenset(names)


class TurnSecrets:
    """The secret names of an agent and the secret values seen in this turn (memory only).

    `plain`: the values the session holds in clear for fields that are not secret (the
    username). A secret value equal to one of them — the username typed again at the password
    step, and read as the password — is masked where it was given as the secret, in this turn,
    but never where it was given as the plain value (`beyond_plain`), and the session keeps no
    digest of it: the customer can still give their username."""

    def __init__(self, names: Iterable[str], *, plain: Iterable[Any] = ()) -> None:
        self.names = frozenset(names)
        self._plain = frozenset(str(v).strip().casefold() for v in plain)
        self._values: set[str] = set()
        self._suspected: set[str] = set()  # masked this turn, but no known secret
        self._pattern: re.Pattern[str] | None = None
        self._beyond_plain: TurnSecrets | None = None

    def is_secret(self, name: str) -> bool:
        return name in self.names

    def is_secret_parameter(self, spec: ToolSpec, name: str) -> bool:
        return self.is_secret(name) or any(p.name == name and p.secret for p in spec.parameters)

    @property
    def seen(self) -> bool:
        """Whether this turn handled any secret value (there is text to scrub)."""
        return bool(self._values)

    @property
    def values(self) -> frozenset[str]:
        """The known secret values of this turn, in clear: memory only (the session keeps their
        keyed digests, `engine.privacy.digests`). Not those only suspected (`remember`), nor
        those a plain field holds in clear (the class's docstring)."""
        return frozenset(
            v for v in self._values - self._suspected if v.casefold() not in self._plain
        )

    def beyond_plain(self) -> TurnSecrets:
        """These secrets without the values a plain field of the session holds in clear: how
        they mask what was written before this turn (a value equal to the username was given
        there as the username) and the plain fields' own values."""
        if self._beyond_plain is None:
            other = TurnSecrets(self.names)
            for value in self._values:
                if value.casefold() not in self._plain:
                    other.remember(value, known=value not in self._suspected)
            self._beyond_plain = other
        return self._beyond_plain

    def remember(self, value: Any, *, known: bool = True) -> None:
        """A secret value of this turn: it will be masked wherever it appears in text.

        `known=False`: a value that may be a secret but was given for no secret field (a value
        taken from an answer to a password question that held no recognised secret). It is
        masked in this turn all the same, but it is no known secret: the session keeps no
        digest of it, so it is not masked when typed again in a later turn."""
        text = str(value).strip() if value is not None else ""
        if len(text) < MIN_MASKED_CHARS:
            return
        if known:
            if text in self._suspected:
                self._suspected.discard(text)
                self._beyond_plain = None
        elif text not in self._values:
            self._suspected.add(text)
        if text not in self._values:
            self._values.add(text)
            self._pattern = _pattern_of(self._values)
            self._beyond_plain = None

    def mask_named(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """`values` with the value of every secret name masked (the others unchanged)."""
        return {k: MASK if self.is_secret(k) else v for k, v in values.items()}

    def mask_arguments(self, spec: ToolSpec | None, arguments: Mapping[str, Any]) -> dict[str, str]:
        """Tool arguments as recorded in events and traces: text, secret ones masked."""
        return {
            k: MASK
            if (self.is_secret_parameter(spec, k) if spec else self.is_secret(k))
            else self.scrub_text(written(v))
            for k, v in arguments.items()
        }

    def scrub_text(self, text: str) -> str:
        """`text` with every secret value of this turn replaced by the mask."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def scrub(self, value: Any) -> Any:
        """A structure a tool or a model wrote (a result, arguments, collected values, a parsed
        answer: dicts, lists, strings) with the secrets of this turn masked, in values and by
        name (a dict key that is a secret name has its value masked). Never the engine's own
        records: an event or a trace is masked by its text fields (`engine.privacy.text_fields`)."""
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            return {
                k: MASK if isinstance(k, str) and self.is_secret(k) else self.scrub(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return type(value)(self.scrub(v) for v in value)
        return value


def typed_in(value: Any, texts: Iterable[str]) -> bool:
    """Whether `value` stands in one of `texts` where masking it would find it (on its own,
    case ignored, at least `MIN_MASKED_CHARS` long): whether the customer typed it there."""
    text = str(value).strip() if value is not None else ""
    if len(text) < MIN_MASKED_CHARS:
        return False
    pattern = _pattern_of({text})
    return any(pattern.search(t) for t in texts if t)


def _pattern_of(values: Iterable[str]) -> re.Pattern[str]:
    # Longest first, so that a secret containing another is masked whole.
    alternatives = "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))
    # Not inside a longer word or number: "monkey" is masked in "pw: monkey", not the
    # customer's own "monkeys"; case is ignored, a model may have changed it.
    return re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])", re.IGNORECASE)
