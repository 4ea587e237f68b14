"""What changes between two versions of an agent, and what publishing the second would strand.

`compare_versions(old, new)` lists added / removed / changed journeys, steps, tools, guidelines
and the migrations `new` declares. `check_publish` adds the live facts a publish must weigh
before it flips the pointer: sessions in a journey or at a step `new` removes without a
migration (counted per journey and step), migrations naming steps `old` never had, and tools
`new` needs that the deployed tool registry lacks. Pure: the caller supplies the positions and
the registry's tool names (`infra.agent_versions`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.versioning.pinning import SessionPosition

if TYPE_CHECKING:  # (annotations only: the management API imports this module at start)
    from engine.model import AgentSnapshot, Journey

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class JourneyChange(BaseModel):
    model_config = _FROZEN
    journey: str
    steps_added: tuple[str, ...] = ()
    steps_removed: tuple[str, ...] = ()
    steps_renamed: dict[str, str] = Field(default_factory=dict)  # by a declared migration
    transitions_changed: bool = False


class VersionDiff(BaseModel):
    """The changes from `old_version` to `new_version` of one agent."""

    model_config = _FROZEN
    agent_id: str
    old_version: str
    new_version: str
    journeys_added: tuple[str, ...] = ()
    journeys_removed: tuple[str, ...] = ()
    journeys_changed: tuple[JourneyChange, ...] = ()
    tools_added: tuple[str, ...] = ()
    tools_removed: tuple[str, ...] = ()
    tools_changed: tuple[str, ...] = ()
    guidelines_added: tuple[str, ...] = ()
    guidelines_removed: tuple[str, ...] = ()
    guidelines_changed: tuple[str, ...] = ()
    migrations: tuple[str, ...] = ()  # what `new` declares, in words
    problems: tuple[str, ...] = ()  # migrations that do not fit `old`

    @property
    def unchanged(self) -> bool:
        return self.old_version == self.new_version or not any(
            (
                self.journeys_added,
                self.journeys_removed,
                self.journeys_changed,
                self.tools_added,
                self.tools_removed,
                self.tools_changed,
                self.guidelines_added,
                self.guidelines_removed,
                self.guidelines_changed,
            )
        )


RiskKind = Literal["journey_removed", "step_removed", "missing_tool", "migration"]


class PublishRisk(BaseModel):
    """One reason a publish is refused unless forced."""

    model_config = _FROZEN
    kind: RiskKind
    message: str
    sessions: int = 0  # sessions affected, for journey_removed / step_removed


class PublishCheck(BaseModel):
    """The diff against the published version and what publishing would strand."""

    model_config = _FROZEN
    diff: VersionDiff | None  # None on a first publish
    sessions_in_flight: int = 0  # sessions with a journey in flight, on any version
    risks: tuple[PublishRisk, ...] = ()
    tools_checked: bool = False  # whether a deployed registry was compared

    @property
    def refused(self) -> bool:
        return bool(self.risks)


def _steps(journey: Journey) -> list[str]:
    return [n.id for n in journey.nodes if n.id != journey.root_id]


def _changed(old: Iterable[tuple[str, str]], new: Iterable[tuple[str, str]]) -> list[str]:
    before = dict(old)
    return [key for key, body in new if key in before and before[key] != body]


def compare_versions(old: AgentSnapshot, new: AgentSnapshot) -> VersionDiff:
    """What `new` adds, removes and changes relative to `old` (same agent)."""
    old_j = {j.id: j for j in old.journeys}
    new_j = {j.id: j for j in new.journeys}
    changes = []
    problems = []
    migrations = []
    for migration in new.migrations:
        scope = f" (from version {migration.from_version})" if migration.from_version else ""
        renames = ", ".join(f"{a} → {b}" for a, b in migration.steps.items()) or "same steps"
        migrations.append(f"journey '{migration.journey}'{scope}: {renames}")
        before = old_j.get(migration.journey)
        if migration.applies_to(old.version) and before is not None:
            unknown = [s for s in migration.steps if s not in _steps(before)]
            if unknown:
                problems.append(
                    f"migration of journey '{migration.journey}': version {old.version} has no "
                    f"step {', '.join(repr(s) for s in unknown)} (its steps: "
                    f"{', '.join(_steps(before))})"
                )
    for jid in old_j.keys() & new_j.keys():
        a, b = old_j[jid], new_j[jid]
        if a == b:
            continue
        declared = new.migration_for(jid, old.version)
        renamed = dict(declared.steps) if declared else {}
        old_steps, new_steps = set(_steps(a)), set(_steps(b))
        changes.append(
            JourneyChange(
                journey=jid,
                steps_added=tuple(sorted(new_steps - old_steps - set(renamed.values()))),
                steps_removed=tuple(sorted(old_steps - new_steps - set(renamed))),
                steps_renamed=renamed,
                transitions_changed=a.edges != b.edges,
            )
        )
    tool_bodies = [({t.name: t.model_dump_json() for t in s.tools}) for s in (old, new)]
    guideline_bodies = [
        {g.id: g.model_dump_json() for g in s.guidelines if not g.scoped_journey_id}
        for s in (old, new)
    ]
    return VersionDiff(
        agent_id=new.id,
        old_version=old.version,
        new_version=new.version,
        journeys_added=tuple(sorted(new_j.keys() - old_j.keys())),
        journeys_removed=tuple(sorted(old_j.keys() - new_j.keys())),
        journeys_changed=tuple(sorted(changes, key=lambda c: c.journey)),
        tools_added=tuple(sorted(tool_bodies[1].keys() - tool_bodies[0].keys())),
        tools_removed=tuple(sorted(tool_bodies[0].keys() - tool_bodies[1].keys())),
        tools_changed=tuple(sorted(_changed(tool_bodies[0].items(), tool_bodies[1].items()))),
        guidelines_added=tuple(sorted(guideline_bodies[1].keys() - guideline_bodies[0].keys())),
        guidelines_removed=tuple(sorted(guideline_bodies[0].keys() - guideline_bodies[1].keys())),
        guidelines_changed=tuple(
            sorted(_changed(guideline_bodies[0].items(), guideline_bodies[1].items()))
        ),
        migrations=tuple(migrations),
        problems=tuple(problems),
    )


def stranded(new: AgentSnapshot, position: SessionPosition) -> list[tuple[str, str | None]]:
    """The (journey, step) pairs of a session that `new` cannot continue: the journey is gone,
    or the step is gone and no migration from the session's version places it."""
    lost: list[tuple[str, str | None]] = []
    for jid, step in position.journeys.items():
        if not new.has_journey(jid):
            lost.append((jid, None))
            continue
        if step is None:
            continue
        migration = new.migration_for(jid, position.agent_version)
        target = migration.steps.get(step, step) if migration else step
        if target not in {n.id for n in new.journey(jid).nodes}:
            lost.append((jid, step))
    return lost


def check_publish(
    published: AgentSnapshot | None,
    new: AgentSnapshot,
    positions: Iterable[SessionPosition],
    deployed_tools: Iterable[str] | None,
) -> PublishCheck:
    """Everything publishing `new` over `published` would strand (see the module docstring).
    `deployed_tools`: the tool names the deployed registry serves, or None when not checked."""
    risks: list[PublishRisk] = []
    diff = compare_versions(published, new) if published is not None else None
    if diff is not None:
        risks += [PublishRisk(kind="migration", message=p) for p in diff.problems]
    positions = list(positions)
    journeys_gone: Counter[str] = Counter()
    steps_gone: Counter[tuple[str, str]] = Counter()
    for position in positions:
        for jid, step in stranded(new, position):
            if step is None:
                journeys_gone[jid] += 1
            else:
                steps_gone[(jid, step)] += 1
    for jid, count in sorted(journeys_gone.items()):
        risks.append(
            PublishRisk(
                kind="journey_removed",
                sessions=count,
                message=f"journey '{jid}' is removed while {_sessions(count)} in it",
            )
        )
    for (jid, step), count in sorted(steps_gone.items()):
        risks.append(
            PublishRisk(
                kind="step_removed",
                sessions=count,
                message=(
                    f"journey '{jid}' step '{step}' is removed or renamed while {_sessions(count)} "
                    f"at it; declare a migration (migrations: [{{journey: {jid}, steps: "
                    f"{{{step}: NEW_STEP}}}}]) to move them"
                ),
            )
        )
    if deployed_tools is not None:
        served = set(deployed_tools)
        for tool in new.tools:
            if tool.name not in served:
                risks.append(
                    PublishRisk(
                        kind="missing_tool",
                        message=(
                            f"tool '{tool.name}' is not in the deployed tool registry (it serves: "
                            f"{', '.join(sorted(served)) or 'no tools'}); deploy it first"
                        ),
                    )
                )
    return PublishCheck(
        diff=diff,
        sessions_in_flight=len(positions),
        risks=tuple(risks),
        tools_checked=deployed_tools is not None,
    )


def _sessions(count: int) -> str:
    return "1 session is" if count == 1 else f"{count} sessions are"


def describe_diff(diff: VersionDiff) -> list[str]:
    """The diff as lines for a terminal."""
    lines = [f"agent {diff.agent_id}: {diff.old_version} → {diff.new_version}"]
    if diff.unchanged:
        return [*lines, "  no changes"]
    for label, items in (
        ("journeys added", diff.journeys_added),
        ("journeys removed", diff.journeys_removed),
        ("tools added", diff.tools_added),
        ("tools removed", diff.tools_removed),
        ("tools changed", diff.tools_changed),
        ("guidelines added", diff.guidelines_added),
        ("guidelines removed", diff.guidelines_removed),
        ("guidelines changed", diff.guidelines_changed),
    ):
        if items:
            lines.append(f"  {label}: {', '.join(items)}")
    for change in diff.journeys_changed:
        parts = []
        if change.steps_added:
            parts.append("steps added " + ", ".join(change.steps_added))
        if change.steps_removed:
            parts.append("steps removed " + ", ".join(change.steps_removed))
        if change.steps_renamed:
            parts.append(
                "steps migrated " + ", ".join(f"{a} → {b}" for a, b in change.steps_renamed.items())
            )
        if change.transitions_changed:
            parts.append("transitions changed")
        lines.append(f"  journey {change.journey}: {'; '.join(parts) or 'changed'}")
    lines += [f"  migration: {m}" for m in diff.migrations]
    lines += [f"  problem: {p}" for p in diff.problems]
    return lines
