"""One evaluator per decision kind: put the case in the state of the turn that decides it
(`bench.eval.turn_state`), let the stage functions a real turn calls ask the model through
`TurnLLM` — so the prompt is the one turns send, the packed matching batch included — interpret
the answer the way the turn does, and compare the outcome with the label.

How each kind is asked, as a turn asks it:
- the guideline kinds (observational, actionable, previously applied, customer-dependent,
  continuous, disambiguation): recall (`engine.stages.recall`) then the match round's batches
  (`engine.stages.match.match_guidelines`): every guideline recall keeps is in the prompt —
  the observational, actionable and previously-applied checks packed in one call while they fit
  the budget, customer-dependent ones and each disambiguation head in their own — and only the
  labelled ones are scored. A case whose `ran` tools returned results this turn is matched again
  after them as the tool stage does (`rematch_after_tools`: the guidelines that opt in);
- journey_node and values: `engine.stages.journey_progress.select_step`, the one entry every
  stage moves a journey through (a journey not under way — never started, or left — is
  selected from its start, as a turn does);
- tool_arguments: the tool stage's planning (`engine.stages.tools.plan_calls`: arguments known
  by name fill the call, and a tool whose arguments are all known runs without asking the
  model) and then the action gate (`engine.stages.action_gate.clear_call`), call by call;
- canned: the canned prompt builder (`engine.compose.build_canned_prompt`) on the case's
  instructions and templates — not yet through the compose stage, which needs the whole turn's
  resolution to pick instructions and templates.

Labels (`expect`) per kind:
- observational / actionable / previously_applied / continuous: `{guideline_id: true|false}` —
  whether the engine treats each guideline as matched;
- customer_dependent: `{guideline_id: waiting|completed|dropped}` — still waiting for the
  customer, the customer supplied what was asked, or the condition no longer holds;
- disambiguation: `{ask: [ids]}` (ask the customer to choose among them), `{pick: id}` (one option
  fits), `{pick: null}` (the head holds but no option does) or `{unrelated: true}` (the head does not
  hold);
- journey_node: `{step: node_id | END | EXIT}` — the verified step after the turn, the journey
  completed, or dropped; optional `values` checked as well;
- values: `{values: {field: value}}` — exactly the typed values accepted this turn; optional
  `step` (e.g. staying on a step after a refused value);
- tool_arguments: `{calls: {tool: {argument: value}}}` — the calls proposed, with their
  arguments (known values filled like the tool stage does); `{calls: {}}` for none; a list of
  argument maps for a tool expected to be called several times (any order); `offered` are the
  tools the matched guidelines or the journey's tool step offer (tool → why), `instructions` the
  other guidelines in force, shown to the tool prompt and to the gate as a turn shows theirs.
  Each call then goes through the engine's action gate: a call with every argument the label
  gives that the gate would not run without asking a value again is not right — a real turn
  would not run it. The sub-rows count what the gate made of each case's calls: runs,
  confirmed first, asked;
- canned: `{template: id | null}` — the approved template chosen, or none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date, time
from decimal import Decimal
from typing import Any

from bench.eval.cases import EvalCase, agent, context
from bench.eval.turn_state import add_results, turn_state
from engine.agent_config import LLMPurpose
from engine.compose import (
    CannedChoice,
    CompositionInput,
    Instruction,
    Template,
    build_canned_prompt,
    field_values,
    fillable,
)
from engine.errors import LLMError, ToolArgumentError
from engine.llm import TurnLLM
from engine.matching import guidelines as gm
from engine.model import NodeKind
from engine.stages.action_gate import clear_call, evidence_for
from engine.stages.journey_progress import select_step
from engine.stages.match import absorb_matches, match_guidelines
from engine.stages.recall import recall
from engine.stages.state import TurnState
from engine.stages.tools import PlannedCall, known_for_arguments, plan_calls, rematch_after_tools
from engine.tools.calls import coerce_argument, fill_arguments
from engine.tools.spec import ToolSpec
from engine.values.grounding import same_value
from engine.values.money import Money
from engine.values.types import written


@dataclass(frozen=True)
class Outcome:
    """What the engine did with the model's answer, and whether it is what the label says."""

    correct: bool
    got: Any
    subkind: str = ""  # e.g. the journey move: advance, stay, backtrack, exit


Evaluator = Callable[[TurnLLM, EvalCase], Awaitable[Outcome]]


class ModelCallFailed(LLMError):
    """A model call of the case failed: the stage went on without it (as a turn does), and the
    evaluation reports the failure rather than a wrong answer."""


def _failed(state: TurnState, what: str) -> ModelCallFailed:
    notes = [n for n in state.trace.notes if "failed" in n]
    return ModelCallFailed("; ".join(notes) or f"{what}: the model call failed")


# The session state that routes a labelled guideline to the batch its kind names.
_BATCH_KIND = {
    "observational": gm.BatchKind.OBSERVATIONAL,
    "actionable": gm.BatchKind.ACTIONABLE,
    "continuous": gm.BatchKind.ACTIONABLE,  # continuous guidelines are asked as actionable ones
    "previously_applied": gm.BatchKind.PREVIOUSLY_APPLIED,
    "customer_dependent": gm.BatchKind.CUSTOMER_DEPENDENT,
    "disambiguation": gm.BatchKind.DISAMBIGUATION,
}


async def matched_in_turn(
    llm: TurnLLM, case: EvalCase, kind: str
) -> tuple[TurnState, gm.MatchingOutcome]:
    """The case's turn through recall and the match round (and, when tools ran this turn, the
    tool stage's re-matching): the state it leaves, and the round's outcome. The labelled
    guidelines are routed as the case's kind says — applied earlier for previously_applied,
    waiting for the customer for customer_dependent."""
    batch_kind = _BATCH_KIND[kind]
    pending = tuple(case.expect) if batch_kind is gm.BatchKind.CUSTOMER_DEPENDENT else ()
    if batch_kind is gm.BatchKind.PREVIOUSLY_APPLIED:
        case = case.model_copy(update={"applied": [*case.applied, *case.expect]})
    state = turn_state(case, llm, pending=pending, with_results=False)
    ctx = state.context()
    recalled = await recall(state, ctx, None)
    outcome = await match_guidelines(state, ctx, recalled.to_match)
    absorb_matches(state, outcome)
    if outcome.skipped:
        raise _failed(state, "matching")
    if case.ran:
        add_results(state, case)
        await rematch_after_tools(state)
        if any("failed" in n for n in state.trace.notes):
            raise _failed(state, "matching after tools")
    return state, outcome


def _guideline_evaluator(kind: str) -> Evaluator:
    async def evaluate(llm: TurnLLM, case: EvalCase) -> Outcome:
        state, _ = await matched_in_turn(llm, case, kind)
        got = {gid: gid in state.matches for gid in case.expect}
        return Outcome(got == case.expect, got)

    return evaluate


async def _customer_dependent(llm: TurnLLM, case: EvalCase) -> Outcome:
    state, _ = await matched_in_turn(llm, case, "customer_dependent")
    completed = set(state.completed_customer_dependent)
    got = {
        gid: "completed" if gid in completed else "waiting" if gid in state.matches else "dropped"
        for gid in case.expect
    }
    return Outcome(got == case.expect, got)


async def _disambiguation(llm: TurnLLM, case: EvalCase) -> Outcome:
    """Read from the head's own batch: whether the head held, and then the question it asks or
    the one option it picks (the options are also matched in the packed batch, as in a turn;
    that is the other kinds' concern)."""
    if case.head is None:
        raise ValueError(f"disambiguation case {case.id!r} names no `head`")
    _, outcome = await matched_in_turn(llm, case, "disambiguation")
    mine = [v for v in outcome.verdicts if v[1] is gm.BatchKind.DISAMBIGUATION]
    head_holds = any(gid == case.head and matched for gid, _, matched, _, _ in mine)
    clarify = [c for c in outcome.clarifications if c.id == f"{case.head}:clarify"]
    got: dict[str, Any]
    if not head_holds:
        got = {"unrelated": True}
    elif clarify:
        got = {"ask": sorted(clarify[0].metadata.get("disambiguates", []))}
    else:
        picked = [gid for gid, _, matched, _, _ in mine if matched and gid != case.head]
        got = {"pick": picked[0] if picked else None}
    want = dict(case.expect)
    if "ask" in want:
        want["ask"] = sorted(want["ask"])
    return Outcome(got == want, got)


async def _select(llm: TurnLLM, case: EvalCase) -> tuple[str, dict[str, Any], str]:
    """The verified step (node id, END or EXIT), the typed values and the journey move."""
    assert case.journey is not None
    state = turn_state(case, llm)
    result = await select_step(state, state.context(), state.agent.journey(case.journey))
    if result is None:
        raise _failed(state, "node selection")
    step = result.step
    where = "EXIT" if step.outcome == "exit" else step.node_id or "END"
    return where, dict(result.collected), _move(case, where)


def _move(case: EvalCase, where: str) -> str:
    want = str(case.expect.get("step", where))
    if want == "EXIT":
        return "exit"
    here = case.path[-1] if case.path else None
    if want == here:
        return "stay"
    if want in case.path:
        return "backtrack"
    return "advance"


def _same(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return got is want
    if isinstance(got, Decimal) or isinstance(want, Decimal):
        try:
            return Decimal(str(got)) == Decimal(str(want))
        except ArithmeticError:
            return False
    if isinstance(got, date | time | Money):
        return same_value(got, want)  # typed values meet their writing ("2026-03-04", "15:00")
    if isinstance(got, str) and isinstance(want, str):
        return got.strip().lower() == want.strip().lower()
    if isinstance(got, int | float) and isinstance(want, int | float | str):
        try:
            return Decimal(str(got)) == Decimal(str(want))
        except ArithmeticError:
            return False
    return bool(got == want)


def _same_values(got: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    return set(got) == set(want) and all(_same(got[k], want[k]) for k in want)


async def _journey_node(llm: TurnLLM, case: EvalCase) -> Outcome:
    where, values, move = await _select(llm, case)
    correct = where == case.expect["step"]
    if "values" in case.expect:
        correct = correct and _same_values(values, case.expect["values"])
    return Outcome(correct, {"step": where, "values": _plain(values)}, move)


async def _values(llm: TurnLLM, case: EvalCase) -> Outcome:
    where, values, _ = await _select(llm, case)
    correct = _same_values(values, case.expect.get("values", {}))
    if "step" in case.expect:
        correct = correct and where == case.expect["step"]
    subkind = "refusal" if not case.expect.get("values") else "value"
    return Outcome(correct, {"step": where, "values": _plain(values)}, subkind)


# What the gate makes of a call, least to most held back.
GATE_ORDER = ("runs", "confirmed first", "asked")


async def _tool_arguments(llm: TurnLLM, case: EvalCase) -> Outcome:
    state = turn_state(case, llm)
    calls, proposed = await planned_calls(state, case)
    want: dict[str, Any] = case.expect.get("calls", {})
    got: dict[str, Any] = {}
    for spec, args in proposed:
        typed = _typed(spec, args)
        if isinstance(want.get(spec.name), list):  # the case expects repeated calls
            got.setdefault(spec.name, []).append(typed)
        else:
            got.setdefault(spec.name, typed)
    verdicts = gate_verdicts(state, case, calls) + ["asked"] * (len(proposed) - len(calls))
    labelled = set(got) == set(want) and all(_same_calls(got[t], want[t]) for t in want)
    # A right call the gate would not let run (it asks for a value the label says was given)
    # is what a real turn does with it: asked again, so it is not counted right.
    asked_wrongly = any(v == "asked" for v in verdicts) and all(
        _complete(state.agent.tool(t), w) for t, w in want.items()
    )
    subkind = "no call" if not verdicts else max(verdicts, key=GATE_ORDER.index)
    return Outcome(labelled and not asked_wrongly, got, f"gate: {subkind}")


async def planned_calls(
    state: TurnState, case: EvalCase
) -> tuple[list[PlannedCall], list[tuple[ToolSpec, dict[str, Any]]]]:
    """The tool stage's calls for the case's `offered` tools: a journey tool step whose
    arguments are all known is called as it is, the rest are planned (`plan_calls`). Returns the
    calls that go to the gate, and every call proposed — those also held back for a missing
    argument — with its arguments."""
    known = known_for_arguments(state)
    offered = {t: why for t, why in case.offered.items() if t not in state.executed_tools}
    calls: list[PlannedCall] = []
    step_of_tool: dict[str, str] = {}
    node_id = case.path[-1] if case.journey and case.path else None
    if case.journey and node_id and node_id != "EXIT":
        node = state.agent.journey(case.journey).node(node_id)
        for name in [t for t in node.tools if t in offered] if node.kind is NodeKind.TOOL else []:
            args, missing = fill_arguments(state.agent.tool(name), known)
            if missing:
                step_of_tool[name] = case.journey
            else:
                calls.append((state.agent.tool(name), args, case.journey))
                del offered[name]
    notes = len(state.trace.notes)
    planned = await plan_calls(state, offered, known, lambda _asked: list(case.instructions))
    if any("failed" in n for n in state.trace.notes[notes:]):
        raise _failed(state, "tool planning")
    calls.extend((spec, args, step_of_tool.get(spec.name)) for spec, args, _ in planned)
    proposed = [(spec, args) for spec, args, _ in calls]
    for record in state.trace.tool_calls:
        if record.status == "missing_arguments" and state.agent.has_tool(record.tool):
            proposed.append((state.agent.tool(record.tool), dict(record.arguments)))
    return calls, proposed


def gate_verdicts(state: TurnState, case: EvalCase, calls: list[PlannedCall]) -> list[str]:
    """What the engine's action gate (`clear_call`) makes of each call: it runs, it is shown
    to the customer first, or a value is asked for. The case's `instructions` stand for the
    guidelines in force, whose actions may set a value."""
    evidence = evidence_for(state)
    shown = [(f"instruction-{i}", t) for i, t in enumerate(case.instructions, 1)]
    evidence = replace(evidence, instructions=[*evidence.instructions, *shown])
    verdicts = []
    for spec, args, journey_id in calls:
        before = len(state.trace.tool_calls)
        cleared = clear_call(state, spec, args, journey_id, evidence)
        statuses = [r.status for r in state.trace.tool_calls[before:]]
        if cleared is not None:
            verdicts.append("runs")
        elif "awaiting_confirmation" in statuses:
            verdicts.append("confirmed first")
        else:
            verdicts.append("asked")
    return verdicts


def _typed(spec: ToolSpec, args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as the tool would get them (an invalid one marked, for the report)."""
    typed: dict[str, Any] = {}
    for param in spec.parameters:
        if param.name in args and args[param.name] not in (None, ""):
            try:
                typed[param.name] = coerce_argument(param, args[param.name])
            except ToolArgumentError:
                typed[param.name] = f"<invalid {args[param.name]!r}>"
    return typed


def _complete(spec: ToolSpec, wanted: Any) -> bool:
    """Whether a labelled call gives every required argument (a call labelled without one is
    meant to be asked)."""
    calls = wanted if isinstance(wanted, list) else [wanted or {}]
    return all(all(p.name in c for p in spec.parameters if p.required) for c in calls)


def _same_calls(got: Any, want: Any) -> bool:
    """One call's arguments, or — when the case lists several — the same calls in any order."""
    if not isinstance(want, list):
        return _same_values(got, want or {})
    remaining = list(got)
    for wanted in want:
        found = next((g for g in remaining if _same_values(g, wanted or {})), None)
        if found is None:
            return False
        remaining.remove(found)
    return not remaining


async def _canned(llm: TurnLLM, case: EvalCase) -> Outcome:
    snapshot = agent(case.agent)
    ctx = context(case)
    in_scope = [
        c for c in snapshot.canned_responses if case.templates is None or c.id in case.templates
    ]
    values = field_values(list(case.ran.values()), [], case.known, case.variables)
    candidates = fillable([Template("", c.id, c.template) for c in in_scope], values)
    candidates = [Template(f"t{i}", t.source_id, t.text) for i, t in enumerate(candidates, 1)]
    data = CompositionInput(
        instructions=[
            Instruction(f"i{i}", text, f"instruction-{i}")
            for i, text in enumerate(case.instructions, 1)
        ],
        collected=dict(case.known),
    )
    prompt = build_canned_prompt(ctx, data, candidates, values, strict=case.strict)
    generation = await llm.generate(LLMPurpose.COMPOSE, prompt, CannedChoice, label=case.id)
    chosen = next((t for t in candidates if t.handle == generation.value.template), None)
    got = chosen.source_id if chosen else None
    return Outcome(got == case.expect.get("template"), {"template": got})


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: written(v) if isinstance(v, Decimal | date | time) else v for k, v in values.items()}


EVALUATORS: dict[str, Evaluator] = {
    "observational": _guideline_evaluator("observational"),
    "actionable": _guideline_evaluator("actionable"),
    "previously_applied": _guideline_evaluator("previously_applied"),
    "continuous": _guideline_evaluator("continuous"),
    "customer_dependent": _customer_dependent,
    "disambiguation": _disambiguation,
    "journey_node": _journey_node,
    "values": _values,
    "tool_arguments": _tool_arguments,
    "canned": _canned,
}
