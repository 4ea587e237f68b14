"""The gate every tool call passes between planning and dispatch.

A planned call runs only when (1) its arguments validate against the tool's typed schema
(`engine.values.types`: a value that does not read as its type never reaches the tool), (2)
every argument is grounded by the rules of `engine.values.provenance` — for a consequential tool,
the customer gave it for that argument: their answer at the step that asks for it, this turn's
words read as its type with no other candidate, their pick, their login, or the declared source
tool's latest result — and (3) the customer agreed to it, when its tool's confirmation policy
asks for that or a value was worked out or taken from elsewhere in the conversation. A yes agrees
to exactly the call it was asked for: any other consequential call in that turn asks again. An
ungrounded value is never used: the step asks for it. Each argument's source is in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import ToolArgumentError
from engine.matching.projection import is_journey_projection
from engine.privacy.secrets import MASK
from engine.sessions.session import EventKind, EventSource
from engine.stages.confirmation import is_confirmed, needs_confirmation, request_confirmation
from engine.stages.secret_masking import remember_typed
from engine.stages.state import TurnState
from engine.tools.calls import missing_argument_question, validate_arguments
from engine.tools.spec import ToolSpec
from engine.trace import ToolCallRecord
from engine.values.grounding import (
    Answer,
    CallGrounding,
    CustomerMessage,
    Evidence,
    SourceResult,
    ground_call,
    same_value,
)
from engine.values.runs import reading_context


@dataclass(frozen=True)
class ClearedCall:
    spec: ToolSpec
    arguments: dict[str, Any]
    journey_id: str | None
    grounding: CallGrounding


def evidence_for(state: TurnState) -> Evidence:
    """What this turn's arguments may be traced to, for this turn's sender: their messages (this
    turn's apart from earlier ones), their successful tool results by tool, their answers in
    journey runs under way, their picks and form results, their principal, context variables,
    and the actions of the guidelines in force."""
    first = state.session.next_offset()
    customer = [
        e
        for e in (*state.earlier_events(), *state.events)
        if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]
    own = [e for e in customer if state.is_own(e)]
    results: dict[str, list[SourceResult]] = {}
    # Earlier turns' results as stored; this turn's as the tools returned them. Each knows
    # whether the call that made it ran on values worked out rather than given.
    for e in state.own_earlier_results():
        tool = str(e.data.get("tool", ""))
        made = SourceResult(e.offset, e.data.get("llm_view"), not e.data.get("inferred"))
        results.setdefault(tool, []).append(made)
    inferred_calls = {
        e.data.get("call_id")
        for e in state.events
        if e.kind is EventKind.TOOL and e.data.get("inferred")
    }
    for r in state.tool_results:
        if r.error is None:
            made = SourceResult(first, r.data, r.call_id not in inferred_calls)
            results.setdefault(r.tool, []).append(made)
    picks: dict[str, list[tuple[str, Any]]] = {}
    answers: dict[str, list[Answer]] = {}
    under_way = set(state.active())
    for c in state.collected:
        if (c.sender or state.session.customer_id) != state.sender:
            continue
        if c.secret and c.turn_id != state.turn_id:
            continue  # stored masked: no longer a value
        if c.origin is not None:
            picks.setdefault(c.name, []).append((c.origin, c.value))
        if c.journey_id in under_way or c.turn_id == state.turn_id:
            bound = c.bound is True
            answers.setdefault(c.name, []).append(Answer(c.journey_id, c.value, bound, c.evidence))
    # The author's rules in force (a journey's own step texts are no rule that sets a value:
    # "for example Checking or Savings" names no account the customer chose).
    instructions = [
        (gid, state.agent.guideline(gid).action or "")
        for gid in sorted(state.matches)
        if not is_journey_projection(gid)
        and state.agent.has_guideline(gid)
        and state.agent.guideline(gid).action
    ]
    latest = state.events[-1].created_at if state.events else None
    return Evidence(
        now=[CustomerMessage.of(e) for e in own if e.offset >= first],
        earlier=[CustomerMessage.of(e) for e in own if e.offset < first],
        others=[CustomerMessage.of(e) for e in customer if not state.is_own(e)],
        results=results,
        variables=state.variables(),
        principal=state.principal,
        picks=picks,
        answers=answers,
        instructions=instructions,
        request_starts=dict(state.run_started),
        reading=reading_context(
            state.agent.config.timezone, latest, state.language, state.agent.config.languages
        ),
    )


def clear_call(
    state: TurnState,
    spec: ToolSpec,
    raw_arguments: dict[str, Any],
    journey_id: str | None,
    evidence: Evidence,
    *,
    force_confirmation: str = "",
) -> ClearedCall | None:
    """The call with validated, grounded, agreed arguments — or None, having asked for what is
    missing or for the customer's confirmation (and traced why). `force_confirmation`: why a
    consequential call asks first even with every value given for it."""
    node_id = state.steps.get(journey_id) if journey_id else None
    secret = [p.name for p in spec.parameters if state.secrets.is_secret_parameter(spec, p.name)]
    # A masked secret (from a stored confirmation, or the mask the customer's message now shows)
    # is not a value: the tool needs the real one, so it is missing and asked for again.
    masked = [k for k, v in raw_arguments.items() if k in secret and str(v).strip() == MASK]
    if masked:
        state.questions.append(missing_argument_question(spec, masked))
        trace_tool(
            state,
            spec.name,
            raw_arguments,
            "missing_arguments",
            "a secret is never kept; asked again: " + ", ".join(masked),
        )
        return None
    raw_arguments = _prefer_picks(state, spec, raw_arguments, evidence)
    try:
        arguments = validate_arguments(spec, raw_arguments)
    except ToolArgumentError as exc:
        detail = str(exc)
        for name in secret:
            if raw_arguments.get(name) not in (None, ""):
                # Not a valid value, but the customer's try at the secret all the same (if
                # they typed it): masked in the message they typed it in; the error quoting
                # it is masked below whatever it is.
                remember_typed(state, raw_arguments[name])
                detail = detail.replace(str(raw_arguments[name]), MASK)
        state.questions.append(f"The details for {spec.name} were not valid ({detail}); ask again.")
        trace_tool(state, spec.name, raw_arguments, "invalid_arguments", detail)
        return None
    grounding = ground_call(
        spec,
        arguments,
        evidence,
        journey_id=journey_id,
        journey_fields=_fields_of(state, journey_id),
    )
    for name in secret:
        if name in arguments and name not in grounding.ungrounded:
            # Grounded: the customer typed it. Masked from here on wherever it appears — also
            # when another argument is refused, since the trace still quotes where this one
            # came from.
            state.secrets.remember(arguments[name])
    if grounding.ungrounded:
        state.questions.append(missing_argument_question(spec, grounding.ungrounded))
        trace_tool(
            state,
            spec.name,
            arguments,
            "ungrounded",
            "not given by the customer: " + ", ".join(grounding.ungrounded),
            sources=grounding.describe(),
        )
        return None
    if spec.name in state.declined_tools:
        trace_tool(state, spec.name, arguments, "declined", "the customer said no this turn")
        return None
    retry = bool(journey_id and node_id and state.failed_steps.get(journey_id) == node_id)
    needed, why = needs_confirmation(spec, grounding, retry=retry)
    confirmed = is_confirmed(state, spec, arguments)
    if not needed and spec.consequential and state.confirmed is not None and not confirmed:
        # A yes agrees to the call it was asked for, with the values shown — nothing else.
        needed, why = True, "a yes this turn agreed to another call"
    if not needed and spec.consequential and force_confirmation:
        needed, why = True, force_confirmation
    held = journey_id is not None and state.confirm_steps.get(journey_id) == node_id
    if not needed and spec.consequential and held:
        needed, why = True, "reached when a turn's tool budget ran out: it runs only after a yes"
    if needed and not confirmed:
        if state.pending_confirmation is None:
            request_confirmation(
                state, spec, arguments, journey_id=journey_id, node_id=node_id, retry=retry
            )
        trace_tool(
            state,
            spec.name,
            arguments,
            "awaiting_confirmation",
            why,
            sources=grounding.describe(),
        )
        return None
    return ClearedCall(spec, arguments, journey_id, grounding)


def _fields_of(state: TurnState, journey_id: str | None) -> frozenset[str]:
    """The fields a journey's steps collect (an argument of such a name comes from its answer)."""
    if journey_id is None or not state.agent.has_journey(journey_id):
        return frozenset()
    journey = state.agent.journey(journey_id)
    return frozenset(f.name for node in journey.nodes for f in node.collects)


def _prefer_picks(
    state: TurnState, spec: ToolSpec, arguments: dict[str, Any], evidence: Evidence
) -> dict[str, Any]:
    """A parameter whose name the customer filled by picking an option (or submitting a form)
    gets that value, whatever the model read into their later words ("yes" is not a size). The
    customer changes a pick by picking again."""
    chosen = dict(arguments)
    for param in spec.parameters:
        picks = evidence.picks.get(param.name)
        if not picks:
            continue
        origin, value = picks[-1]
        proposed = chosen.get(param.name)
        if proposed is not None and not same_value(proposed, value):
            state.trace.notes.append(
                f"{spec.name}.{param.name}: "
                f"{state.secrets.mask_named({param.name: proposed})[param.name]!r} replaced by "
                f"{state.secrets.mask_named({param.name: value})[param.name]!r} ({origin})"
            )
        chosen[param.name] = value
    return chosen


def trace_tool(
    state: TurnState,
    tool: str,
    args: dict[str, Any],
    status: str,
    detail: str = "",
    ms: float = 0.0,
    sources: list[str] | None = None,
) -> None:
    spec = state.agent.tool(tool) if state.agent.has_tool(tool) else None
    state.trace.tool_calls.append(
        ToolCallRecord(
            call_id=f"{state.turn_id}:{len(state.trace.tool_calls)}",
            tool=tool,
            arguments=state.secrets.mask_arguments(spec, args),
            status=status,
            detail=state.secrets.scrub_text(detail),
            duration_ms=ms,
            sources=[state.secrets.scrub_text(line) for line in sources or []],
        )
    )
