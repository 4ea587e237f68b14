"""Where a tool argument may come from — the rules, stated once.

The action gate (`engine.values.grounding`) applies them in code; the tool-call prompt
(`engine.tools.calls`) and docs/tools.md state the same list, from `RULES` below, so a model is
asked for exactly what the gate accepts.

A *consequential* tool (money, orders) runs on a value without asking only when the customer gave
it **for that argument**:

1. `answer` — the value collected for that field in this journey run: the customer's answer to
   the step that asks for it (or given ahead of it, in the words of that turn);
2. `said` — this turn's message of this sender, read as the parameter's type, where it is the only
   value of that type: never a piece cut out of a longer number, a decimal or an id, and never
   a value the customer's message gave for another argument;
3. `pick` — the customer's pick among offered options, or their form result, for that field;
4. `principal` — who the customer logged in as;
5. `source` — the latest result of the tool the author declared as the argument's source
   (`source: lookup_account_id.account_id`), never any other result's field of the same name;
6. `variable` / `default` — a context variable of the argument's name (set by the operator, not
   the model), or the parameter's own default.

A value that is *worked out* — a relative date ("tomorrow" as a date, counted in the agent's
time zone), a listed choice for the customer's words ("keyboards" → "peripherals"), a value an
instruction in force sets, a unit conversion ("2k"), a number in words, a locale-ambiguous number
("1.000"), one of several values of its type in the message — is `derived`; a value from earlier
in the conversation that none of the rules gives is `history`. Both are *candidates*: shown to
the customer in the engine's own words, and run only after their yes to exactly that call.
Anything else is never used: the customer is asked for it.

A *non-consequential* tool (a lookup) takes any value the customer said in the conversation, a
tool result or variable of the parameter's name, a relative date the engine can count again, and —
when the parameter is declared `derived` (a mapped category) or `composed` (a search query) — the
model's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Provenance(StrEnum):
    """Where one argument's value came from."""

    ANSWER = "answer"
    SAID = "said"
    PICK = "pick"
    PRINCIPAL = "principal"
    SOURCE = "source"
    VARIABLE = "variable"
    DEFAULT = "default"
    DERIVED = "derived"
    HISTORY = "history"
    COMPOSED = "composed"


@dataclass(frozen=True)
class Rule:
    provenance: Provenance
    text: str  # as the model reads it in the tool-call prompt


RULES: tuple[Rule, ...] = (
    Rule(Provenance.ANSWER, "the customer's answer at the step that asks for it (known values)"),
    Rule(
        Provenance.SAID,
        "their latest message, where it is the only value of its type — never part of a longer "
        "number or id, never a value they gave for something else",
    ),
    Rule(Provenance.PICK, "their pick among offered options, or their form"),
    Rule(Provenance.PRINCIPAL, "who they are logged in as"),
    Rule(Provenance.SOURCE, "the latest result of the tool named as the argument's source"),
    Rule(Provenance.VARIABLE, "a known value of the argument's own name"),
)

DERIVED_TEXT = (
    "A value you work out is allowed and is shown to the customer to confirm: a relative date "
    "as YYYY-MM-DD from today's date, a listed choice for their words, a value an instruction "
    "in force sets, a converted unit, a number in words."
)
NEVER_TEXT = "Never invent a value: leave a required argument out and the customer is asked."


def rules_text() -> str:
    """The rules as the tool-call prompt states them."""
    lines = [f"{i}. {rule.text}" for i, rule in enumerate(RULES, start=1)]
    return (
        "Where an argument may come from (the engine checks every value):\n"
        + "\n".join(lines)
        + f"\n{DERIVED_TEXT} {NEVER_TEXT}"
    )
