"""What a value is for: a `Slot` is a field to fill (a journey field or a tool parameter).

Its *kind* is the type the engine coerces to (text, int, number, bool, enum, date). Its *role* is
read from its type and name: an `account_id` wants a token with digits, an `amount` wants a number
(best one with a currency sign), a `symbol` an upper-case ticker, an enum one of its options, a
bool a yes / no. Its *direction* and *cues* are the words that point at it in a customer's
message ("to account 123", "password is …"). `infra.offline.values` finds the values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infra.offline.language import word_set

TEXT, INT, NUMBER, BOOL, ENUM, DATE = "text", "int", "number", "bool", "enum", "date"

_ID_WORDS = word_set("id ids number no num code ref reference iban zip postcode postal")
_MONEY_WORDS = word_set(
    "amount price sum total cost fee budget balance payment value deposit withdrawal"
)
_SECRET_WORDS = word_set("password passcode pwd pin otp secret passphrase")
_SINGLE_TOKEN_WORDS = word_set("username user login handle nickname alias") | _SECRET_WORDS
_EXTRA_CUES: dict[str, tuple[str, ...]] = {
    "id": ("id", "number", "no", "num", "#"),
    "number": ("number", "no", "num", "#"),
    "username": ("username", "user", "login", "handle"),
    "password": ("password", "passcode", "pwd"),
    "symbol": ("symbol", "ticker"),
    "ticker": ("symbol", "ticker"),
    "amount": ("amount", "sum"),
    "account": ("account", "acct"),
    "destination": ("to",),
    "recipient": ("to",),
    "target": ("to",),
    "payee": ("to",),
    "source": ("from",),
    "origin": ("from",),
    "email": ("email", "e-mail", "mail"),
    "phone": ("phone", "mobile", "cell", "number"),
}
_SHAPED = re.compile(r"\bshaped /(?P<pattern>.+?)/(?:,|$)")
TOWARD_WORDS = word_set("to destination recipient target payee into beneficiary")
AWAY_WORDS = word_set("from source origin debit sender")


@dataclass(frozen=True)
class Slot:
    """A value to find: a journey field or a tool parameter."""

    name: str
    kind: str = TEXT  # text | int | number | bool | enum | date
    choices: tuple[str, ...] = ()
    description: str = ""
    aliases: tuple[tuple[str, str], ...] = ()  # (phrase, choice): the agent's other words

    @property
    def name_words(self) -> tuple[str, ...]:
        spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", self.name)
        return tuple(w for w in re.split(r"[\s_\-.]+", spaced.lower()) if w)

    @property
    def shape(self) -> re.Pattern[str] | None:
        """The pattern the agent gave the value ("shaped /[A-Za-z]-\\d{4}/" in a journey map's
        field): a word of that shape in the message is that value — the agent's own words say no
        other word is one. None without a pattern, or when it does not compile."""
        found = _SHAPED.search(self.description)
        if found is None:
            return None
        try:
            return re.compile(rf"(?<![\w-])(?:{found['pattern']})(?![\w-])")
        except re.error:
            return None

    @property
    def role(self) -> str:
        """id, money, count, symbol, secret, token, email, phone, name — or the kind itself."""
        named = set(self.name_words)
        if self.kind in (INT, NUMBER):
            money = named & _MONEY_WORDS or re.search(r"amount|currency|money", self.description)
            return "money" if money else "count"
        if self.kind != TEXT:
            return self.kind
        for role, marks in (
            ("time", {"time"}),
            ("weekday", {"day", "weekday"}),
            ("email", {"email", "mail"}),
            ("phone", {"phone", "mobile", "tel", "telephone"}),
            ("symbol", {"symbol", "ticker"}),
            ("secret", _SECRET_WORDS),
            ("id", _ID_WORDS),
            ("token", _SINGLE_TOKEN_WORDS),
        ):
            if named & marks:
                return role
        return "name"

    @property
    def direction(self) -> int:
        """+1 for a destination ("to_account_id"), -1 for a source ("from_account"), else 0."""
        named = set(self.name_words)
        return 1 if named & TOWARD_WORDS else (-1 if named & AWAY_WORDS else 0)

    @property
    def cues(self) -> frozenset[str]:
        """Words that name this slot in a customer's message."""
        found = {w for w in self.name_words if w not in {"name", "the", "of", "value"}}
        for word in self.name_words:
            found.update(_EXTRA_CUES.get(word, ()))
        return frozenset(found)
