"""Preselection from the per-version recall index: what `engine.recall.selection.preselect` decides
over `indexed_recall`'s candidates, at the cost of what the turn keeps.

`preselect` walks every candidate to sort it into agent-wide guidelines (ranked), journeys'
activation conditions (ranked by journey) and the rest (always matched), then ranks every
embedded guideline to keep the k most similar eligible ones. With thousands of agent-wide
guidelines that walk and that ranking are most of a turn's engine time, and neither depends on
the turn: the `RecallIndex` splits each group that way once per version (`GuidelineGroup.wide`,
`.conditions`, `.fixed`). A turn then only
- moves the few agent-wide guidelines that are always matched this turn (awaiting the customer's
  data; continuous and applied) and the channel/customer-tagged ones to where they belong;
- asks the vector index for the k best plus as many as can be ineligible, not for every row
  (the ranking's top is a prefix of the whole ranking, so the first k eligible are the same;
  when fewer than k are eligible among them it asks again for all, so nothing can differ);
- builds the kept list from what it keeps, in the agent's order, and lists what it held back.

The straightforward `preselect` stays the definition: tests/engine/test_recall_preselection_index.py
checks that both give the same kept and held-back guidelines, in the same order, on random
agents and sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from engine.context import TurnContext
from engine.ports import VectorIndex
from engine.recall.index import GuidelineGroup, IndexedGuideline, RecallIndex
from engine.recall.selection import Preselection, RecallQuery
from engine.recall.vectors import GUIDELINES, JOURNEYS

_position = attrgetter("position")


@dataclass
class _TurnSplit:
    """This turn's usable candidates, sorted as `preselect` sorts them."""

    # the version's agent-wide entries (shared, not copied), of which `excluded` are always
    # matched this turn; `extra_wide`: the channel- or customer-tagged ones this session meets
    wide: list[IndexedGuideline] = field(default_factory=list)
    wide_by_id: dict[str, IndexedGuideline] = field(default_factory=dict)
    excluded: set[str] = field(default_factory=set)
    extra_wide: dict[str, IndexedGuideline] = field(default_factory=dict)
    fixed: list[IndexedGuideline] = field(default_factory=list)  # always matched
    # journey (not predicted this turn) → its usable activation conditions
    conditions: dict[str, list[IndexedGuideline]] = field(default_factory=dict)
    # the group `wide` comes from, when every ranked candidate (agent-wide or a condition) is one
    # of its `droppable` (nothing tagged met, no condition scoped to a journey): the held-back
    # list is then one pass over `droppable`
    single: GuidelineGroup | None = None

    @property
    def eligible(self) -> int:
        """How many agent-wide guidelines the ranking chooses among."""
        return len(self.wide) - len(self.excluded) + len(self.extra_wide)

    def is_eligible(self, guideline_id: str) -> bool:
        if guideline_id in self.wide_by_id:
            return guideline_id not in self.excluded
        return guideline_id in self.extra_wide

    def wide_entry(self, guideline_id: str) -> IndexedGuideline:
        return self.wide_by_id.get(guideline_id) or self.extra_wide[guideline_id]


def _split(
    groups: Sequence[GuidelineGroup],
    index: RecallIndex,
    tags: frozenset[str],
    high: set[str],
    always_matched: set[str],
) -> _TurnSplit:
    split = _TurnSplit()
    single = True
    for group in groups:
        if group.conditions and not group.wide:
            single = False
        if group.wide:
            # Only the unscoped group holds agent-wide guidelines: one list, shared, not copied.
            split.wide, split.wide_by_id = group.wide, group.wide_by_id
            split.excluded = {gid for gid in always_matched if gid in group.wide_by_id}
            split.fixed.extend(group.wide_by_id[gid] for gid in split.excluded)
        split.fixed.extend(group.fixed)
        # The version's lists of conditions are shared, never changed: a journey's list is
        # replaced by a new one when entries are added to it.
        if not split.conditions:
            split.conditions = dict(group.conditions)
            for journey_id in high.intersection(group.conditions):
                split.fixed.extend(split.conditions.pop(journey_id))
        else:
            for journey_id, entries in group.conditions.items():
                if journey_id in high:
                    split.fixed.extend(entries)
                else:
                    split.conditions[journey_id] = [
                        *split.conditions.get(journey_id, ()),
                        *entries,
                    ]
        for entry in group.tagged:  # (few: channel- and customer-tagged guidelines)
            if entry.audience.isdisjoint(tags):
                continue
            gid = entry.guideline.id
            role = index.roles[gid]
            if role.condition_of is not None:
                if role.condition_of in high:
                    split.fixed.append(entry)
                else:
                    journey_id = role.condition_of
                    split.conditions[journey_id] = [*split.conditions.get(journey_id, ()), entry]
                    single = False
            elif role.agent_wide and gid not in always_matched:
                split.extra_wide[gid] = entry
                single = False
            else:
                split.fixed.append(entry)
    if single and split.wide:
        split.single = next(g for g in groups if g.wide)
    return split


async def preselect_indexed(
    ctx: TurnContext,
    index: RecallIndex,
    tags: frozenset[str],
    *,
    high: Sequence[str],
    vectors: VectorIndex | None,
    query: RecallQuery,
) -> Preselection:
    """`preselect(ctx, indexed_recall(index, tags, high).candidates, high=high, index=vectors,
    query=query)`, without walking or ranking every candidate (see the module)."""
    config, session = ctx.agent.config, ctx.session
    kept_groups: list[str | None] = [None, *high]
    if (not config.guideline_top_k and not config.condition_top_k) or vectors is None:
        return Preselection(index.usable(tags, kept_groups), [])
    groups = [index.groups[j] for j in dict.fromkeys(kept_groups) if j in index.groups]
    always_matched = set(session.pending_customer_guideline_ids)
    always_matched.update(
        gid for gid in session.applied_guideline_ids if (r := index.roles.get(gid)) and r.continuous
    )
    split = _split(groups, index, tags, set(high), always_matched)

    chosen_wide: set[str] | None = None  # None: no agent-wide guideline is left out
    top_k = config.guideline_top_k
    if top_k and split.eligible > top_k:
        chosen = await _top_eligible(
            vectors,
            GUIDELINES,
            query,
            split.is_eligible,
            k=top_k,
            possibly_ineligible=max(0, index.embedded_wide - split.eligible),
            size=len(ctx.agent.guidelines),
        )
        chosen_wide = None if chosen is None else set(chosen)
    dropped_journeys: set[str] = set()
    if config.condition_top_k and len(split.conditions) > config.condition_top_k:
        journeys = set(split.conditions)
        chosen = await _top_eligible(
            vectors,
            JOURNEYS,
            query,
            journeys.__contains__,
            k=config.condition_top_k,
            possibly_ineligible=max(0, len(ctx.agent.journeys) - len(journeys)),
            size=len(ctx.agent.journeys),
        )
        if chosen is not None:
            dropped_journeys = journeys.difference(chosen)
    if chosen_wide is None and not dropped_journeys:
        return Preselection(index.usable(tags, kept_groups), [])
    return _kept_and_held_back(split, chosen_wide, dropped_journeys)


def _kept_and_held_back(
    split: _TurnSplit, chosen_wide: set[str] | None, dropped_journeys: set[str]
) -> Preselection:
    if chosen_wide is not None and split.single is not None:
        return _from_one_group(split, split.single, chosen_wide, dropped_journeys)
    kept: list[IndexedGuideline] = list(split.fixed)
    held: list[IndexedGuideline] = []
    wide = [*split.wide, *split.extra_wide.values()] if split.extra_wide else split.wide
    if chosen_wide is None:
        kept.extend(e for e in wide if e.guideline.id not in split.excluded)
    else:
        kept.extend(split.wide_entry(gid) for gid in chosen_wide)
        keep = chosen_wide | split.excluded
        held = [e for e in wide if e.guideline.id not in keep]
    held_conditions: list[IndexedGuideline] = []
    for journey_id, entries in split.conditions.items():
        (held_conditions if journey_id in dropped_journeys else kept).extend(entries)
    if held_conditions or split.extra_wide:
        held = sorted([*held, *held_conditions], key=_position)
    kept.sort(key=_position)
    return Preselection([e.guideline for e in kept], [e.guideline.id for e in held])


def _from_one_group(
    split: _TurnSplit,
    group: GuidelineGroup,
    chosen_wide: set[str],
    dropped_journeys: set[str],
) -> Preselection:
    """`_kept_and_held_back` when every ranked candidate is one of `group.droppable`: what is
    kept is short (fixed, chosen, the conditions of journeys not left out), and what is held
    back is the rest of `droppable`, already in the agent's order."""
    kept = [*split.fixed, *(split.wide_entry(gid) for gid in chosen_wide)]
    keep = chosen_wide | split.excluded
    for journey_id, entries in group.conditions.items():
        if journey_id not in dropped_journeys:
            keep.update(group.condition_ids[journey_id])
            if journey_id in split.conditions:  # (those of high journeys are in `fixed`)
                kept.extend(entries)
    kept.sort(key=_position)
    return Preselection([e.guideline for e in kept], _all_but(group, keep))


def _all_but(group: GuidelineGroup, keep: set[str]) -> list[str]:
    """`[gid for gid in group.droppable if gid not in keep]`, in slices around the few kept
    (thousands of ids held back, tens kept)."""
    position = group.droppable_position
    held: list[str] = []
    start = 0
    for cut in sorted(position[gid] for gid in keep if gid in position):
        held.extend(group.droppable[start:cut])
        start = cut + 1
    held.extend(group.droppable[start:])
    return held


async def _top_eligible(
    vectors: VectorIndex,
    namespace: str,
    query: RecallQuery,
    is_eligible: Callable[[str], bool],
    *,
    k: int,
    possibly_ineligible: int,
    size: int,
) -> list[str] | None:
    """The k eligible ids nearest the query, best first, as `selection._most_similar` finds them
    by ranking all `size` ids; None when nothing can be ranked. Asks for the k best plus as many
    as may be ineligible, and for all of them only if that top held fewer than k eligible."""
    vector = await query.vector()
    if vector is None:
        return None
    want = min(size, k + possibly_ineligible)
    ranked = await vectors.nearest(namespace, vector, want)
    if not ranked:
        return None
    chosen = [item for item, _ in ranked if is_eligible(item)][:k]
    if len(chosen) < k and len(ranked) >= want and want < size:
        ranked = await vectors.nearest(namespace, vector, size)
        chosen = [item for item, _ in ranked if is_eligible(item)][:k]
    return chosen


__all__ = ["preselect_indexed"]
