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

`RULES` states each clause as the tool-call prompt reads it, with what the gate does with such a
value (`Acceptance`: runs, runs after a yes); `rules_text` lays out the clauses for the kinds of
tool offered. `tests/engine/test_prompt_contradictions.py::
test_the_tool_prompt_states_exactly_what_the_action_gate_accepts` runs one case per clause
through the gate and checks it does what the clause says.
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


class Acceptance(StrEnum):
    """What the gate does with an argument's value."""

    RUNS = "runs"  # the call runs without asking
    CONFIRMED = "confirmed"  # the engine shows the exact call; it runs after the customer's yes
    ASKED = "asked"  # never used: the customer is asked for it


@dataclass(frozen=True)
class Rule:
    """One clause of the rules as the tool-call prompt states it: for which tools, what the gate
    does with such a value, and where the value comes from."""

    consequential: bool
    acceptance: Acceptance
    provenance: tuple[Provenance, ...]  # the gate's provenances this clause covers
    text: str  # as the model reads it in the tool-call prompt


_RUNS, _CONFIRMED = Acceptance.RUNS, Acceptance.CONFIRMED

RULES: tuple[Rule, ...] = (
    # A consequential tool runs at once only on a value the customer gave for that argument.
    Rule(
        True, _RUNS, (Provenance.ANSWER,),
        "their answer at the journey step that asks for it, in this run (a known value of that "
        "name)",
    ),
    Rule(
        True, _RUNS, (Provenance.SAID,),
        "their message since your last reply, read as the argument's type, where it is the only "
        "value of that type — never part of a longer number or id, never a value they gave for "
        "another argument, and for a field a journey step collects only that step's answer",
    ),
    Rule(True, _RUNS, (Provenance.PICK,), "their pick among offered options, or their form"),
    Rule(True, _RUNS, (Provenance.PRINCIPAL,), "who they are logged in as"),
    Rule(
        True, _RUNS, (Provenance.SOURCE,),
        "the latest result of the tool named as the argument's source, since they asked for this",
    ),
    Rule(
        True, _RUNS, (Provenance.VARIABLE, Provenance.DEFAULT),
        "a known fact about the customer of the argument's own name, or the parameter's default",
    ),
    # … and after the customer's yes to exactly that call, on a value worked out or found
    # elsewhere (a candidate).
    Rule(
        True, _CONFIRMED, (Provenance.DERIVED, Provenance.SAID),
        "worked out or chosen: a relative date as YYYY-MM-DD from today's date, a listed choice for their "
        "words, a value an instruction in force sets, a converted unit (\"2k\"), a number in "
        "words or with a separator that reads two ways (\"1.000\"), one of several values of "
        "its type in their message",
    ),
    Rule(
        True, _CONFIRMED, (Provenance.HISTORY, Provenance.ANSWER, Provenance.SOURCE),
        "found elsewhere: said earlier or for something else, a same-named field of another "
        "tool's result, an earlier pick, an answer from a journey run they left and came back "
        "to, an older result of the source tool",
    ),
    # Any other tool (a lookup) takes more: nothing it does needs the customer's yes.
    Rule(
        False, _RUNS, (Provenance.SAID, Provenance.HISTORY),
        "a value the customer said anywhere in the conversation, in any common writing (a "
        "relative date, a number in words), or a known value of the argument's name (a fact, a "
        "field of a tool result)",
    ),
    Rule(
        False, _RUNS, (Provenance.DERIVED,),
        "a value an instruction in force sets; a listed choice for their words, or any other "
        "value worked out, only where the parameter says it may be worked out",
    ),
    Rule(
        False, _RUNS, (Provenance.COMPOSED,),
        "your own wording only where the parameter says you may compose it",
    ),
)  # fmt: skip

NEVER_TEXT = (
    "Never invent a value: leave out a required argument nobody gave, and the customer is asked "
    "for it."
)
RULES_HEADER = "What the engine accepts (it checks every argument before a call runs):"


def rules_for(consequential: bool, acceptance: Acceptance) -> tuple[Rule, ...]:
    return tuple(
        r for r in RULES if r.consequential is consequential and r.acceptance is acceptance
    )


def rules_text(*, consequential: bool = True, harmless: bool = True) -> str:
    """The rules as the tool-call prompt states them: what the gate runs at once, what only
    after the customer's yes, and what it never uses — for the kinds of tool offered
    (`consequential` ones, `harmless` ones: a prompt offering only lookups says nothing of
    the rules for moving money)."""
    lines = [RULES_HEADER]
    if consequential:
        runs = rules_for(True, Acceptance.RUNS)
        confirmed = rules_for(True, Acceptance.CONFIRMED)
        lines += [
            "A tool marked [consequential] runs at once only on a value the customer gave for "
            "that argument:",
            *(
                f"{i}. {rule.text}{'.' if i == len(runs) else ';'}"
                for i, rule in enumerate(runs, start=1)
            ),
            "It runs only after the customer's yes to exactly that call, which the engine shows "
            "them, when a value was "
            + "; or ".join(rule.text for rule in confirmed)
            + ". A yes agrees to the values shown: a call with another value is shown again.",
        ]
    if harmless:
        rules = "; ".join(rule.text for rule in rules_for(False, Acceptance.RUNS))
        if consequential:
            lines.append(f"A tool not marked so also takes {rules}.")
        else:
            lines.append(
                "A tool takes the values the customer gave for its arguments — their answer at "
                "the journey step that asks for it, their pick or form, who they are logged in "
                "as, the latest result of the tool named as the argument's source, the "
                f"parameter's default — and also {rules}."
            )
    lines.append(NEVER_TEXT)
    return "\n".join(lines)
