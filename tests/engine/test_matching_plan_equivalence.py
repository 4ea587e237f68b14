"""The matching plan after its per-version caches (#22) is the plan the per-turn walk made.

`plan_batches` now reads disambiguation heads from an index built once per relationships tuple
and prices guidelines from lines rendered once per guideline. `walked_plan` below is the
algorithm as it was before: every relationship walked and every line rendered on every call.
Over generated guidelines (every kind, customer-dependent ones, multi-line texts), sessions
(applied and pending guidelines), relationships (disambiguation heads mixed with dependencies,
heads outside the turn) and budgets (one batch, packed, split per kind), both give the same
batches — same kinds, guidelines, heads and per-guideline kinds, in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.matching import guidelines as gm
from engine.matching.guideline_lines import guideline_line
from engine.model import EntityKind, EntityRef, Guideline, Relationship, RelationshipKind
from engine.sessions.session import SessionState

TEXTS = ["the customer asks", "a\nnumbered\n1. list", "  spaced   out  ", "x" * 90]


def _rendered_fresh(handle: str, g: Guideline) -> str:
    """A guideline's prompt line rendered from scratch (the format the prompts document)."""
    line = f"- [{handle}] when: {' '.join(g.condition.split())}"
    if g.action:
        line += f"\n    then: {' '.join(g.action.split())}"
    cd = g.customer_dependent
    if cd:
        line += f"\n    customer must: {' '.join(cd.customer_action.split())}"
    return line


def walked_plan(
    guidelines: Sequence[Guideline],
    session: SessionState,
    relationships: Sequence[Relationship],
    budget_chars: int,
) -> list[gm.Batch]:
    """`plan_batches` before the caches: walks every relationship, renders every line."""

    def cost(g: Guideline) -> int:
        return len(_rendered_fresh("g00", g)) + 1

    by_id = {g.id: g for g in guidelines}
    heads: dict[str, list[str]] = {}
    for r in relationships:
        if r.kind is RelationshipKind.DISAMBIGUATION and r.source.id in by_id:
            heads.setdefault(r.source.id, []).append(r.target.id)
    batches: list[gm.Batch] = []
    claimed: set[str] = set()
    for head_id, target_ids in heads.items():
        targets = tuple(by_id[t] for t in target_ids if t in by_id)
        if len(targets) >= 2:
            batches.append(gm.Batch(gm.BatchKind.DISAMBIGUATION, targets, head=by_id[head_id]))
            claimed.add(head_id)
    per_kind: dict[gm.BatchKind, list[Guideline]] = {}
    for g in guidelines:
        if g.id not in claimed:
            per_kind.setdefault(gm.classify(g, session), []).append(g)
    packable = [(k, g) for k in gm.PACKABLE for g in per_kind.get(k, [])]
    if len({k for k, _ in packable}) > 1 and sum(cost(g) for _, g in packable) <= budget_chars:
        batches.append(
            gm.Batch(
                gm.BatchKind.PACKED,
                tuple(g for _, g in packable),
                kinds=tuple(k for k, _ in packable),
            )
        )
        per_kind = {k: v for k, v in per_kind.items() if k not in gm.PACKABLE}
    for kind in gm.BatchKind:
        current: list[Guideline] = []
        size = 0
        for g in per_kind.get(kind, []):
            if current and size + cost(g) > budget_chars:
                batches.append(gm.Batch(kind, tuple(current)))
                current, size = [], 0
            current.append(g)
            size += cost(g)
        if current:
            batches.append(gm.Batch(kind, tuple(current)))
    return batches


def _guideline(i: int, shape: int, text: int) -> Guideline:
    condition = f"{TEXTS[text]} {i}"
    if shape == 0:  # observational
        return Guideline(id=f"g{i}", condition=condition)
    metadata: dict[str, object] = {}
    if shape == 2:
        metadata["continuous"] = True
    if shape == 3:
        metadata["customer_dependent_action_data"] = {
            "customer_action": f"give {TEXTS[text]}",
            "agent_action": "ask",
        }
    return Guideline(id=f"g{i}", condition=condition, action=f"do {i}", metadata=metadata)


def _ref(gid: str) -> EntityRef:
    return EntityRef(kind=EntityKind.GUIDELINE, id=gid)


specs = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, len(TEXTS) - 1)), min_size=1, max_size=30
)
links = st.lists(
    st.tuples(st.sampled_from(list(RelationshipKind)), st.integers(0, 34), st.integers(0, 34)),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(
    specs=specs,
    links=links,
    applied=st.sets(st.integers(0, 30), max_size=10),
    pending=st.sets(st.integers(0, 30), max_size=5),
    budget=st.sampled_from([50, 400, 2_000, 100_000]),
)
def test_plan_batches_equals_the_walked_plan(
    specs: list[tuple[int, int]],
    links: list[tuple[RelationshipKind, int, int]],
    applied: set[int],
    pending: set[int],
    budget: int,
) -> None:
    guidelines = [_guideline(i, shape, text) for i, (shape, text) in enumerate(specs)]
    relationships = tuple(
        Relationship(kind=kind, source=_ref(f"g{s}"), target=_ref(f"g{t}")) for kind, s, t in links
    )
    session = SessionState(
        id="s",
        agent_id="a",
        customer_id="c",
        applied_guideline_ids=tuple(f"g{i}" for i in sorted(applied)),
        pending_customer_guideline_ids=tuple(f"g{i}" for i in sorted(pending)),
    )
    expected = walked_plan(guidelines, session, relationships, budget)
    for _ in range(2):  # the second call answers from the caches
        assert gm.plan_batches(guidelines, session, relationships, budget) == expected
    for g in guidelines:
        assert guideline_line("g7", g) == _rendered_fresh("g7", g)


def test_a_changed_guideline_under_the_same_id_gets_its_own_line() -> None:
    """The line cache is keyed by the guideline object, not its id: a new version's guideline
    with the same id but another text is never shown with the old text."""
    old = Guideline(id="g1", condition="the customer asks for a refund", action="explain")
    new = old.model_copy(update={"condition": "the customer asks for an exchange"})
    assert "refund" in guideline_line("g1", old)
    assert "exchange" in guideline_line("g1", new)
    assert "refund" in guideline_line("g1", old)


def test_a_relationships_list_changed_in_place_is_read_again() -> None:
    """Only an immutable tuple of relationships is indexed once; a list is walked every call."""
    guidelines = [_guideline(i, 1, 0) for i in range(4)]
    session = SessionState(id="s", agent_id="a", customer_id="c")
    relationships: list[Relationship] = []
    assert all(
        b.kind is not gm.BatchKind.DISAMBIGUATION
        for b in gm.plan_batches(guidelines, session, relationships, 100_000)
    )
    relationships += [
        Relationship(kind=RelationshipKind.DISAMBIGUATION, source=_ref("g0"), target=_ref(t))
        for t in ("g1", "g2")
    ]
    plan = gm.plan_batches(guidelines, session, relationships, 100_000)
    assert plan[0].kind is gm.BatchKind.DISAMBIGUATION
    assert plan == walked_plan(guidelines, session, relationships, 100_000)
