"""Walk verification: the one legal step for this turn, whatever walk the LLM proposed.

The LLM only *proposes* a walk through the graph; `verify_walk` decides what actually happens, so
every rule that can be checked without reading the conversation (edges exist, tool steps are not
skipped, a fork is never where a turn stops, a backtrack goes to a step that was really visited) is
enforced here and never left to a prompt. Pure and deterministic.

A chat step is left for a step this run has not entered, or for the end of the journey, only once
the run holds a value for each of its required fields (collected in an earlier turn of this run,
given ahead for it, or reported this turn): a model that walks on without the customer's answer
is stopped at the unanswered step. Optional fields never hold it, and neither does going back to
a step the run entered before (the customer wants to change an earlier answer).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from engine.matching.journey_graph import (
    NodeView,
    Path,
    close_run,
    current_run,
    current_step,
    exited_run,
    position_is_stale,
    resume_run,
)
from engine.model import Journey, NodeKind

Outcome = Literal["stay", "advance", "backtrack", "exit", "completed"]


@dataclass(frozen=True)
class VerifiedStep:
    """Where a journey stands after this turn: exactly one step (or none when it ended)."""

    path: Path  # the new full journey path
    node_id: str | None  # the step for this turn; None when exited or completed
    outcome: Outcome
    repairs: tuple[str, ...] = ()  # what verification fixed, for the trace
    # The walk the model proposed (empty: no model was asked); for the trace, not the outcome.
    proposed: tuple[str, ...] = field(default=(), compare=False)
    # The run the customer left was opened again (`resume_run`): `path` replays it after its
    # `None`, and the walk went on from the step it was left at (or back to one of its steps).
    resumed: bool = False


@dataclass(frozen=True)
class ProposedWalk:
    """An LLM's proposal, already translated from display numbers to node ids."""

    steps: tuple[str, ...] = ()  # the walk; may or may not start with the current step
    backtrack_to: str | None = None  # set only when the LLM asked to backtrack
    finish: bool = False  # the LLM said the journey is over after the walk
    stop_at: str | None = None  # the step the LLM named as next: the walk never passes it


def exit_step(previous_path: Sequence[str | None], note: str = "") -> VerifiedStep:
    """The journey no longer applies: close the run."""
    return VerifiedStep(close_run(previous_path), None, "exit", (note,) if note else ())


@dataclass
class _Walk:
    """Mutable scratch state of one verification; never escapes `verify_walk`."""

    views: dict[str, NodeView]
    executed_tools: Collection[str]
    hold_at: Collection[str]
    collected: Collection[str]
    visited: Collection[str]  # the steps of the live run before this turn
    nodes: list[str]
    repairs: list[str] = field(default_factory=list)
    stop_at: str | None = None

    def label(self, nid: str) -> str:
        return self.views[nid].label

    def blocker(self, nid: str, onto: str | None) -> str | None:
        """Why the walk may not leave `nid` for `onto` (None: the end, or nowhere it connects
        to); None when it may."""
        view = self.views[nid]
        if view.kind is NodeKind.TOOL and not view.tools_ran(self.executed_tools):
            return f"{view.label} is a tool step whose tools have not run"
        if nid in self.hold_at:
            return f"{view.label} got a value that failed validation and must be asked again"
        if view.kind is NodeKind.CHAT and not self._goes_back(onto):
            missing = [f.name for f in view.collects if f.required and f.name not in self.collected]
            if missing:
                return f"{view.label} collects {', '.join(missing)}, not collected in this run"
        return None

    def _goes_back(self, onto: str | None) -> bool:
        """Leaving for a step this run already entered goes back ("I want to change the
        amount"), not past: it needs no answer to the step it leaves."""
        return onto is not None and (onto in self.visited or onto in self.nodes)

    def can_finish_at(self, nid: str) -> bool:
        return self.views[nid].can_end and self.blocker(nid, None) is None

    def extend(self, proposed: Iterable[str]) -> None:
        """Follow the proposal along real edges, repairing a missing connector, stopping at the
        first step that cannot be passed or that does not connect."""
        for nxt in proposed:
            here = self.nodes[-1]
            if nxt not in self.views:
                self.repairs.append(f"dropped unknown step {nxt!r}")
                continue
            if nxt == here and nxt not in self.views[here].successors:
                continue  # a repeated step, not a self-loop: nothing to walk
            direct = nxt in self.views[here].successors
            link = None if direct else _connector(self.views, here, nxt)
            reason = self.blocker(here, nxt if direct else link)
            if reason:
                self.repairs.append(f"stopped at {self.label(here)}: {reason}")
                return
            if direct:
                self.nodes.append(nxt)
                if self._reached_stop(nxt):
                    return
                continue
            if link is None:
                self.repairs.append(
                    f"{self.label(nxt)} does not follow {self.label(here)}: "
                    f"stopped at {self.label(here)}"
                )
                return
            self.repairs.append(
                f"inserted {self.label(link)} between {self.label(here)} and {self.label(nxt)}"
            )
            self.nodes.append(link)
            if self._reached_stop(link):
                return
            reason = self.blocker(link, nxt)
            if reason:
                self.repairs.append(f"stopped at {self.label(link)}: {reason}")
                return
            self.nodes.append(nxt)
            if self._reached_stop(nxt):
                return

    def _reached_stop(self, nid: str) -> bool:
        """The walk reached the step named as next: it stops there, whatever follows."""
        return nid == self.stop_at

    def leave_forks(self) -> bool:
        """A turn never stops on a fork. Walk through forks that have a single way out; if a
        fork needs a choice nobody made, step back to the last real step. Returns True when a
        fork's only way out is the end of the journey."""
        seen: set[str] = set()
        while self.nodes and self.views[self.nodes[-1]].transit and self.nodes[-1] not in seen:
            fork = self.nodes[-1]
            seen.add(fork)
            exits = self.views[fork].exits
            if len(exits) != 1:
                break
            if exits[0] is None:
                return True
            self.nodes.append(exits[0])
            self.repairs.append(
                f"continued through the fork at {self.label(fork)} to {self.label(exits[0])}"
            )
        while self.nodes and self.views[self.nodes[-1]].transit:
            fork = self.nodes.pop()
            self.repairs.append(f"{self.label(fork)} is a fork and cannot be where a turn stops")
        return False


def _connector(views: dict[str, NodeView], a: str, b: str) -> str | None:
    """The single step that links a → c → b, if there is exactly one."""
    if b not in views:
        return None
    links = [c for c in views[a].successors if c in views[b].predecessors]
    return links[0] if len(links) == 1 else None


def verify_walk(
    journey: Journey,
    views: dict[str, NodeView],
    previous_path: Sequence[str | None],
    proposal: ProposedWalk,
    *,
    executed_tools: Collection[str],
    hold_at: Collection[str] = (),
    collected: Collection[str] = (),
    left_collected: Collection[str] = (),
) -> VerifiedStep:
    """Turn a proposed walk into the one legal step for this turn.

    Rules (they hold for any proposal): the walk starts at the current step, at a visited step
    when backtracking, or at the root when no run is live — unless the proposal backtracks to a
    step of a run the customer left mid-way (`exited_run`): that run is opened again
    (`resume_run`, the path only grows) and the walk goes on from the step it was left at, or
    back to one of its steps, with the fields that run held (`left_collected`) counted as
    collected; consecutive steps must be joined by an
    edge (a unique missing connector is inserted, otherwise the walk stops); it never passes a
    tool step whose tools did not run this turn, a step in `hold_at`, nor a chat step with a
    required field missing from `collected` (the fields this run holds a value for, this turn's
    included) unless it goes back to a step the run entered; it never stops on a fork; it ends the journey only through an END edge (or at a
    step with no way out), and never after a step it could not pass.
    """
    previous = tuple(previous_path)
    here = current_step(previous, views)
    repairs: list[str] = []
    if position_is_stale(previous, views):
        repairs.append(f"stored position {previous[-1]!r} no longer exists; restarted the journey")
        previous = close_run(previous)
    resumed = here is None and proposal.backtrack_to in exited_run(previous, views)
    if resumed:
        # The customer carries on with the run they left: it is the current run again.
        previous = resume_run(previous, views)
        here = current_step(previous, views)
        collected = {*collected, *left_collected}
        if proposal.backtrack_to == here:
            proposal = replace(proposal, backtrack_to=None)  # resumed where it was left
    start, backtracking = _start_of_walk(journey, views, previous, here, proposal, repairs)
    if start is None:
        return exit_step(previous, "the journey has no entry step")

    visited = set(current_run(previous))
    walk = _Walk(
        views, executed_tools, hold_at, collected, visited, [start], repairs, proposal.stop_at
    )
    steps = list(proposal.steps)
    if steps and steps[0] == start:
        steps.pop(0)
    if proposal.stop_at != start:  # named as next, the starting step is where the walk stays
        walk.extend(steps)

    finished = proposal.finish and walk.can_finish_at(walk.nodes[-1])
    if not finished:
        finished = walk.leave_forks()
    if proposal.finish and not finished:
        if walk.nodes and walk.can_finish_at(walk.nodes[-1]):
            finished = True
        else:
            where = walk.label(walk.nodes[-1]) if walk.nodes else "the start"
            repairs.append(f"ignored the end of the journey: it cannot end after {where}")
    if finished and not _performed_last(walk, here):
        # The journey ends only after a step the agent performed in this run: one shown to the
        # customer before this turn, or a tool step whose tools ran. A step entered just now is
        # where the journey stands instead; nothing is completed on a step never performed.
        finished = False
        while walk.nodes and views[walk.nodes[-1]].transit:
            walk.nodes.pop()
        where = walk.label(walk.nodes[-1]) if walk.nodes else "the start"
        repairs.append(f"did not end the journey: {where} was not performed in this run")

    if not walk.nodes:
        if here is None:
            return exit_step(previous, "; ".join([*repairs, "no first step could be chosen"]))
        # only a corrupt stored path ends on a fork; stay rather than invent a branch
        repairs.append(f"no step could be chosen; stayed at {views[here].label}")
        return VerifiedStep(previous, here, "stay", tuple(repairs), resumed=resumed)

    if backtracking:
        recorded = walk.nodes
    elif here is None and views[start].transit:
        recorded = walk.nodes[1:]  # the action-less root is an entry point, not a step
    elif here is None:
        recorded = walk.nodes
    else:
        recorded = walk.nodes[1:]

    path: Path = (*previous, *recorded)
    if finished:
        return VerifiedStep((*path, None), None, "completed", tuple(repairs), resumed=resumed)
    outcome: Outcome = "backtrack" if backtracking else ("advance" if recorded else "stay")
    return VerifiedStep(path, walk.nodes[-1], outcome, tuple(repairs), resumed=resumed)


def _performed_last(walk: _Walk, here: str | None) -> bool:
    """Whether the last real step of the walk (forks skipped) was performed in this run."""
    real = [n for n in walk.nodes if not walk.views[n].transit]
    if not real:
        return False
    last = real[-1]
    if walk.views[last].kind is NodeKind.TOOL:
        return walk.views[last].tools_ran(walk.executed_tools)
    return last == here


def _start_of_walk(
    journey: Journey,
    views: dict[str, NodeView],
    previous: Path,
    here: str | None,
    proposal: ProposedWalk,
    repairs: list[str],
) -> tuple[str | None, bool]:
    """Where the walk begins, and whether that is a (legal) backtrack."""
    target = proposal.backtrack_to
    if here is None:
        if target is not None:
            repairs.append("ignored backtracking: the journey has no live run to go back in")
        return (journey.root_id if journey.root_id in views else None), False
    if target is None:
        return here, False
    if target == here:
        repairs.append("backtracking target is the current step: treated as staying there")
        return here, False
    visited = set(current_run(previous))
    if target in visited and target in views and not views[target].transit:
        return target, True
    shown = views[target].label if target in views else repr(target)
    repairs.append(f"refused to backtrack to {shown}: it was not visited in this run")
    return here, False
