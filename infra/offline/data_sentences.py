"""Tool data and collected values in sentences for the customer: a noun phrase filled from this
turn's tool data ("the current price" → "The current price for AAPL is 187.2"), a summary of the
data no instruction used, keys and values as a customer reads them ("to_account_id" → "destination
account id", `True` → "yes", a record by its label) — never a Python or JSON structure.
"""

from __future__ import annotations

import re
from typing import Any

from infra.offline.compose_request import ReplyDraft
from infra.offline.language import stem, words
from infra.offline.prompt import ToolData, flatten


def join_items(items: list[str]) -> str:
    """Items as a customer reads a list: "a, b and c"."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def key_words(phrase: str) -> set[str]:
    """The stems of a phrase's words, without articles: what it names."""
    return {stem(w) for w in words(phrase)} - {"the", "a", "an", "your", "my", "of"}


def norm_key(key: str) -> frozenset[str]:
    """The stems of a data key's parts ("to_account.id" → to, account, id)."""
    return frozenset(stem(w) for w in re.split(r"[_\s.\-]+", key.lower()) if w)


_IDENTIFIERS = (
    "symbol",
    "ticker",
    "account_name",
    "account",
    "name",
    "account_id",
    "order_id",
    "id",
)


def data_sentence(noun_phrase: str, reply: ReplyDraft) -> str | None:
    """A noun phrase filled from tool data: "the current price" + {"symbol": "AAPL", "price":
    187.2} → "The current price for AAPL is 187.2". Falls back to a summary of this turn's tool
    data, or to the collected values."""
    results = reply.request.context.recent_tool_results()
    values: dict[str, Any] = {}
    for r in results:
        if isinstance(r.data, dict) and not r.data.get("error"):
            values.update(flatten(r.data))
    wanted = key_words(noun_phrase) - {"current", "latest", "new", "its", "their", "your"}
    # The head noun decides ("the balance of the account" is about the balance, not the
    # account), so keys naming it win over keys that merely share a word.
    head = _head_noun(noun_phrase)
    match = next((k for k in values if head in norm_key(k.rsplit(".", 1)[-1])), None)
    if match is None:
        match = next((k for k in values if norm_key(k.rsplit(".", 1)[-1]) & wanted), None)
    if match is not None:
        subject = re.sub(r"^(its|their|your|my)\s+", "the ", noun_phrase.strip())
        if not re.match(r"^(the|a|an)\b", subject):
            subject = f"the {subject}"
        ident = next(
            (values[k] for k in _IDENTIFIERS if k in values and k != match and values[k] != ""),
            None,
        )
        suffix = f" for {value_text(ident)}" if ident is not None else ""
        currency = values.get("currency")
        amount = value_text(values[match]) + (f" {currency}" if currency else "")
        plural = head.endswith("s") and not head.endswith("ss") and "," in amount
        verb = "are" if plural else "is"  # "the free times are 09:00, 11:30"
        return f"{subject}{suffix} {verb} {amount}"
    if results:
        return data_summary(results)
    collected = reply.request.collected
    key = next((k for k in collected if norm_key(k) & wanted), None)
    if key is not None:
        return f"the {human_key(key)} is {value_text(collected[key])}"
    return None


_WH = re.compile(r"^(where|when|what|which|who|how|why)\b", re.I)


def clause_with_data(clause: str, reply: ReplyDraft) -> str:
    """A clause the agent is told to say, with what this turn's tool data has for it: "where the
    order is and when it arrives" (a question the data answers) → the data in words; "the return
    is started, with its return id" → the clause and the fields it names ("…: the return id is
    R-501"). The clause alone when no tool ran this turn or the data names none of its words."""
    results = [
        r
        for r in reply.request.context.recent_tool_results()
        if isinstance(r.data, dict) and r.data and not r.data.get("error")
    ]
    values: dict[str, Any] = {}
    for r in results:
        values.update(flatten(r.data))
    wanted = key_words(clause)
    named = [k for k in values if norm_key(k.rsplit(".", 1)[-1]) & wanted]
    if not named:
        return clause
    if _WH.match(clause.strip()):
        return data_summary(results) or clause
    facts = ", ".join(_fact(k, values[k]) for k in named[:4] if values[k] not in (None, ""))
    return f"{clause.rstrip('.')}: {facts}" if facts else clause


_DETERMINERS = {"the", "a", "an", "its", "their", "your", "my", "current", "latest", "new"}


def _head_noun(phrase: str) -> str:
    """The word a noun phrase is about: the last word before "of"/"for" ("the balance of the
    account" → "balance"), else its last word ("the current price" → "price")."""
    words = [w for w in re.findall(r"[a-z]+", phrase.lower()) if w not in _DETERMINERS]
    for i, word in enumerate(words):
        if word in {"of", "for", "in", "on"} and i > 0:
            return words[i - 1]
    return words[-1] if words else ""


def results_of(tools: str, reply: ReplyDraft) -> str | None:
    """A summary of this turn's results of the tools named ("get_price, get_balance")."""
    names = {n.strip() for n in tools.split(",")}
    results = [r for r in reply.request.context.recent_tool_results() if r.tool in names]
    return data_summary(results) if results else None


def data_summary(results: tuple[ToolData, ...] | list[ToolData]) -> str | None:
    """Tool data in words, never as a raw structure: a record as "the symbol is MSFT, the price is
    410", a list as its items' labels ("small, medium or large"). Errors are left to the notes."""
    parts = []
    for r in results:
        if r.data is None or (isinstance(r.data, dict) and r.data.get("error")):
            continue
        if isinstance(r.data, list):
            items = [value_text(v) for v in r.data[:_MAX_ITEMS]]
            more = len(r.data) - _MAX_ITEMS
            parts.append(join_items(items + ([f"{more} more"] if more > 0 else [])))
        elif isinstance(r.data, dict):
            shown = [(k, v) for k, v in r.data.items() if v not in (None, "", [], {})][:6]
            parts.append(", ".join(_fact(k, v) for k, v in shown))
        else:
            parts.append(value_text(r.data))
    parts = [p for p in parts if p]
    if not parts:
        return None
    return "Here is what I found: " + "; ".join(parts)


def _fact(key: str, value: Any) -> str:
    """One field of a record: "the price is 410"; a flag as "authenticated: yes"."""
    if isinstance(value, bool):
        return f"{human_key(key)}: {value_text(value)}"
    return f"the {human_key(key)} is {value_text(value)}"


_MAX_ITEMS = 8
_LABEL_KEYS = ("label", "name", "title", "description", "id")


def human_key(key: str) -> str:
    """A key for the customer: "to_account_id" → "destination account id"."""
    text = re.sub(r"[_.]+", " ", key).strip()
    text = re.sub(r"^to\b", "destination", text)
    return re.sub(r"^from\b", "source", text)


def value_text(value: Any) -> str:
    """A value as a customer reads it: yes/no, 300 (not 300.0), a record by its label, a list as
    its items — never a Python or JSON structure."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        label = next((value[k] for k in _LABEL_KEYS if value.get(k) not in (None, "")), None)
        if label is not None and not isinstance(label, dict | list):
            return value_text(label)
        scalars = [(k, v) for k, v in value.items() if not isinstance(v, dict | list)][:4]
        return ", ".join(f"{human_key(k)} {value_text(v)}" for k, v in scalars)
    if isinstance(value, list | tuple):
        return join_items([value_text(v) for v in value[:_MAX_ITEMS]])
    return str(value)
