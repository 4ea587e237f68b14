"""Guideline matching: which guidelines' conditions hold right now.

Guidelines are routed into batch kinds (observational, actionable, previously applied,
customer-dependent, disambiguation), each kind has its own rules (`match_guidance`), and many
guidelines share one call: the observational, actionable and previously-applied checks are packed
into one prompt while they fit the prompt budget, and split into parallel batches by kind above
it. Outputs are compact and rationale-first: a handle, the reasoning the decision needs, then the
verdict; a guideline the model did not answer is asked once more, then reported (`unanswered`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, Field

from engine.agent_config import LLMPurpose
from engine.context import TurnContext, render_agent_context, render_turn_context
from engine.matching import match_guidance as guide
from engine.matching.guideline_lines import guideline_line, line_cost
from engine.model import Guideline, GuidelineKind, Relationship, RelationshipKind
from engine.prompt_text import Prompt, stable_then_turn
from engine.sessions.session import SessionState

MATCH_THRESHOLD = 5  # a verdict with applies=True and a lower score is treated as a weak non-match


class BatchKind(StrEnum):
    OBSERVATIONAL = "observational"
    ACTIONABLE = "actionable"
    PREVIOUSLY_APPLIED = "previously_applied"
    CUSTOMER_DEPENDENT = "customer_dependent"
    DISAMBIGUATION = "disambiguation"
    PACKED = "packed"  # observational, actionable and previously-applied checks in one call


# The kinds that share the GuidelineMatchBatch answer and so can share one call, in the order a
# packed prompt lists them: the actionable guidelines first (the most, and they leave the group
# only once applied), then the observations (a journey's start drops out once it runs), then
# the actions already taken; a prompt cache serves the groups up to the first that changed.
PACKABLE = (BatchKind.ACTIONABLE, BatchKind.OBSERVATIONAL, BatchKind.PREVIOUSLY_APPLIED)


# --------------------------------------------------------------------------------------------------
# Schemas (what the LLM must answer)


class GuidelineVerdict(BaseModel):
    """Rationale before verdict: a model that writes its evidence first decides by it."""

    id: str = Field(description="the guideline's handle, e.g. 'g3'")
    rationale: str = Field(
        default="", description="the evidence that decides the verdict, as long as it needs"
    )
    applies: bool
    score: int = Field(ge=0, le=10, description="0 = clearly not, 10 = certainly")


class GuidelineMatchBatch(BaseModel):
    verdicts: list[GuidelineVerdict]


class CustomerDependentVerdict(BaseModel):
    id: str
    rationale: str = Field(
        default="", description="the evidence that decides the verdict, as long as it needs"
    )
    condition_holds: bool
    customer_completed: bool = Field(
        description="the customer supplied what was asked, for the matter it was asked for"
    )
    new_context: bool = Field(
        default=False,
        description="the same need arose for another matter (a second account): ask again",
    )
    score: int = Field(ge=0, le=10)


class CustomerDependentBatch(BaseModel):
    verdicts: list[CustomerDependentVerdict]


class DisambiguationVerdict(BaseModel):
    rationale: str = Field(
        default="", description="the evidence that decides the verdict, as long as it needs"
    )
    head_applies: bool
    is_ambiguous: bool = Field(description="two or more options fit and the customer must choose")
    candidate_ids: list[str] = Field(default_factory=list, description="handles that may fit")
    clarification: str = Field(default="", description="the question to ask, when ambiguous")


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
    # guideline ids the model gave no verdict for: asked once more, then reported, never a
    # silent non-match (`engine.stages.match`)
    unanswered: list[str] = field(default_factory=list)

    def merge(self, other: MatchingOutcome) -> None:
        self.matches.extend(other.matches)
        self.unanswered.extend(other.unanswered)
        self.verdicts.extend(other.verdicts)
        self.completed_customer_dependent.extend(other.completed_customer_dependent)
        self.clarifications.extend(other.clarifications)
        self.skipped.extend(other.skipped)


@dataclass(frozen=True)
class Batch:
    kind: BatchKind
    guidelines: tuple[Guideline, ...]
    head: Guideline | None = None  # disambiguation only
    kinds: tuple[BatchKind, ...] = ()  # a packed batch: each guideline's own kind, in order

    @property
    def label(self) -> str:
        return f"{self.kind.value}[{len(self.guidelines)}]"

    def kind_of(self, index: int) -> BatchKind:
        """The kind of the guideline at `index` (its own kind in a packed batch)."""
        return self.kinds[index] if self.kinds else self.kind

    def only(self, guideline_ids: Sequence[str]) -> Batch:
        """The same question for a subset of its guidelines (a retry of the unanswered ones)."""
        keep = [i for i, g in enumerate(self.guidelines) if g.id in set(guideline_ids)]
        kinds = tuple(self.kind_of(i) for i in keep)
        kind = kinds[0] if len(set(kinds)) == 1 else self.kind
        return Batch(
            kind,
            tuple(self.guidelines[i] for i in keep),
            self.head,
            kinds if kind is BatchKind.PACKED else (),
        )


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


# id(relationships tuple) → (the tuple, disambiguation head id → target ids, in its order)
_HEADS: dict[int, tuple[Sequence[Relationship], dict[str, list[str]]]] = {}
_HEADS_LIMIT = 64


def _disambiguation_heads(relationships: Sequence[Relationship]) -> dict[str, list[str]]:
    """Every disambiguation head's targets, once per agent version (an agent's relationships are
    a tuple; thousands of dependencies need not be walked per turn to find no head)."""
    cached = _HEADS.get(id(relationships))
    if cached is not None and cached[0] is relationships:
        return cached[1]
    heads: dict[str, list[str]] = {}
    for r in relationships:
        if r.kind is RelationshipKind.DISAMBIGUATION:
            heads.setdefault(r.source.id, []).append(r.target.id)
    if isinstance(relationships, tuple):  # a list could change under the cache
        if len(_HEADS) >= _HEADS_LIMIT:
            _HEADS.pop(next(iter(_HEADS)))
        _HEADS[id(relationships)] = (relationships, heads)
    return heads


def plan_batches(
    guidelines: Sequence[Guideline],
    session: SessionState,
    relationships: Sequence[Relationship],
    budget_chars: int,
) -> list[Batch]:
    """Route guidelines to kinds and pack each kind into as few batches as the budget allows."""
    by_id = {g.id: g for g in guidelines}
    heads = _disambiguation_heads(relationships)
    # (in the relationships' order of first appearance, as walking them would give)
    disambiguation = {h: t for h, t in heads.items() if h in by_id} if heads else {}
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
    packable = [(k, g) for k in PACKABLE for g in per_kind.get(k, [])]
    if len({k for k, _ in packable}) > 1 and sum(_cost(g) for _, g in packable) <= budget_chars:
        # one call answers all three questions (each kind keeps its own rules in the prompt)
        batches.append(
            Batch(
                BatchKind.PACKED,
                tuple(g for _, g in packable),
                kinds=tuple(k for k, _ in packable),
            )
        )
        per_kind = {k: v for k, v in per_kind.items() if k not in PACKABLE}
    for kind in BatchKind:
        members = per_kind.get(kind, [])
        current: list[Guideline] = []
        size = 0
        for g in members:
            cost = _cost(g)
            if current and size + cost > budget_chars:
                batches.append(Batch(kind, tuple(current)))
                current, size = [], 0
            current.append(g)
            size += cost
        if current:
            batches.append(Batch(kind, tuple(current)))
    return batches


def _cost(g: Guideline) -> int:
    return line_cost(g) + 1


def handles(batch: Batch) -> dict[str, Guideline]:
    """Short, stable handles ('g1', 'g2', …) per batch: fewer tokens and no id confusion."""
    return {f"g{i}": g for i, g in enumerate(batch.guidelines, start=1)}


# --------------------------------------------------------------------------------------------------
# Prompts (pure functions)

_GROUPS: dict[BatchKind, tuple[str, str]] = {
    BatchKind.OBSERVATIONAL: (guide.OBSERVATIONAL_TITLE, guide.OBSERVATIONAL_RULES),
    BatchKind.ACTIONABLE: (guide.ACTIONABLE_TITLE, guide.ACTIONABLE_RULES),
    BatchKind.PREVIOUSLY_APPLIED: (guide.PREVIOUSLY_APPLIED_TITLE, guide.PREVIOUSLY_APPLIED_RULES),
    BatchKind.CUSTOMER_DEPENDENT: (guide.CUSTOMER_DEPENDENT_TITLE, guide.CUSTOMER_DEPENDENT_RULES),
}

_VERDICT_SHAPE = '{"id": "g1", "rationale": "<RATIONALE>", "applies": true, "score": 8}'
_CUSTOMER_SHAPE = (
    '{"id": "g1", "rationale": "<RATIONALE>", "condition_holds": true, '
    '"customer_completed": false, "new_context": false, "score": 8}'
)


def build_match_prompt(ctx: TurnContext, batch: Batch, *, explain: bool = False) -> Prompt:
    """The prompt for one matching batch. Its stable prefix first — the role, the agent and its
    glossary, the shared rules — then the count to answer for and one group per kind (its rules,
    examples and guidelines), then the turn's context, then the answer shape: a provider's prompt
    cache serves the prefix the turns of a session share."""
    if batch.kind is BatchKind.DISAMBIGUATION:
        return build_disambiguation_prompt(ctx, batch, explain=explain)
    count = len(batch.guidelines)
    shape = _CUSTOMER_SHAPE if batch.kind is BatchKind.CUSTOMER_DEPENDENT else _VERDICT_SHAPE
    rationale = guide.RATIONALE_EXPLAIN if explain else guide.RATIONALE_SHAPE
    # Stable: the role, the agent, the shared rules. The groups follow the batch (a guideline
    # moves to "previously applied" once applied), so they are the turn's part.
    return stable_then_turn(
        [guide.ROLE, render_agent_context(ctx), guide.SHARED_RULES],
        [
            *_group_texts(batch),
            f"Task: {guide.count_text(count)} above; give every one a verdict. "
            + guide.RATIONALE_RULE,
            render_turn_context(ctx),
            f'Answer with JSON only: {{"verdicts": [{shape.replace("<RATIONALE>", rationale)}, '
            f"...]}} with exactly {count} verdict{'s' if count != 1 else ''}, one per handle, "
            "in order. score: 10 = certainly, 0 = certainly not.",
        ],
    )


def _group_texts(batch: Batch) -> list[str]:
    """One text per kind present, guidelines in handle order (a packed batch lists its kinds in
    `PACKABLE` order, so each group is one contiguous range of handles)."""
    groups: list[tuple[BatchKind, list[str]]] = []
    for i, (handle, g) in enumerate(handles(batch).items()):
        kind = batch.kind_of(i)
        if not groups or groups[-1][0] is not kind:
            groups.append((kind, []))
        groups[-1][1].append(guideline_line(handle, g))
    texts = []
    for kind, lines in groups:
        title, rules = _GROUPS[kind]
        first, last = lines[0].split("]", 1)[0][3:], lines[-1].split("]", 1)[0][3:]
        span = first if first == last else f"{first}–{last}"
        texts.append(f"### {title} ({span})\n{rules}\nGuidelines:\n" + "\n".join(lines))
    return texts


def build_disambiguation_prompt(ctx: TurnContext, batch: Batch, *, explain: bool = False) -> Prompt:
    assert batch.head is not None
    options = "\n".join(guideline_line(h, g) for h, g in handles(batch).items())
    return stable_then_turn(
        [
            "You are the customer-service agent described below. Before your next reply, check "
            "whether the customer's request is ambiguous between several cases you handle.",
            render_agent_context(ctx),
        ],
        [
            f'Task: first decide whether this holds: "{batch.head.condition}". If it does, decide '
            "which of the options below may be what the customer means. If two or more fit and "
            "the conversation does not settle which, it is ambiguous: write one short question "
            "that lets the customer choose.",
            guide.DISAMBIGUATION_RULES,
            f"Options:\n{options}",
            render_turn_context(ctx),
            "Answer with JSON only, `rationale` first; use the option handles in `candidate_ids`."
            + (
                " `rationale`: explain your reasoning in full, for a person reading the trace."
                if explain
                else " `rationale`: the evidence that settles it, as long as that needs."
            ),
        ],
    )


# --------------------------------------------------------------------------------------------------
# Interpreting answers (deterministic)


def interpret_batch(batch: Batch, answer: GuidelineMatchBatch) -> MatchingOutcome:
    out = MatchingOutcome()
    by_handle = handles(batch)
    kind_of = {g.id: batch.kind_of(i) for i, g in enumerate(batch.guidelines)}
    seen: set[str] = set()
    for v in answer.verdicts:
        g = by_handle.get(v.id.strip())
        if g is None or g.id in seen:
            continue  # unknown or repeated handle: ignore rather than trust
        seen.add(g.id)
        matched = v.applies and v.score >= MATCH_THRESHOLD
        kind = kind_of[g.id]
        out.verdicts.append((g.id, kind, matched, v.score, v.rationale))
        if matched:
            out.matches.append(GuidelineMatch(g, v.score, v.rationale, kind))
    out.unanswered.extend(g.id for g in batch.guidelines if g.id not in seen)
    return out


def interpret_customer_dependent(batch: Batch, answer: CustomerDependentBatch) -> MatchingOutcome:
    """Still matched while the condition holds and the customer has not completed their part —
    or when the same need arose for another matter (`new_context`): then the agent asks again
    and keeps waiting, whatever the customer gave for the earlier one."""
    out = MatchingOutcome()
    by_handle = handles(batch)
    seen: set[str] = set()
    for v in answer.verdicts:
        g = by_handle.get(v.id.strip())
        if g is None or g.id in seen:
            continue
        seen.add(g.id)
        again = v.condition_holds and v.new_context
        if v.customer_completed and not again:
            out.completed_customer_dependent.append(g.id)
        waiting = again or not v.customer_completed
        matched = v.condition_holds and waiting and v.score >= MATCH_THRESHOLD
        out.verdicts.append((g.id, batch.kind, matched, v.score, v.rationale))
        if matched:
            out.matches.append(
                GuidelineMatch(g, v.score, v.rationale, batch.kind, customer_completed=False)
            )
    out.unanswered.extend(g.id for g in batch.guidelines if g.id not in seen)
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


def report_unanswered(
    batch: Batch, outcome: MatchingOutcome, asked_again: Sequence[str]
) -> list[str]:
    """After the retry of `asked_again`: each of them still without a verdict (unanswered
    again, or the retry call failed) becomes a visible non-match verdict and a skipped id.
    Returns their ids for the trace note."""
    kind_of = {g.id: batch.kind_of(i) for i, g in enumerate(batch.guidelines)}
    judged = {v[0] for v in outcome.verdicts}
    missing = [gid for gid in dict.fromkeys(asked_again) if gid not in judged]
    for gid in missing:
        outcome.verdicts.append((gid, kind_of[gid], False, 0, "no verdict returned, twice"))
    outcome.skipped.extend(gid for gid in missing if gid not in outcome.skipped)
    outcome.unanswered.clear()
    return missing
