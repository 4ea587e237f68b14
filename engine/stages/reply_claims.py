"""A reply never claims what did not run: the compose stage's last check.

Composition is told, as facts, what did not happen — but a model may still write that it did
("Done! I transferred $40" while the transfer waits for a yes). Before the reply goes out it is
read, deterministically (`engine.completion_claims`), against every action that did not run this
turn, each known from what the turn recorded:

- failed: its tool failed this turn (and did not succeed on a later try), or its journey step
  still sits on a failure from an earlier turn;
- awaiting confirmation: the call waits for the customer's yes (`state.pending_confirmation`);
- values missing: the call lacks a value, or one it was given is not the customer's (trace
  statuses `missing_arguments`, `ungrounded`);
- not done: declined by the customer (`declined`, `state.declined_tools`), refused (not offered),
  not valid (`invalid_arguments`), not allowed for this sender (`prerequisite_not_met`), or asked
  for last turn and not agreed to this turn (the request was dropped);
- due: a journey under way (or waiting for its prerequisites) leads to a step that runs it, or a
  guideline that applies offers it — and it was not called.

A reply that claims one of them is replaced by the engine's own statement of what happened
(`engine.own_lines`); the compose stage still appends a pending confirmation's line after it.
Actions that ask before they run (consequential tools, or a confirmation policy other than
`never`) are read for any completion claim; every tool that failed is also read, as before, for
its steps' success words — the static text of their canned templates and what their actions
tell the customer ("Tell the customer the transfer is complete" → "transfer is complete").

Who a bare claim ("Done ✅") is about: the action that did not run — unless its sentence names an
action that succeeded this turn ("Funds checked — all set"). For an action that was merely due,
only when nothing succeeded this turn, or when the reply names it and names nothing that did.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine import own_lines
from engine.agent_config import HANDOFF_TOOL
from engine.completion_claims import ActionWords, Claim, Reading, action_words, tokens
from engine.model import AgentSnapshot, Journey, JourneyNode, NodeKind
from engine.ports import ToolOutcome
from engine.relations import Resolution
from engine.stages.state import TurnState
from engine.tools.calls import fill_arguments, known_values

_PLACEHOLDER = re.compile(r"{{\s*[\w.]+\s*}}")
_TELL = re.compile(r"^(?:tell|inform|let)\s+the\s+customer\s+(?:know\s+)?(?:that\s+)?", re.I)
_ARTICLES = frozenset({"the", "a", "an", "your", "their", "its", "that"})


@dataclass(frozen=True)
class UnrunAction:
    """An action that did not run this turn: its tool, what happened to it, and the engine's
    statement of that."""

    tool: str
    what: str  # for the trace: "failed", "waits for the customer's confirmation", …
    statement: str
    attempted: bool = True  # False: it was only due (its journey or a guideline leads to it)
    markers: tuple[str, ...] = ()  # its steps' success words (read after a failure)


def claimed_unrun(
    state: TurnState, text: str, resolution: Resolution
) -> tuple[UnrunAction, str] | None:
    """The action that did not run which `text` nevertheless claims, with the words that claim
    it — or None. A claim that names its action ("your money has been sent") is that action's,
    whichever else did not run; a bare one ("Done ✅") is the first action's it may be about."""
    actions = unrun_actions(state, resolution)
    if not actions:
        return None
    agent = state.agent
    reading = Reading(text)
    succeeded = frozenset(
        w for t in state.succeeded_tools if agent.has_tool(t) for w in words_of(agent, t).signature
    )
    bare: list[tuple[UnrunAction, Claim, ActionWords]] = []
    for action in actions:
        for claim in reading.markers(action.markers):
            return action, claim.said
        if not _asks_first(agent, action.tool):
            continue
        words = words_of(agent, action.tool)
        for claim in reading.claims(words):
            if claim.specific:
                return action, claim.said
            bare.append((action, claim, words))
    for action, claim, words in bare:
        if _about(claim, action, reading, words, succeeded - words.all, bool(succeeded)):
            return action, claim.said
    return None


def _about(
    claim: Claim,
    action: UnrunAction,
    reading: Reading,
    words: ActionWords,
    others: frozenset[str],
    any_succeeded: bool,
) -> bool:
    """Whether a bare claim ("Done ✅", "All set!") is about `action`."""
    if claim.sentence & others:
        return False  # "You're logged in — all set!" is about the login
    if action.attempted or not any_succeeded:
        return True
    return bool(reading.words & words.all) and not reading.words & others


def unrun_actions(state: TurnState, resolution: Resolution) -> list[UnrunAction]:
    """The actions that did not run this turn (one per tool, the most telling first: a failure,
    then a pending confirmation, then the latest call's status, then the customer's answer, then
    what was only due). A tool that succeeded this turn is none of them."""
    found: dict[str, UnrunAction] = {}
    candidates = (
        *_failures(state),
        *_calls(state),
        *_answers(state),
        *_due(state, resolution),
    )
    for action in candidates:
        if action.tool in found or action.tool in state.succeeded_tools:
            continue
        if not state.agent.has_tool(action.tool):
            continue
        if action.markers or _asks_first(state.agent, action.tool):
            found[action.tool] = action
    return list(found.values())


def words_of(agent: AgentSnapshot, tool: str) -> ActionWords:
    """The words of `tool`'s action: its name and description, and what its steps say."""
    spec = agent.tool(tool)
    told = [t for _, node in _steps_running(agent, tool) if (t := _told(node.action))]
    return action_words(spec.name, spec.description or spec.name, told)


def success_markers(agent: AgentSnapshot, tool: str) -> tuple[str, ...]:
    """The words that say `tool`'s action happened: the static text (two words or more) of the
    canned templates of every step that runs it, and each such step's "tell the customer …"."""
    markers: list[str] = []
    for journey, node in _steps_running(agent, tool):
        tag = f"node:{journey.id}:{node.id}"
        for canned in agent.canned_responses:
            if tag in canned.tags:  # in every language it is written in
                for text in (canned.template, *canned.variants.values()):
                    markers += [_normal(c) for c in _PLACEHOLDER.split(text)]
        told = _told(node.action)
        if told is not None:
            words = tokens(told)
            while words and words[0] in _ARTICLES:
                words.pop(0)
            markers.append(" ".join(words))
    return tuple(dict.fromkeys(m for m in markers if len(m.split()) >= 2))


# -- what did not run -----------------------------------------------------------------------------


def _failures(state: TurnState) -> Iterator[UnrunAction]:
    """Tools that failed this turn, and journey steps that still sit on a failed tool from an
    earlier turn (a step whose retry was offered and not taken up is not offered again)."""
    failed: dict[str, str] = {}
    held: set[str] = set()
    for outcome in state.tool_results:
        if outcome.error is not None:
            failed.setdefault(outcome.tool, outcome.error)
    for jid, node_id in state.failed_steps.items():
        if not state.agent.has_journey(jid):
            continue
        for tool in state.agent.journey(jid).node(node_id).tools:
            failed.setdefault(tool, "")  # an earlier turn's failure: its error is not kept
            if jid in state.retries_not_taken and tool not in state.executed_tools:
                held.add(tool)
    for tool, error in failed.items():
        if state.agent.has_tool(tool):
            offer = tool not in held
            statement = own_lines.failed(state.line, _action(state, tool), error, offer_retry=offer)
            yield UnrunAction(tool, "failed", statement, markers=success_markers(state.agent, tool))


def _calls(state: TurnState) -> Iterator[UnrunAction]:
    """Calls made this turn that did not run: the one waiting for a yes, then each tool's latest
    traced status."""
    pending = state.pending_confirmation
    if pending is not None and not pending.agreed:
        statement = own_lines.awaiting_confirmation(state.line, _action(state, pending.tool))
        yield UnrunAction(pending.tool, "waits for the customer's confirmation", statement)
    for record in reversed(state.trace.tool_calls):
        tool = record.tool
        if not state.agent.has_tool(tool):
            continue
        action = _action(state, tool)
        if record.status == "awaiting_confirmation":
            statement = own_lines.awaiting_confirmation(state.line, action)
            yield UnrunAction(tool, "waits for the customer's confirmation", statement)
        elif record.status in ("missing_arguments", "ungrounded"):
            spec = state.agent.tool(tool)
            names = _listed(record.detail, [p.name for p in spec.parameters])
            statement = (
                own_lines.still_needed(state.line, action, names)
                if names
                else own_lines.not_yet(state.line, action)
            )
            yield UnrunAction(tool, "still needs values", statement)
        elif record.status == "invalid_arguments":
            statement = own_lines.not_done(state.line, action, state.line(own_lines.NOT_VALID))
            yield UnrunAction(tool, "had values that are not valid", statement)
        elif record.status == "declined":
            yield UnrunAction(tool, "was declined", own_lines.declined(state.line, action))
        elif record.status == "refused":
            yield UnrunAction(tool, "was refused", own_lines.not_done(state.line, action))
        elif record.status == "prerequisite_not_met":
            journeys = [j.id for j in state.agent.journeys]
            titles = [state.agent.journey(j).title for j in _listed(record.detail, journeys)]
            why = own_lines.needs_first_reason(state.line, titles) if titles else ""
            yield UnrunAction(
                tool, "is not allowed for this sender", own_lines.not_done(state.line, action, why)
            )


def _answers(state: TurnState) -> Iterator[UnrunAction]:
    """The customer's answer to last turn's request: a no, or no yes (the request dropped)."""
    for tool in sorted(state.declined_tools):
        yield UnrunAction(
            tool, "was declined", own_lines.declined(state.line, _action(state, tool))
        )
    asked = state.session.pending_confirmation
    if asked is not None and not asked.agreed and state.confirmed is None:
        statement = own_lines.not_done(
            state.line, _action(state, asked.tool), state.line(own_lines.NOT_CONFIRMED)
        )
        yield UnrunAction(asked.tool, "was not confirmed", statement)


def _due(state: TurnState, resolution: Resolution) -> Iterator[UnrunAction]:
    """Tools a journey under way (or waiting for its prerequisites) leads to, and tools of the
    guidelines that apply — none of them called this turn."""
    agent = state.agent
    known: dict[str, Any] | None = None
    for jid in dict.fromkeys([*state.active(), *state.suspended]):
        if not agent.has_journey(jid):
            continue
        journey = agent.journey(jid)
        path = state.paths.get(jid) or ()
        here = path[-1] if path and path[-1] is not None else journey.root_id
        for tool in _tools_ahead(journey, here):
            if not agent.has_tool(tool):
                continue
            action = _action(state, tool)
            first = [r for r in journey.requires if not state.completed_by_sender(r)]
            if first:
                titles = [agent.journey(r).title if agent.has_journey(r) else r for r in first]
                yield UnrunAction(
                    tool, "did not run", own_lines.needs_first(state.line, action, titles), False
                )
                continue
            known = _known(state) if known is None else known
            _, missing = fill_arguments(agent.tool(tool), known)
            statement = (
                own_lines.still_needed(state.line, action, missing)
                if missing
                else own_lines.not_yet(state.line, action)
            )
            yield UnrunAction(tool, "did not run", statement, False)
    for gid in sorted(resolution.guideline_ids):
        if agent.has_guideline(gid):
            for tool in agent.guideline(gid).tools:
                if agent.has_tool(tool):
                    statement = own_lines.not_yet(state.line, _action(state, tool))
                    yield UnrunAction(tool, "did not run", statement, False)


def _tools_ahead(journey: Journey, here: str) -> list[str]:
    """The tools of the tool steps reachable from step `here` (itself included)."""
    seen = {here}
    queue = deque([here])
    tools: list[str] = []
    while queue:
        node_id = queue.popleft()
        node = next((n for n in journey.nodes if n.id == node_id), None)
        if node is not None and node.kind is NodeKind.TOOL:
            tools += [t for t in node.tools if t != HANDOFF_TOOL]
        for edge in journey.outgoing(node_id):
            if edge.target is not None and edge.target not in seen:
                seen.add(edge.target)
                queue.append(edge.target)
    return list(dict.fromkeys(tools))


def _known(state: TurnState) -> dict[str, Any]:
    """The values that would fill a call's arguments now, as the tool stage finds them."""
    earlier = [
        ToolOutcome(call_id="", tool=str(e.data.get("tool", "")), data=e.data["llm_view"])
        for e in state.own_earlier_results()
        if e.data.get("llm_view") is not None
    ]
    return known_values(
        state.collected_for(), state.session.variables, [*earlier, *state.tool_results]
    )


# -- small readings -------------------------------------------------------------------------------


def _asks_first(agent: AgentSnapshot, tool: str) -> bool:
    """Whether `tool` acts for the customer (consequential, or asks before it runs): any
    completion claim about it counts, not only its steps' success words."""
    spec = agent.tool(tool)
    return spec.consequential or spec.confirmation != "never"


def _action(state: TurnState, tool: str) -> str:
    spec = state.agent.tool(tool)
    return (spec.description or spec.name).rstrip(".")


def _listed(detail: str, known: list[str]) -> list[str]:
    """The names a trace detail lists after its last colon ("not given by the customer:
    amount, to_account_id") that are among `known` (parameters, journeys) — nothing else."""
    named = [n.strip() for n in detail.rsplit(":", 1)[-1].split(",")]
    return [n for n in named if n in known]


def _steps_running(agent: AgentSnapshot, tool: str) -> Iterator[tuple[Journey, JourneyNode]]:
    """The journey steps that run `tool`."""
    for journey in agent.journeys:
        for node in journey.nodes:
            if node.kind is NodeKind.TOOL and tool in node.tools:
                yield journey, node


def _told(action: str | None) -> str | None:
    """What a step's action tells the customer, up to its first detail: "Tell the customer the
    transfer is complete, with the amount" → "the transfer is complete"."""
    told = _TELL.sub("", action or "", count=1)
    if not action or told == action:
        return None
    return re.split(r",| with | and (?:the|its|their) ", told, maxsplit=1)[0]


def _normal(text: str) -> str:
    """Lower case, words only: punctuation and spacing never hide a claim."""
    return " ".join(tokens(text))
