"""A reply never claims what failed: the compose stage's last check.

Composition is told, as a fact, that a tool failed — but a model may still write the step's
success words ("Done! I transferred $500…", "the order is placed"). Before the reply goes out, it
is compared, deterministically, with the success words of every action that did not happen this
turn: the static text of the canned templates of the failed tool's step, and what the step's
action tells the customer ("Tell the customer the transfer is complete" → "transfer is
complete"). A reply that contains them is replaced by the engine's own statement of the failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine import own_lines
from engine.model import AgentSnapshot, NodeKind
from engine.stages.state import TurnState

_PLACEHOLDER = re.compile(r"{{\s*[\w.]+\s*}}")
_TELL = re.compile(r"^(?:tell|inform|let)\s+the\s+customer\s+(?:know\s+)?(?:that\s+)?", re.I)
_ARTICLES = frozenset({"the", "a", "an", "your", "their", "its", "that"})


@dataclass(frozen=True)
class FailedAction:
    """An action that did not happen: its tool, why, and the words that would claim it did."""

    tool: str
    action: str
    error: str
    markers: tuple[str, ...]
    # False for a step whose retry was offered and not taken up: the offer is not repeated
    offer_retry: bool = True


def failed_actions(state: TurnState) -> list[FailedAction]:
    """Tools that failed this turn (and did not succeed on a later try), and journey steps that
    still sit on a failed tool from an earlier turn."""
    failed: dict[str, str] = {}
    held: set[str] = set()
    for outcome in state.tool_results:
        if outcome.error is not None and outcome.tool not in state.succeeded_tools:
            failed.setdefault(outcome.tool, outcome.error)
    for jid, node_id in state.failed_steps.items():
        if not state.agent.has_journey(jid):
            continue
        for tool in state.agent.journey(jid).node(node_id).tools:
            if tool not in state.succeeded_tools:
                failed.setdefault(tool, "it did not go through")
                if jid in state.retries_not_taken and tool not in state.executed_tools:
                    held.add(tool)
    actions = []
    for tool, error in failed.items():
        if not state.agent.has_tool(tool):
            continue
        spec = state.agent.tool(tool)
        action = (spec.description or spec.name).rstrip(".")
        markers = success_markers(state.agent, tool)
        actions.append(FailedAction(tool, action, error, markers, offer_retry=tool not in held))
    return actions


def success_markers(agent: AgentSnapshot, tool: str) -> tuple[str, ...]:
    """The words that say `tool`'s action happened: the static text (two words or more) of the
    canned templates of every step that runs it, and each such step's "tell the customer …"."""
    markers: list[str] = []
    for journey in agent.journeys:
        for node in journey.nodes:
            if node.kind is not NodeKind.TOOL or tool not in node.tools:
                continue
            tag = f"node:{journey.id}:{node.id}"
            for canned in agent.canned_responses:
                if tag in canned.tags:
                    markers += [c for c in map(_normal, _PLACEHOLDER.split(canned.template))]
            told = _TELL.sub("", node.action or "", count=1)
            if told != (node.action or ""):
                clause = re.split(r",| with | and (?:the|its|their) ", told, maxsplit=1)[0]
                words = _normal(clause).split()
                while words and words[0] in _ARTICLES:
                    words.pop(0)
                markers.append(" ".join(words))
    return tuple(dict.fromkeys(m for m in markers if len(m.split()) >= 2))


def claimed_failure(state: TurnState, text: str) -> FailedAction | None:
    """The first action that did not happen which `text` nevertheless claims, if any."""
    said = _normal(text)
    for failed in failed_actions(state):
        if any(marker in said for marker in failed.markers):
            return failed
    return None


def failure_reply(failed: FailedAction) -> str:
    """The engine's own words when the model's reply claimed what failed (an offer to retry
    that the customer did not take up is not made again)."""
    return own_lines.failed(failed.action, failed.error, offer_retry=failed.offer_retry)


def _normal(text: str) -> str:
    """Lower case, words only: punctuation and spacing never hide a claim."""
    return " ".join(re.findall(r"[\w']+", text.casefold()))
