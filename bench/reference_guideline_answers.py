"""The reference's fake LLM on guideline checks (actionable, observational, previously applied,
customer dependent, low criticality) and response analysis: the output template the prompt
carries, each "<BOOL>" answered by whether our engine matched a guideline with that condition this
turn (a condition our agent does not have: topic words shared with the customer's message), or
applied one with that action.

Standard library and the fake's own modules only (see `bench/reference_fake.py`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # as bench.reference_guideline_answers: our tests, and mypy
    from bench.reference_script import TurnScript, normalized
else:  # by name, beside bench/reference_driver.py in the reference's virtual environment
    from reference_script import TurnScript, normalized

STOPWORDS = {
    "customer", "about", "their", "which", "would", "there", "asks", "wants", "agent", "order",
    "account", "clearly", "mention", "offer", "explain",
}  # fmt: skip


def topic_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 5} - STOPWORDS


def is_guideline_check(schema: str) -> bool:
    return "GuidelineMatches" in schema or schema == "GenericResponseAnalysisSchema"


def condition_holds(condition: str, turn: TurnScript, known: frozenset[str]) -> bool:
    """Whether the fake says a guideline's condition holds this turn: as our engine matched it,
    or (a condition our agent does not have) by topic words shared with the message."""
    key = normalized(condition)
    if key in turn.conditions:
        return True
    if key in known:
        return False
    return bool(topic_words(condition) & topic_words(turn.message))


def output_templates(prompt: str) -> list[Any]:
    """The ```json blocks of a prompt that parse as JSON (few-shot examples included)."""
    found = []
    for block in re.findall(r"```json\s*(.*?)```", prompt, flags=re.S):
        try:
            found.append(json.loads(block))
        except ValueError:
            continue
    return found


def fill_checks(template: Any, decide: Callable[[Mapping[str, Any]], bool]) -> Any:
    """The template with its placeholders answered: a "<BOOL>" by `decide` on the item (the
    dict) that holds it, any other "<...>" by a short text."""
    if isinstance(template, dict):
        return {
            k: (decide(template) if _is_bool_placeholder(v) else fill_checks(v, decide))
            for k, v in template.items()
        }
    if isinstance(template, list):
        return [fill_checks(v, decide) for v in template]
    if _is_placeholder(template):
        return "fake"
    return template


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("<") and value.endswith(">")


def _is_bool_placeholder(value: Any) -> bool:
    return _is_placeholder(value) and "BOOL" in value.upper()


def guideline_check_answers(prompt: str, turn: TurnScript, known: frozenset[str]) -> list[Any]:
    """Candidate answers to a guideline-check prompt (its output templates, last first), each
    item applying iff its condition holds this turn; response analysis ("guideline_applied",
    items by action) says applied iff our engine applied that action."""

    def decide(item: Mapping[str, Any]) -> bool:
        if "guideline_applied" in item and "action" in item:
            return normalized(str(item["action"])) in turn.applied_actions
        return condition_holds(str(item.get("condition", "")), turn, known)

    return [fill_checks(t, decide) for t in reversed(output_templates(prompt))]


def decided_conditions(answer: Any) -> list[str]:
    """The conditions an answer to a guideline check said hold (items with a true boolean)."""
    found: list[str] = []
    if isinstance(answer, dict):
        if "condition" in answer and any(v is True for v in answer.values()):
            found.append(str(answer["condition"]))
        for v in answer.values():
            found += decided_conditions(v)
    elif isinstance(answer, list):
        for v in answer:
            found += decided_conditions(v)
    return found
