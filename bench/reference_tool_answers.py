"""The reference's fake LLM on tool calls: run the tool with our arguments iff our engine ran it
this turn.

Standard library and the fake's own modules only (see `bench/reference_fake.py`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.reference_script import TurnScript


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
