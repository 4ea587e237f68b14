"""The recall index of an agent version: which guidelines a conversation may use, grouped so a
turn touches only the groups it keeps.

Recall's tag filter and pruning (engine.recall.selection) need, per turn, the enabled guidelines whose
audience tags meet the conversation's tags, split by the journey they are scoped to. Walking
every guideline for that costs what the agent holds, not what the turn keeps (≈ 10 ms at 5,000
guidelines). Most of the answer depends only on the version: a guideline with no audience tag,
or one tagged with this agent or one of its journeys, applies to every conversation of the
agent. Only the channel and customer tags vary by session, and few guidelines carry them.

So, once per agent version: guidelines grouped by scoped journey (None = not scoped), each group
split into those that always apply and those that apply only if the session's channel or
customer tags meet theirs. A turn merges the groups it keeps (agent-wide + high-probability
journeys) in the agent's order, and resolves the others only if a supplemental round asks.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter

from engine.model import AgentSnapshot, Criticality, Guideline, agent_tag, journey_tag
from engine.recall.vectors import is_agent_wide

# A tag with one of these prefixes names an audience; any other tag is an organising label.
AUDIENCE_PREFIXES = ("agent:", "channel:", "journey:", "customer:")


def is_audience_tag(tag: str) -> bool:
    return tag.startswith(AUDIENCE_PREFIXES)


@dataclass(frozen=True)
class IndexedGuideline:
    position: int  # in agent.guidelines: recall keeps the agent's order
    guideline: Guideline
    audience: frozenset[str]  # audience tags not met by every conversation (channel, customer…)


@dataclass
class GuidelineGroup:
    always: list[IndexedGuideline] = field(default_factory=list)  # apply in every conversation
    tagged: list[IndexedGuideline] = field(
        default_factory=list
    )  # apply if the session's tags meet theirs
    always_ids: frozenset[str] = frozenset()  # ids of `always`, set once the index is built
    # `always` split by what preselection (engine.recall.preselection) may do with each entry,
    # in the agent's order: agent-wide guidelines it ranks, journeys' activation conditions by
    # journey, and the rest (never left out)
    wide: list[IndexedGuideline] = field(default_factory=list)
    wide_by_id: dict[str, IndexedGuideline] = field(default_factory=dict)
    conditions: dict[str, list[IndexedGuideline]] = field(default_factory=dict)
    condition_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)  # ids of `conditions`
    fixed: list[IndexedGuideline] = field(default_factory=list)
    droppable: tuple[str, ...] = ()  # ids of `wide` and `conditions`, in the agent's order
    droppable_position: dict[str, int] = field(default_factory=dict)  # id → its place there
    tagged_by_id: dict[str, IndexedGuideline] = field(default_factory=dict)

    def usable(self, session_tags: frozenset[str]) -> list[IndexedGuideline]:
        """The group's entries usable in a conversation with these tags, in the agent's order
        (the group's own list when nothing in it is tagged: callers only read it)."""
        if not self.tagged:
            return self.always
        met = [e for e in self.tagged if not e.audience.isdisjoint(session_tags)]
        return sorted([*self.always, *met], key=_position)

    def usable_ids(self, session_tags: frozenset[str]) -> frozenset[str] | set[str]:
        """The ids of `usable(session_tags)` (callers only read the set)."""
        if not self.tagged:
            return self.always_ids
        met = {e.guideline.id for e in self.tagged if not e.audience.isdisjoint(session_tags)}
        return self.always_ids | met


# Groups are sorted runs of distinct positions: `sorted` merges them in C (Timsort finds the runs),
# giving what `heapq.merge` gave at a fraction of its per-item Python cost.
_position = attrgetter("position")


@dataclass(frozen=True)
class PreselectionRole:
    """What recall's preselection asks of a guideline, known from the guideline alone."""

    condition_of: str | None  # the journey whose activation condition it is
    agent_wide: bool  # neither a condition nor journey-scoped, and not high-criticality
    continuous: bool  # matched every turn once applied (`metadata["continuous"]`)


def preselection_role(g: Guideline) -> PreselectionRole:
    """A guideline's `PreselectionRole` (computed once per version for the agent's own)."""
    condition_of = g.condition_of_journey
    return PreselectionRole(
        condition_of,
        condition_of is None
        and g.scoped_journey_id is None
        and g.criticality is not Criticality.HIGH,
        bool(g.metadata.get("continuous")),
    )


class RecallIndex:
    """Guidelines of one agent version by scoped journey, tag-less/agent-wide apart (see module)."""

    def __init__(self, agent: AgentSnapshot) -> None:
        static = {agent_tag(agent.id), *(journey_tag(j.id) for j in agent.journeys)}
        self.static_tags = frozenset(static)  # the tags every conversation of the agent has
        # condition guideline id → the journeys it activates, in the agent's order
        self.activates: dict[str, list[str]] = {}
        for journey in agent.journeys:
            for gid in dict.fromkeys(journey.condition_guideline_ids):
                self.activates.setdefault(gid, []).append(journey.id)
        self.journey_position = {j.id: i for i, j in enumerate(agent.journeys)}
        self.groups: dict[str | None, GuidelineGroup] = {}
        self.scoped: dict[str, str | None] = {}  # guideline id → scoped journey
        self.condition_of: dict[str, str | None] = {}  # guideline id → journey it activates
        self.position: dict[str, int] = {}  # guideline id → its place in agent.guidelines
        # guideline id → what preselection needs of it (`preselection_role`)
        self.roles: dict[str, PreselectionRole] = {}
        for position, g in enumerate(agent.guidelines):
            self.position[g.id] = position
            self.roles[g.id] = preselection_role(g)
            scoped = g.scoped_journey_id
            self.scoped[g.id] = scoped
            self.condition_of[g.id] = g.condition_of_journey
            if not g.enabled:
                continue
            audience = frozenset(t for t in g.tags if is_audience_tag(t))
            group = self.groups.setdefault(scoped, GuidelineGroup())
            if not audience or not audience.isdisjoint(static):
                group.always.append(IndexedGuideline(position, g, frozenset()))
            else:
                group.tagged.append(IndexedGuideline(position, g, audience))
        # how many agent-wide guidelines publishing embeds (`engine.recall.vectors`)
        self.embedded_wide = sum(1 for g in agent.guidelines if g.enabled and is_agent_wide(g))
        for group in self.groups.values():
            group.always_ids = frozenset(e.guideline.id for e in group.always)
            for entry in group.always:
                role = self.roles[entry.guideline.id]
                if role.condition_of is not None:
                    group.conditions.setdefault(role.condition_of, []).append(entry)
                elif role.agent_wide:
                    group.wide.append(entry)
                else:
                    group.fixed.append(entry)
            group.wide_by_id = {e.guideline.id: e for e in group.wide}
            group.condition_ids = {
                journey_id: tuple(e.guideline.id for e in entries)
                for journey_id, entries in group.conditions.items()
            }
            fixed = {id(e) for e in group.fixed}
            group.droppable = tuple(e.guideline.id for e in group.always if id(e) not in fixed)
            group.droppable_position = {gid: i for i, gid in enumerate(group.droppable)}
            group.tagged_by_id = {e.guideline.id: e for e in group.tagged}

    def session_tags(self, channel: str, customer_tags: Iterable[str]) -> frozenset[str]:
        """The conversation's tags (`engine.recall.selection.conversation_tags`), the agent's and its
        journeys' taken from the version instead of rebuilt per turn."""
        tags = {f"channel:{channel}"}
        tags.update(t if t.startswith("customer:") else f"customer:{t}" for t in customer_tags)
        return self.static_tags | tags

    def journeys_activated_by(self, guideline_ids: Iterable[str]) -> list[str]:
        """The journeys one of whose condition guidelines is among `guideline_ids`, in the
        agent's order."""
        found = {j for gid in guideline_ids for j in self.activates.get(gid, ())}
        return sorted(found, key=self.journey_position.__getitem__)

    def usable(
        self, session_tags: frozenset[str], journeys: Iterable[str | None]
    ) -> list[Guideline]:
        """The usable guidelines of these groups (None = not journey-scoped), agent's order."""
        streams = [
            self.groups[j].usable(session_tags) for j in dict.fromkeys(journeys) if j in self.groups
        ]
        if len(streams) == 1:
            return [e.guideline for e in streams[0]]
        return [e.guideline for e in sorted(chain.from_iterable(streams), key=_position)]

    def in_agent_order(self, guideline_ids: Iterable[str]) -> list[str]:
        """The ids that are the agent's guidelines, in the agent's order (others dropped)."""
        position = self.position
        return sorted((i for i in guideline_ids if i in position), key=position.__getitem__)

    def all_usable(self, session_tags: frozenset[str]) -> list[Guideline]:
        """Every usable guideline of the agent, in its order (what the tag filter returns)."""
        return self.usable(session_tags, self.groups)

    def usable_ids(self, session_tags: frozenset[str], journeys: Iterable[str | None]) -> set[str]:
        """The ids of `usable(session_tags, journeys)`, from each group's id set."""
        ids: set[str] = set()
        for j in dict.fromkeys(journeys):
            group = self.groups.get(j)
            if group is not None:
                ids |= group.usable_ids(session_tags)
        return ids

    def usable_in(self, session_tags: frozenset[str], journeys: Iterable[str | None]) -> UsableIds:
        """`usable_ids(session_tags, journeys)` as a membership test: answered per id, without
        collecting every usable guideline's id (thousands) for the few a turn asks about."""
        return UsableIds(self, session_tags, frozenset(journeys))

    def held_back(
        self, session_tags: frozenset[str], kept: Iterable[str | None]
    ) -> Mapping[str, list[Guideline]]:
        """Journey id → its usable scoped guidelines, for the journeys not kept; resolved on
        access (supplemental rounds read one or two journeys, never all)."""
        return _HeldBack(self, session_tags, frozenset(kept))


class UsableIds(Container[str]):
    """Whether a guideline id is one of `RecallIndex.usable_ids(tags, journeys)`: its group (the
    journey it is scoped to, or None) must be one of `journeys`, and the guideline usable in it
    (always, or tagged with an audience the conversation's tags meet)."""

    __slots__ = ("_index", "_journeys", "_tags")

    def __init__(
        self, index: RecallIndex, tags: frozenset[str], journeys: frozenset[str | None]
    ) -> None:
        self._index, self._tags, self._journeys = index, tags, journeys

    def __contains__(self, guideline_id: object) -> bool:
        index = self._index
        if not isinstance(guideline_id, str) or guideline_id not in index.position:
            return False
        scoped = index.scoped[guideline_id]
        group = index.groups.get(scoped) if scoped in self._journeys else None
        if group is None:
            return False
        if guideline_id in group.always_ids:
            return True
        entry = group.tagged_by_id.get(guideline_id)
        return entry is not None and not entry.audience.isdisjoint(self._tags)


class _HeldBack(Mapping[str, list[Guideline]]):
    def __init__(self, index: RecallIndex, tags: frozenset[str], kept: frozenset[str | None]):
        self._index, self._tags, self._kept = index, tags, kept
        self._resolved: dict[str, list[Guideline]] = {}

    def __getitem__(self, journey_id: str) -> list[Guideline]:
        if journey_id in self._kept or journey_id not in self._index.groups:
            raise KeyError(journey_id)
        if journey_id not in self._resolved:
            found = self._index.usable(self._tags, [journey_id])
            if not found:
                raise KeyError(journey_id)
            self._resolved[journey_id] = found
        return self._resolved[journey_id]

    def __iter__(self) -> Iterator[str]:
        for j in self._index.groups:
            if j is not None and j not in self._kept and j in self:
                yield j

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, journey_id: object) -> bool:
        if not isinstance(journey_id, str):
            return False
        try:
            self[journey_id]
        except KeyError:
            return False
        return True


_CACHE: dict[tuple[str, str], RecallIndex] = {}
_CACHE_LIMIT = 64


def recall_index(agent: AgentSnapshot) -> RecallIndex:
    """The recall index of an agent version, built once per (agent, version) for the life of a
    warm container, like `engine.matching.projection.projected_guidelines` (a version names one content:
    it is the content hash unless set explicitly)."""
    key = (agent.id, agent.version or agent.content_hash())
    index = _CACHE.get(key)
    if index is None:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
        index = _CACHE[key] = RecallIndex(agent)
    return index


__all__ = [
    "AUDIENCE_PREFIXES",
    "PreselectionRole",
    "RecallIndex",
    "UsableIds",
    "is_audience_tag",
    "preselection_role",
    "recall_index",
]
