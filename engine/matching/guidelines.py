"""Guideline matching: which guidelines' conditions hold right now.

Guidelines are routed into batch kinds (observational, actionable, previously applied,
customer-dependent, disambiguation), each kind asks the LLM its own question, and many guidelines
share one call — the batch size is set by a prompt budget, not a fixed count. Outputs are compact:
a short handle, booleans and a 0–10 score per guideline; prose rationales only in explain mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, Field

from engine.context import TurnContext, render_context
from engine.model import Guideline, GuidelineKind, LLMPurpose, Relationship, RelationshipKind
from engine.session import SessionState

MATCH_THRESHOLD = 5  # a verdict with applies=True and a lower score is treated as a weak non-match


class BatchKind(StrEnum):
    OBSERVATIONAL = "observational"
    ACTIONABLE = "actionable"
    PREVIOUSLY_APPLIED = "previously_applied"
    CUSTOMER_DEPENDENT = "customer_dependent"
    DISAMBIGUATION = "disambiguation"


# --------------------------------------------------------------------------------------------------
# Schemas (what the LLM must answer)


class GuidelineVerdict(BaseModel):
    id: str = Field(description="the guideline's handle, e.g. 'g3'")
    applies: bool
    score: int = Field(ge=0, le=10, description="0 = clearly not, 10 = certainly")
    rationale: str = Field(default="", description="a few words; longer only in explain mode")


class GuidelineMatchBatch(BaseModel):
    verdicts: list[GuidelineVerdict]


class CustomerDependentVerdict(BaseModel):
    id: str
    condition_holds: bool
    customer_completed: bool = Field(description="the customer already supplied what was asked")
    score: int = Field(ge=0, le=10)
    rationale: str = ""


class CustomerDependentBatch(BaseModel):
    verdicts: list[CustomerDependentVerdict]


class DisambiguationVerdict(BaseModel):
    head_applies: bool
    is_ambiguous: bool = Field(description="two or more options fit and the customer must choose")
    candidate_ids: list[str] = Field(default_factory=list, description="handles that may fit")
    clarification: str = Field(default="", description="the question to ask, when ambiguous")
    rationale: str = ""


# --------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class GuidelineMatch:
    guideline: Guideline
    score: int
    rationale: str
    batch: BatchKind
    customer_completed: bool = False  # customer-dependent batch only


@dataclass
class MatchingOutcome:
    matches: list[GuidelineMatch] = field(default_factory=list)
    # every verdict, matched or not, for the trace: (guideline id, batch, matched, score, rationale)
    verdicts: list[tuple[str, BatchKind, bool, int, str]] = field(default_factory=list)
    # customer-dependent guidelines whose customer part is now complete
    completed_customer_dependent: list[str] = field(default_factory=list)
    # disambiguation: a transient guideline asking to clarify, replacing the ambiguous targets
    clarifications: list[Guideline] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # guideline ids not evaluated (budget, errors)

    def merge(self, other: MatchingOutcome) -> None:
        self.matches.extend(other.matches)
        self.verdicts.extend(other.verdicts)
        self.completed_customer_dependent.extend(other.completed_customer_dependent)
        self.clarifications.extend(other.clarifications)
        self.skipped.extend(other.skipped)


@dataclass(frozen=True)
class Batch:
    kind: BatchKind
    guidelines: tuple[Guideline, ...]
    head: Guideline | None = None  # disambiguation only

    @property
    def label(self) -> str:
        return f"{self.kind.value}[{len(self.guidelines)}]"


# --------------------------------------------------------------------------------------------------
# Routing and batching (deterministic)


def classify(guideline: Guideline, session: SessionState) -> BatchKind:
    """The batch kind of a guideline in this session (disambiguation heads are routed separately)."""
    if guideline.kind is GuidelineKind.OBSERVATIONAL:
        return BatchKind.OBSERVATIONAL
    if guideline.kind is GuidelineKind.CONTINUOUS:
        return BatchKind.ACTIONABLE
    if guideline.id in session.pending_customer_guideline_ids:
        return BatchKind.CUSTOMER_DEPENDENT
    if guideline.id in session.applied_guideline_ids:
        return BatchKind.PREVIOUSLY_APPLIED
    return BatchKind.ACTIONABLE


def guideline_line(handle: str, g: Guideline) -> str:
    line = f"- [{handle}] when: {g.condition}"
    if g.action:
        line += f"\n    then: {g.action}"
    cd = g.customer_dependent
    if cd:
        line += f"\n    customer must: {cd.customer_action}"
    return line


def plan_batches(
    guidelines: Sequence[Guideline],
    session: SessionState,
    relationships: Sequence[Relationship],
    budget_chars: int,
) -> list[Batch]:
    """Route guidelines to kinds and pack each kind into as few batches as the budget allows."""
    by_id = {g.id: g for g in guidelines}
    disambiguation: dict[str, list[str]] = {}
    for r in relationships:
        if r.kind is RelationshipKind.DISAMBIGUATION and r.source.id in by_id:
            disambiguation.setdefault(r.source.id, []).append(r.target.id)
    batches: list[Batch] = []
    claimed: set[str] = set()
    for head_id, target_ids in disambiguation.items():
        targets = tuple(by_id[t] for t in target_ids if t in by_id)
        if len(targets) >= 2:
            batches.append(Batch(BatchKind.DISAMBIGUATION, targets, head=by_id[head_id]))
            claimed.add(head_id)
    per_kind: dict[BatchKind, list[Guideline]] = {}
    for g in guidelines:
        if g.id in claimed:
            continue
        per_kind.setdefault(classify(g, session), []).append(g)
    for kind in BatchKind:
        members = per_kind.get(kind, [])
        current: list[Guideline] = []
        size = 0
        for g in members:
            cost = len(guideline_line("g00", g)) + 1
            if current and size + cost > budget_chars:
                batches.append(Batch(kind, tuple(current)))
                current, size = [], 0
            current.append(g)
            size += cost
        if current:
            batches.append(Batch(kind, tuple(current)))
    return batches


def handles(batch: Batch) -> dict[str, Guideline]:
    """Short, stable handles ('g1', 'g2', …) per batch: fewer tokens and no id confusion."""
    return {f"g{i}": g for i, g in enumerate(batch.guidelines, start=1)}


# --------------------------------------------------------------------------------------------------
# Prompts (pure functions)

_QUESTIONS: dict[BatchKind, str] = {
    BatchKind.OBSERVATIONAL: (
        "For each guideline below, decide whether its condition is true of the conversation as it "
        "stands now, judged mainly by the customer's latest message(s)."
    ),
    BatchKind.ACTIONABLE: (
        "For each guideline below, decide whether its condition holds now, so the agent should "
        "follow its action in the next reply. A guideline applies only if its condition is true "
        "of the latest part of the conversation; do not match on topics that are already closed."
    ),
    BatchKind.PREVIOUSLY_APPLIED: (
        "The agent already followed each guideline below earlier in this conversation. Decide for "
        "each whether it should be applied AGAIN now: only if its condition has arisen anew (a new "
        "request, a changed situation), not merely because the earlier context is still visible."
    ),
    BatchKind.CUSTOMER_DEPENDENT: (
        "Each guideline below needs something from the customer; the agent has already done its "
        "part. Decide for each whether the condition still holds and whether the customer has "
        "now supplied what was asked."
    ),
}

_OUTPUT_RULES = (
    "Answer with JSON only. One verdict per guideline, using its handle as `id`. `score` is 0-10 "
    "(10 = certainly applies). Keep `rationale` to a few words."
)
_OUTPUT_RULES_EXPLAIN = (
    "Answer with JSON only. One verdict per guideline, using its handle as `id`. `score` is 0-10 "
    "(10 = certainly applies). In `rationale`, explain your reasoning in one or two sentences."
)


def build_match_prompt(ctx: TurnContext, batch: Batch, *, explain: bool = False) -> str:
    """The prompt for one matching batch: shared context, the kind's question, the guidelines."""
    if batch.kind is BatchKind.DISAMBIGUATION:
        return build_disambiguation_prompt(ctx, batch, explain=explain)
    lines = "\n".join(guideline_line(h, g) for h, g in handles(batch).items())
    return "\n\n".join(
        [
            "You evaluate business-rule guidelines for a customer-service agent.",
            render_context(ctx),
            f"Task: {_QUESTIONS[batch.kind]}",
            f"Guidelines:\n{lines}",
            _OUTPUT_RULES_EXPLAIN if explain else _OUTPUT_RULES,
        ]
    )


def build_disambiguation_prompt(ctx: TurnContext, batch: Batch, *, explain: bool = False) -> str:
    assert batch.head is not None
    options = "\n".join(guideline_line(h, g) for h, g in handles(batch).items())
    return "\n\n".join(
        [
            "You check whether a customer's request is ambiguous between several handled cases.",
            render_context(ctx),
            f'Task: first decide whether this holds: "{batch.head.condition}". If it does, decide '
            "which of the options below may be what the customer means. If two or more fit and "
            "the conversation does not settle which, it is ambiguous: write one short question "
            "that lets the customer choose.",
            f"Options:\n{options}",
            "Answer with JSON only; use the option handles in `candidate_ids`."
            + (" Explain briefly in `rationale`." if explain else " Keep `rationale` short."),
        ]
    )


# --------------------------------------------------------------------------------------------------
# Interpreting answers (deterministic)


def interpret_batch(batch: Batch, answer: GuidelineMatchBatch) -> MatchingOutcome:
    out = MatchingOutcome()
    by_handle = handles(batch)
    seen: set[str] = set()
    for v in answer.verdicts:
        g = by_handle.get(v.id.strip())
        if g is None or g.id in seen:
            continue  # unknown or repeated handle: ignore rather than trust
        seen.add(g.id)
        matched = v.applies and v.score >= MATCH_THRESHOLD
        out.verdicts.append((g.id, batch.kind, matched, v.score, v.rationale))
        if matched:
            out.matches.append(GuidelineMatch(g, v.score, v.rationale, batch.kind))
    for g in batch.guidelines:
        if g.id not in seen:
            out.verdicts.append((g.id, batch.kind, False, 0, "no verdict returned"))
    return out


def interpret_customer_dependent(batch: Batch, answer: CustomerDependentBatch) -> MatchingOutcome:
    """Still matched while the condition holds and the customer has not completed their part."""
    out = MatchingOutcome()
    by_handle = handles(batch)
    seen: set[str] = set()
    for v in answer.verdicts:
        g = by_handle.get(v.id.strip())
        if g is None or g.id in seen:
            continue
        seen.add(g.id)
        if v.customer_completed:
            out.completed_customer_dependent.append(g.id)
        matched = v.condition_holds and not v.customer_completed and v.score >= MATCH_THRESHOLD
        out.verdicts.append((g.id, batch.kind, matched, v.score, v.rationale))
        if matched:
            out.matches.append(
                GuidelineMatch(g, v.score, v.rationale, batch.kind, customer_completed=False)
            )
    for g in batch.guidelines:
        if g.id not in seen:
            out.verdicts.append((g.id, batch.kind, False, 0, "no verdict returned"))
    return out


def interpret_disambiguation(batch: Batch, answer: DisambiguationVerdict) -> MatchingOutcome:
    """An ambiguous head becomes one transient guideline that asks the customer to choose; a clear
    case matches the single fitting option."""
    assert batch.head is not None
    out = MatchingOutcome()
    by_handle = handles(batch)
    candidates = [by_handle[h] for h in dict.fromkeys(answer.candidate_ids) if h in by_handle]
    head_score = 10 if answer.head_applies else 0
    out.verdicts.append(
        (batch.head.id, batch.kind, answer.head_applies, head_score, answer.rationale)
    )
    if not answer.head_applies:
        return out
    out.matches.append(GuidelineMatch(batch.head, 10, answer.rationale, batch.kind))
    if answer.is_ambiguous and len(candidates) >= 2:
        names = "; ".join(g.action or g.condition for g in candidates)
        question = answer.clarification or f"Ask the customer which they mean: {names}"
        out.clarifications.append(
            Guideline(
                id=f"{batch.head.id}:clarify",
                condition=batch.head.condition,
                action=f"{question} (options: {names})",
                metadata={"transient": True, "disambiguates": [g.id for g in candidates]},
            )
        )
    elif len(candidates) == 1:
        g = candidates[0]
        out.matches.append(GuidelineMatch(g, 8, "the only fitting option", batch.kind))
    for g in batch.guidelines:
        matched = len(candidates) == 1 and g in candidates
        out.verdicts.append((g.id, batch.kind, matched, 8 if matched else 0, ""))
    return out


# --------------------------------------------------------------------------------------------------
# Running a batch


def schema_for(kind: BatchKind) -> type[BaseModel]:
    if kind is BatchKind.CUSTOMER_DEPENDENT:
        return CustomerDependentBatch
    if kind is BatchKind.DISAMBIGUATION:
        return DisambiguationVerdict
    return GuidelineMatchBatch


def purpose_for(kind: BatchKind) -> LLMPurpose:
    return (
        LLMPurpose.DISAMBIGUATE if kind is BatchKind.DISAMBIGUATION else LLMPurpose.MATCH_GUIDELINES
    )


def interpret(batch: Batch, answer: BaseModel) -> MatchingOutcome:
    if isinstance(answer, CustomerDependentBatch):
        return interpret_customer_dependent(batch, answer)
    if isinstance(answer, DisambiguationVerdict):
        return interpret_disambiguation(batch, answer)
    assert isinstance(answer, GuidelineMatchBatch)
    return interpret_batch(batch, answer)
