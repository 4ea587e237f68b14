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
any text, since the customer typed it inside a sentence and a model may echo it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from engine.model import AgentSnapshot
from engine.tools.spec import ToolSpec
from engine.values.types import written

MASK = "•••"

# A secret shorter than this is masked only where its name says so, never inside free text:
# masking every "7" or "ab" of a conversation would destroy it and protect little.
MIN_MASKED_CHARS = 3

# Masking touches text only. Under these keys the engine keeps ids — of events, senders, calls,
# turns, sessions, journeys — and names it routes by: never masked, never searched for a secret
# (a masked event id answers a message twice; a masked sender loses their login and reply).
IDENTITY_KEYS = frozenset(
    {
        "id",
        "sender",
        "by",
        "choice",
        "channel_event_id",
        "call_id",
        "ticket_id",
        "source_id",
        "turn_id",
        "session_id",
        "agent_id",
        "customer_id",
        "guideline_id",
        "journey_id",
        "node_id",
        "reply_to",
        "tool",
        "status",
        "mode",
        "agent_version",
        "published_version",
    }
)


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
    """The secret names of an agent and the secret values seen in this turn (memory only)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

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
        """The secret values of this turn, in clear: memory only (the session keeps their
        keyed digests, `engine.privacy.digests`)."""
        return frozenset(self._values)

    def remember(self, value: Any) -> None:
        """A secret value of this turn: it will be masked wherever it appears in text."""
        text = str(value).strip() if value is not None else ""
        if len(text) >= MIN_MASKED_CHARS and text not in self._values:
            self._values.add(text)
            # Longest first, so that a secret containing another is masked whole.
            alternatives = "|".join(
                re.escape(v) for v in sorted(self._values, key=len, reverse=True)
            )
            # Not inside a longer word or number: "monkey" is masked in "pw: monkey", not the
            # customer's own "monkeys"; case is ignored, a model may have changed it.
            self._pattern = re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])", re.IGNORECASE)

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
        """Any JSON-like value (dicts, lists, strings) with the secrets of this turn masked, in
        values and by name (a dict key that is a secret name has its value masked); ids are
        left as they are (`IDENTITY_KEYS`)."""
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            return {k: self._scrub_item(k, v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.scrub(v) for v in value)
        return value

    def _scrub_item(self, key: Any, value: Any) -> Any:
        if isinstance(key, str) and self.is_secret(key):
            return MASK
        return value if key in IDENTITY_KEYS else self.scrub(value)


def texts_in(value: Any) -> Iterator[str]:
    """Every text of a JSON-like value but its ids (`IDENTITY_KEYS`): what may quote a secret."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key not in IDENTITY_KEYS:
                yield from texts_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from texts_in(item)
