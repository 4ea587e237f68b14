"""One evaluator per decision kind: build the engine's real prompt for the case, ask the model
through `TurnLLM` (the engine's own call path), interpret the answer the way a turn does, and
compare the outcome with the label.

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
- tool_arguments: `{calls: {tool: {argument: value}}}` — the calls proposed, with the arguments
  the model gave (known values filled like the tool stage does); `{calls: {}}` for none; a list
  of argument maps for a tool expected to be called several times (any order); `instructions`
  are the other guidelines in force, shown to the tool prompt. Each call then goes through the
  engine's gate (`engine.values.grounding`): a call with every argument the label gives that the
  gate would ask a value for again is not right — a real turn would not run it. The sub-rows
  count what the gate made of each case's calls: runs, confirmed first, asked;
- canned: `{template: id | null}` — the approved template chosen, or none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import date, time
from decimal import Decimal
from typing import Any

from bench.eval.cases import EvalCase, agent, context, journey_path
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
from engine.context import TurnContext
from engine.errors import ToolArgumentError
from engine.llm import TurnLLM
from engine.matching import guidelines as gm
from engine.matching.journeys import select_journey_step
from engine.session import EventKind, EventSource
from engine.stages.confirmation import needs_confirmation
from engine.tool_calls import ToolCallPlan, build_tool_call_prompt, coerce_argument
from engine.tool_spec import ToolSpec
from engine.values.grounding import (
    Answer,
    CustomerMessage,
    Evidence,
    SourceResult,
    ground_call,
    same_value,
)
from engine.values.money import Money
from engine.values.types import written


@dataclass(frozen=True)
class Outcome:
    """What the engine did with the model's answer, and whether it is what the label says."""

    correct: bool
    got: Any
    subkind: str = ""  # e.g. the journey move: advance, stay, backtrack, exit


Evaluator = Callable[[TurnLLM, EvalCase], Awaitable[Outcome]]

_BATCH_KIND = {
    "observational": gm.BatchKind.OBSERVATIONAL,
    "actionable": gm.BatchKind.ACTIONABLE,
    "continuous": gm.BatchKind.ACTIONABLE,  # continuous guidelines are asked as actionable ones
    "previously_applied": gm.BatchKind.PREVIOUSLY_APPLIED,
    "customer_dependent": gm.BatchKind.CUSTOMER_DEPENDENT,
}


async def _guideline_batch(llm: TurnLLM, case: EvalCase, kind: str) -> gm.MatchingOutcome:
    snapshot = agent(case.agent)
    members = tuple(snapshot.guideline(gid) for gid in case.expect)
    batch_kind = _BATCH_KIND[kind]
    pending = tuple(case.expect) if batch_kind is gm.BatchKind.CUSTOMER_DEPENDENT else ()
    if batch_kind is gm.BatchKind.PREVIOUSLY_APPLIED:
        case = case.model_copy(update={"applied": [*case.applied, *case.expect]})
    ctx = context(case, pending=pending)
    batch = gm.Batch(batch_kind, members)
    schema = gm.schema_for(batch_kind)
    prompt = gm.build_match_prompt(ctx, batch)
    generation = await llm.generate(gm.purpose_for(batch_kind), prompt, schema, label=case.id)
    return gm.interpret(batch, generation.value)


def _guideline_evaluator(kind: str) -> Evaluator:
    async def evaluate(llm: TurnLLM, case: EvalCase) -> Outcome:
        outcome = await _guideline_batch(llm, case, kind)
        matched = {m.guideline.id for m in outcome.matches}
        got = {gid: gid in matched for gid in case.expect}
        return Outcome(got == case.expect, got)

    return evaluate


async def _customer_dependent(llm: TurnLLM, case: EvalCase) -> Outcome:
    outcome = await _guideline_batch(llm, case, "customer_dependent")
    matched = {m.guideline.id for m in outcome.matches}
    completed = set(outcome.completed_customer_dependent)
    got = {
        gid: "completed" if gid in completed else "waiting" if gid in matched else "dropped"
        for gid in case.expect
    }
    return Outcome(got == case.expect, got)


async def _disambiguation(llm: TurnLLM, case: EvalCase) -> Outcome:
    snapshot = agent(case.agent)
    if case.head is None:
        raise ValueError(f"disambiguation case {case.id!r} names no `head`")
    head = snapshot.guideline(case.head)
    targets = tuple(
        snapshot.guideline(r.target.id)
        for r in snapshot.relationships
        if r.kind.value == "disambiguation" and r.source.id == head.id
    )
    batch = gm.Batch(gm.BatchKind.DISAMBIGUATION, targets, head=head)
    prompt = gm.build_match_prompt(context(case), batch)
    generation = await llm.generate(
        LLMPurpose.DISAMBIGUATE, prompt, gm.DisambiguationVerdict, label=case.id
    )
    outcome = gm.interpret(batch, generation.value)
    got: dict[str, Any]
    if not any(m.guideline.id == head.id for m in outcome.matches):
        got = {"unrelated": True}
    elif outcome.clarifications:
        options = outcome.clarifications[0].metadata.get("disambiguates", [])
        got = {"ask": sorted(options)}
    else:
        picked = [m.guideline.id for m in outcome.matches if m.guideline.id != head.id]
        got = {"pick": picked[0] if picked else None}
    want = dict(case.expect)
    if "ask" in want:
        want["ask"] = sorted(want["ask"])
    return Outcome(got == want, got)


async def _select(llm: TurnLLM, case: EvalCase) -> tuple[str, dict[str, Any], str]:
    """The verified step (node id, END or EXIT), the typed values and the journey move."""
    snapshot = agent(case.agent)
    assert case.journey is not None
    journey = snapshot.journey(case.journey)
    result = await select_journey_step(
        llm,
        context(case),
        journey,
        journey_path(case),
        executed_tools=set(case.ran),
        max_depth=snapshot.config.max_journey_depth,
    )
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


async def _tool_arguments(llm: TurnLLM, case: EvalCase) -> Outcome:
    snapshot = agent(case.agent)
    specs = [snapshot.tool(name) for name in case.offered]
    ctx = context(case)
    prompt = build_tool_call_prompt(
        ctx, specs, case.offered, case.known, instructions=case.instructions
    )
    generation = await llm.generate(LLMPurpose.CALL_TOOLS, prompt, ToolCallPlan, label=case.id)
    want: dict[str, Any] = case.expect.get("calls", {})
    got: dict[str, Any] = {}
    verdicts: list[str] = []
    evidence = gate_evidence(case, ctx)
    for call in generation.value.calls:
        several = isinstance(want.get(call.tool), list)  # the case expects repeated calls
        if call.tool not in case.offered or (call.tool in got and not several):
            continue  # the tool stage refuses calls to tools it did not offer
        spec = snapshot.tool(call.tool)
        args: dict[str, Any] = {a.name: a.value for a in call.arguments}
        for param in spec.parameters:  # known values fill what the model left out, as in a turn
            if param.name not in args and case.known.get(param.name) not in (None, ""):
                args[param.name] = case.known[param.name]
        typed: dict[str, Any] = {}
        for param in spec.parameters:
            if param.name in args and args[param.name] not in (None, ""):
                try:
                    typed[param.name] = coerce_argument(param, args[param.name])
                except ToolArgumentError:
                    typed[param.name] = f"<invalid {args[param.name]!r}>"
        verdicts.append(gate_verdict(spec, typed, evidence))
        if several:
            got.setdefault(call.tool, []).append(typed)
        else:
            got[call.tool] = typed
    labelled = set(got) == set(want) and all(_same_calls(got[t], want[t]) for t in want)
    # A right call the gate would not let run (it asks for a value the label says was given)
    # is what a real turn does with it: asked again, so it is not counted right.
    asked_wrongly = any(v == "asked" for v in verdicts) and all(
        _complete(snapshot.tool(t), w) for t, w in want.items()
    )
    subkind = "no call" if not verdicts else max(verdicts, key=GATE_ORDER.index)
    return Outcome(labelled and not asked_wrongly, got, f"gate: {subkind}")


# What the gate makes of a call, least to most held back.
GATE_ORDER = ("runs", "confirmed first", "asked")


def gate_evidence(case: EvalCase, ctx: TurnContext) -> Evidence:
    """What a turn's gate would trace the case's arguments to: its customer messages (the last
    ones are this turn), the results of tools in view, the values already known (answers), its
    variables and the instructions in force."""
    first = ctx.session.next_offset()
    customer = [
        e for e in ctx.history if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]
    results: dict[str, list[SourceResult]] = {}
    for e in ctx.history:
        if e.kind is EventKind.TOOL:
            tool = str(e.data.get("tool", ""))
            results.setdefault(tool, []).append(SourceResult(e.offset, e.data.get("llm_view")))
    for name, data in case.ran.items():
        results.setdefault(name, []).append(SourceResult(first, data))
    answers = {
        name: [Answer(case.journey or "", value, True, "known")]
        for name, value in case.known.items()
    }
    return Evidence(
        now=[CustomerMessage.of(e) for e in customer if e.offset >= first],
        earlier=[CustomerMessage.of(e) for e in customer if e.offset < first],
        results=results,
        variables=dict(case.variables),
        answers=answers,
        instructions=[(f"instruction-{i}", t) for i, t in enumerate(case.instructions, 1)],
        reading=ctx.reading,
    )


def gate_verdict(spec: ToolSpec, typed: dict[str, Any], evidence: Evidence) -> str:
    """Whether the engine's gate (`engine.values.grounding`) would run this call, show it to the
    customer first, or ask for a value."""
    clean = {k: v for k, v in typed.items() if not str(v).startswith("<invalid")}
    grounding = ground_call(spec, clean, evidence)
    missing = [p.name for p in spec.parameters if p.required and p.name not in clean]
    if grounding.ungrounded or missing or len(clean) != len(typed):
        return "asked"
    needed, _ = needs_confirmation(spec, grounding, retry=False)
    return "confirmed first" if needed else "runs"


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
