"""How the reference engine's fake LLM decides, for `python -m bench compare`: it follows the
decisions our engine made on the same turn (the spec's `script`, one entry per customer message).

Standard library only: `bench/reference_driver.py` runs inside the reference's own virtual
environment and imports this module from its own folder (its fake NLP service,
`bench/reference_nlp.py`, asks it), and our tests import it without the reference installed.
Every function here is pure — a prompt text or an output template and the turn's script in, an
answer (plain JSON data) out — so the answers are testable with short prompts shaped like the
reference's.

What each kind of question gets:

- guideline checks (actionable, observational, previously applied, customer dependent, low
  criticality) — the output template the prompt carries, each "<BOOL>" answered by whether our
  engine matched a guideline with that condition this turn. A condition our agent does not have
  falls back to a lexical rule (topic words shared with the customer's message);
- response analysis ("was this guideline applied?") — yes iff our engine applied a guideline
  with that action this turn;
- reachable-step conditions (the reference's journey indexing at boot) — conditions that name
  the step they lead to (`STEP_MARK`), so a later step selection can tell them apart;
- journey step selection — the offered condition that leads to the step our engine is at after
  this turn (or the furthest step it passed that is offered); "0" to stay; "None" when our
  engine had no such journey active;
- tool calls — run the tool with our arguments iff our engine ran it this turn;
- the reply draft — our reply text for the turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Phrases the fake writes into the journey's reachable-step conditions, and reads back at step
# selection: the target of a condition is the step named after the last STEP_MARK.
STEP_MARK = "the next step is not done yet: "
DONE_MARK = "done: "
JOURNEY_COMPLETE = "the journey is complete"
STOPWORDS = {
    "customer", "about", "their", "which", "would", "there", "asks", "wants", "agent", "order",
    "account", "clearly", "mention", "offer", "explain",
}  # fmt: skip


def normalized(text: str | None) -> str:
    """Case, spacing and closing punctuation do not make two texts different."""
    return " ".join((text or "").lower().split()).strip(" .\"'")


def topic_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 5} - STOPWORDS


@dataclass(frozen=True)
class Step:
    """A journey step as our engine names it: its action, or the tools a tool step runs."""

    action: str | None
    tools: tuple[str, ...] = ()

    def is_named_by(self, reference_action: str) -> bool:
        """The reference's step text names this step: the same action, or (a tool step) one of
        its tools by name."""
        if self.action:
            return normalized(self.action) == normalized(reference_action)
        named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", reference_action))
        return any(tool in named for tool in self.tools)

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Step | None:
        if data is None:
            return None
        return cls(data.get("action"), tuple(data.get("tools", ())))


@dataclass(frozen=True)
class JourneyScript:
    """Where one of our journeys went this turn."""

    title: str
    steps: tuple[Step, ...]  # the steps it passed this turn, in order (the last is where it is)
    completed: bool  # it reached its end this turn
    exited: bool  # it was left (not completed) this turn


@dataclass(frozen=True)
class TurnScript:
    """What our engine decided on one turn, as the fake reads it."""

    message: str
    conditions: frozenset[str]  # normalized conditions of the guidelines that matched
    applied_actions: frozenset[str]  # normalized actions of the guidelines it applied
    journeys: tuple[JourneyScript, ...]
    tools: tuple[tuple[str, dict[str, Any]], ...]
    reply: str

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> TurnScript:
        journeys = []
        for j in data.get("journeys", ()):
            steps = tuple(s for s in (Step.of(x) for x in j.get("steps", ())) if s is not None)
            journeys.append(
                JourneyScript(
                    title=j["title"],
                    steps=steps,
                    completed=j.get("how") == "completed",
                    exited=j.get("how") == "exit",
                )
            )
        return cls(
            message=data.get("message", ""),
            conditions=frozenset(normalized(g["condition"]) for g in data.get("guidelines", ())),
            applied_actions=frozenset(normalized(a) for a in data.get("applied_actions", ())),
            journeys=tuple(journeys),
            tools=tuple((t["name"], dict(t["arguments"])) for t in data.get("tools", ())),
            reply=data.get("reply", ""),
        )

    def journey(self, title: str) -> JourneyScript | None:
        return next((j for j in self.journeys if normalized(j.title) == normalized(title)), None)


# --------------------------------------------------------------------------------------------------
# Guideline checks and response analysis


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


# --------------------------------------------------------------------------------------------------
# Journeys: the conditions written at indexing, and step selection


@dataclass(frozen=True)
class ChildStep:
    id: str
    action: str | None
    condition: str | None  # the edge's own condition
    onward: tuple[tuple[str, str], ...]  # (path id, condition) of the paths from the child on


def _real_data(prompt: str) -> str:
    marker = "Example section is over"
    return prompt.rsplit(marker, 1)[-1] if marker in prompt else prompt


def parse_reachable_prompt(prompt: str) -> tuple[str | None, list[ChildStep]]:
    """The step a reachable-conditions prompt is about (its action) and its children."""
    text = _real_data(prompt).split("OUTPUT FORMAT", 1)[0]
    current = re.search(r"Current node action:\s*\n\s*(.+)", text)
    children = []
    blocks = re.split(r"\n\s*Child id: ", text)
    for block in blocks[1:]:
        child_id = block.split(None, 1)[0]
        action = re.search(r"Action of child \([^)]*\):\s*\n\s*(.+)", block)
        condition = re.search(r"Condition of the transition to child \([^)]*\):\s*\n\s*(.+)", block)
        onward = re.findall(r"- Condition \(([^)]+)\) : (.+)", block)
        children.append(
            ChildStep(
                id=child_id,
                action=action[1].strip() if action else None,
                condition=condition[1].strip() if condition else None,
                onward=tuple((i, c.strip()) for i, c in onward),
            )
        )
    return (current[1].strip() if current else None), children


def reachable_answer(prompt: str) -> dict[str, Any]:
    """The conditions of a step's transitions, each naming the step it stops at (STEP_MARK), or
    that the journey is complete."""
    action, children = parse_reachable_prompt(prompt)
    answer: dict[str, Any] = {
        "step_action": action or "",
        "step_action_completed": f"{DONE_MARK}{action}; {JOURNEY_COMPLETE}" if action else "",
    }
    if not children:
        return answer
    answer["children_conditions"] = [
        {
            "child_id": c.id,
            "child_action": c.action or "There is no action to perform in this child step",
            "condition_to_child": c.condition or "",
            "condition_to_child_and_stop": _prefixed(
                c.condition, f"{STEP_MARK}{c.action}" if c.action else JOURNEY_COMPLETE
            ),
            "conditions_to_child_and_forward": [
                {
                    "id": path_id,
                    "path_condition": onward,
                    "condition_to_child_then_to_path": _prefixed(
                        c.condition, f"{DONE_MARK}{c.action}; {onward}"
                    ),
                }
                for path_id, onward in c.onward
            ]
            or None,
        }
        for c in children
    ]
    return answer


def _prefixed(condition: str | None, rest: str) -> str:
    return f"{condition}; {rest}" if condition else rest


def step_ids(prompt: str) -> dict[str, str]:
    """Step id → action, from a reachable-conditions prompt's children (the reference's own
    numbering of the journey's steps)."""
    _, children = parse_reachable_prompt(prompt)
    return {c.id: c.action for c in children if c.action}


def condition_target(condition: str) -> str | None:
    """The step a condition the fake wrote leads to; None when it completes the journey."""
    if STEP_MARK in condition:
        return condition.rsplit(STEP_MARK, 1)[1].strip()
    return None


def parse_next_step_prompt(prompt: str) -> tuple[str, str, dict[str, str]]:
    """A step-selection prompt's journey title, current step action and offered conditions."""
    text = _real_data(prompt)
    title = re.search(r"\nJourney: (.+)", text)
    current = re.search(r"CURRENT STEP -\s*\n\s*(.+)", text)
    options = dict(re.findall(r"Condition \(([^)]+)\): (.+)", text))
    return (
        title[1].strip() if title else "",
        current[1].strip() if current else "",
        {k: v.strip() for k, v in options.items()},
    )


def next_step_answer(prompt: str, turn: TurnScript) -> dict[str, Any]:
    """Step selection as our engine moved this turn: the offered condition that leads to the
    furthest of our steps this turn ("0" if that is the current step), the condition that
    completes the journey when ours completed, "None" when ours was not active."""
    title, current, options = parse_next_step_prompt(prompt)
    journey = turn.journey(title)
    chosen, why = "None", "our engine has no such journey active this turn"
    if journey is not None and journey.completed:
        ending = [k for k, c in options.items() if condition_target(c) is None]
        chosen, why = (
            (ending[0], "our engine completed the journey")
            if ending
            else (
                "None",
                "our engine completed the journey; no condition here completes it",
            )
        )
    elif journey is not None and not journey.exited:
        chosen, why = "0", "our engine stayed at this step"
        for step in reversed(journey.steps):
            if step.is_named_by(current):
                break
            offered = [
                k
                for k, c in options.items()
                if (target := condition_target(c)) is not None and step.is_named_by(target)
            ]
            if offered:
                chosen, why = offered[0], f"our engine moved to: {step.action or step.tools}"
                break
    return {
        "journey_continues": chosen != "None",
        "current_step_completed_rationale": why,
        "current_step_completed": chosen not in ("0", "None"),
        "next_step_rationale": why,
        "applied_condition_id": chosen,
    }


def chosen_target(prompt: str, answer: Mapping[str, Any]) -> str | None:
    """The step action a step-selection answer chose: the current step for "0", the
    condition's target otherwise; None for leaving or completing the journey."""
    _, current, options = parse_next_step_prompt(prompt)
    chosen = str(answer.get("applied_condition_id"))
    if chosen == "0":
        return current
    return condition_target(options[chosen]) if chosen in options else None


# --------------------------------------------------------------------------------------------------
# Tool calls and the reply


def candidate_tool(prompt: str) -> str:
    """The tool a tool-call prompt asks about ("service:name" in its output format → name)."""
    tail = prompt.rsplit("OUTPUT FORMAT", 1)[-1]
    found = re.search(r'"name": "[^":]*:([^"]+)"', tail) or re.search(
        r"RUNNING [^:\s]+:([A-Za-z0-9_]+)", tail
    )
    return found[1] if found else ""


def our_calls(tool: str, turn: TurnScript) -> list[dict[str, Any]]:
    return [args for name, args in turn.tools if name == tool]


def single_tool_answer(prompt: str, turn: TurnScript) -> dict[str, Any]:
    """A consequential tool batch: one applicable call per call of ours, every argument valid
    with our value; no call when our engine did not run the tool."""
    tool = candidate_tool(prompt)
    full_name = re.search(r'"name": "([^"]+)"', prompt.rsplit("OUTPUT FORMAT", 1)[-1])
    calls = [
        {
            "applicability_rationale": "our engine ran it this turn",
            "is_applicable": True,
            "argument_evaluations": [
                {
                    "parameter_name": name,
                    "acceptable_source_for_this_argument_according_to_its_tool_definition": "any",
                    "evaluate_is_it_provided_by_an_acceptable_source": "yes",
                    "evaluate_was_it_already_provided_and_should_it_be_provided_again": "no",
                    "evaluate_is_it_potentially_problematic_to_guess_what_the_value_is_if_it_isnt_provided": "no",
                    "is_optional": False,
                    "valid_invalid_or_missing": "valid",
                    "value_as_string": str(value),
                }
                for name, value in args.items()
            ],
            "same_call_is_already_staged": False,
            "relevant_subtleties": "",
        }
        for args in our_calls(tool, turn)
    ]
    return {
        "last_customer_message": turn.message,
        "most_recent_customer_inquiry_or_need": turn.message,
        "most_recent_customer_inquiry_or_need_was_already_resolved": False,
        "name": full_name[1] if full_name else tool,
        "subtleties_to_be_aware_of": "",
        "tool_calls_for_candidate_tool": calls,
    }


def non_consequential_tool_answer(prompt: str, turn: TurnScript) -> dict[str, Any]:
    """A light tool batch: run it with our arguments iff our engine ran it."""
    calls = [
        {"args": {k: str(v) for k, v in a.items()}} for a in our_calls(candidate_tool(prompt), turn)
    ]
    return {"reasoning_tldr": "as our engine decided", "should_run": bool(calls), "calls": calls}


def answer(schema: str, prompt: str, turn: TurnScript | None, known: frozenset[str]) -> Any:
    """The fake's answer for one schema, or None where it has no rule (the caller falls back
    to the schema's minimal instance). `turn` is None outside the conversation (boot)."""
    if schema == "ReachableNodesEvaluationSchema":
        return reachable_answer(prompt)
    if turn is None:
        return None
    if schema == "JourneyNextStepSelectionSchema":
        return next_step_answer(prompt, turn)
    if schema == "JourneyBacktrackCheckSchema":
        # Our engine's journeys here never go back to an earlier step.
        return {"rationale": "no backtracking", "requires_backtracking": False}
    if schema == "SingleToolBatchSchema":
        return single_tool_answer(prompt, turn)
    if schema == "NonConsequentialToolBatchSchema":
        return non_consequential_tool_answer(prompt, turn)
    if schema == "CannedResponseDraftSchema":
        return {
            "last_message_of_user": turn.message,
            "guidelines": [],
            "response_body": turn.reply,
        }
    return None


def is_guideline_check(schema: str) -> bool:
    return "GuidelineMatches" in schema or schema == "GenericResponseAnalysisSchema"


def known_conditions(spec: Mapping[str, Any]) -> frozenset[str]:
    """Every condition our agent has (guidelines and journey triggers), normalized."""
    conditions = [g["condition"] for g in spec.get("guidelines", ())]
    conditions += [c for j in spec.get("journeys", ()) for c in j.get("conditions", ())]
    return frozenset(normalized(c) for c in conditions)


def scripts(spec: Mapping[str, Any]) -> Sequence[TurnScript]:
    return [TurnScript.of(t) for t in spec.get("script", ())]


def our_step_id(journeys: Sequence[Mapping[str, Any]], reference_action: str) -> str | None:
    """Our node id for a step the reference names by its action text (None: no such step)."""
    for journey in journeys:
        for node in journey.get("nodes", ()):
            step = Step(node.get("action"), tuple(node.get("tools", ())))
            if (step.action or step.tools) and step.is_named_by(reference_action):
                return str(node["id"])
    return None
