"""A session stores journey paths compacted (`engine.matching.journey_graph.compact_path`): the
last run, each step's last two entries. Property tests over random graphs and long looping
paths: everything the engine reads off a path — the current step, the current run, the run the
customer left, a step entered again, pruning, the node-selection prompt, walk verification,
auto-return, entry, values given ahead, version migration and clean ends — is the same on the
compacted path as on the whole history, and compacting after every turn equals compacting once
(docs/semantics.md, "Bounded journey paths")."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.context import TurnContext
from engine.matching.collected_values import CollectedItem
from engine.matching.journey_answer import JourneyNodeSelection, verify_advancement
from engine.matching.journey_forced_moves import auto_return, entry_step
from engine.matching.journey_graph import (
    NodeView,
    Path,
    build_node_views,
    compact_path,
    current_run,
    current_step,
    exited_run,
    latest_entries,
    path_bound,
    position_is_stale,
    prune_nodes,
)
from engine.matching.journey_prompt import build_node_selection_prompt
from engine.matching.journey_walk import VerifiedStep
from engine.matching.journeys import select_journey_step
from engine.matching.values_ahead import reached_nodes
from engine.model import AgentSnapshot, CollectedField, Journey, JourneyMigration, NodeKind
from engine.sessions.session import CollectedValue, Event, EventKind, EventSource, SessionState
from engine.testing import ScriptedLLM
from engine.versioning.pinning import end_dangling, migrate_session, session_position
from tests.engine.test_journey_graph import journeys_and_answers, walked_from
from tests.engine.test_journey_selection import turn_llm

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- strategies ------------------------------------------------------------------------------------


@st.composite
def _run(draw: Any, views: dict[str, NodeView], root: str, longest: int) -> list[str]:
    """A walk from the root along real edges, as a path records it (no action-less root, never
    ending on a fork): loops come from the graph's cycles, repeated as often as drawn."""
    walk = [root]
    for _ in range(draw(st.integers(min_value=0, max_value=longest))):
        successors = views[walk[-1]].successors
        if not successors:
            break
        walk.append(draw(st.sampled_from(successors)))
    recorded = walk[1:] if views[root].transit else walk
    while recorded and views[recorded[-1]].transit:
        recorded.pop()
    return recorded


@st.composite
def looping_paths(draw: Any) -> tuple[Journey, Path, JourneyNodeSelection, set[str]]:
    """A journey with fields on its chat steps, a long history (several runs, loops, now and
    then a step the journey no longer has), and an answer the model might give now."""
    journey, _, selection, executed = draw(journeys_and_answers())
    journey = journey.model_copy(
        update={
            "nodes": tuple(
                n.model_copy(update={"collects": (CollectedField(name=f"f_{n.id}"),)})
                if n.kind is NodeKind.CHAT and n.action is not None
                else n
                for n in journey.nodes
            )
        }
    )
    views = build_node_views(journey)
    path: list[str | None] = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path += draw(_run(views, journey.root_id, 30))
        if draw(st.booleans()):
            path.append(None)
    if path and path[-1] is not None and draw(st.integers(min_value=0, max_value=9)) == 0:
        path.append("gone")  # a step an edit removed: the position is stale
    if path and path[-1] is None and draw(st.booleans()):
        path.pop()  # most sessions are mid-run
    return journey, tuple(path), selection, executed


# -- helpers ---------------------------------------------------------------------------------------


def tail(step: VerifiedStep, previous: Path, views: dict[str, NodeView]) -> Path:
    """What verification appended (the new steps of this turn) after the path it walked from:
    the stored one, or that path with a run the customer left opened again (`walked_from`)."""
    assert step.path[: len(previous)] == previous
    start = tuple(walked_from(views, previous, step))
    return step.path[len(start) :]


def same_step(
    full: VerifiedStep | None,
    compact: VerifiedStep | None,
    p: Path,
    c: Path,
    views: dict[str, NodeView],
) -> None:
    if full is None or compact is None:
        assert full is compact
        return
    assert (full.node_id, full.outcome, full.repairs, full.resumed) == (
        compact.node_id,
        compact.outcome,
        compact.repairs,
        compact.resumed,
    )
    assert tail(full, p, views) == tail(compact, c, views)
    assert compact_path(full.path) == compact_path(compact.path)


def run_facts(path: Path, views: dict[str, NodeView]) -> tuple[Any, ...]:
    """What the engine reads off a live run: whether it is live, its current step, its steps,
    which of them were entered again, in the order of their last entry."""
    run = current_run(path)
    return (
        bool(path) and path[-1] is not None,
        current_step(path, views),
        position_is_stale(path, views),
        {n: min(c, 2) for n, c in Counter(run).items()},
        latest_entries(run),
    )


def context_for(journey: Journey, path: Path, collected: tuple[CollectedValue, ...]) -> Any:
    agent = AgentSnapshot(id="a", name="Agent", journeys=(journey,))
    session = SessionState(
        id="s", agent_id="a", customer_id="c", journey_paths={journey.id: path}, collected=collected
    )
    said = Event(id="e0", offset=0, kind=EventKind.MESSAGE, source=EventSource.CUSTOMER,
                 created_at=T0, text="x please")  # fmt: skip
    return TurnContext(agent, session, [said])


# -- the properties --------------------------------------------------------------------------------


@SETTINGS
@given(looping_paths())
def test_a_compacted_path_is_bounded_and_compacting_again_changes_nothing(
    case: tuple[Journey, Path, JourneyNodeSelection, set[str]],
) -> None:
    journey, path, _, _ = case
    compact = compact_path(path)
    assert compact_path(compact) == compact
    assert len(compact) <= path_bound(journey) + (1 if "gone" in path else 0)
    assert len(compact) <= len(path)


@SETTINGS
@given(looping_paths(), st.data())
def test_compacting_after_every_turn_equals_compacting_the_whole_history(
    case: tuple[Journey, Path, JourneyNodeSelection, set[str]], data: st.DataObject
) -> None:
    journey, path, _, _ = case
    views = build_node_views(journey)
    turn = data.draw(_run(views, journey.root_id, 12))
    if data.draw(st.booleans()):
        turn = [*turn, None, *data.draw(_run(views, journey.root_id, 12))]
    assert compact_path((*compact_path(path), *turn)) == compact_path((*path, *turn))


@SETTINGS
@given(looping_paths())
def test_what_the_readers_derive_from_a_path_is_the_same_on_its_compaction(
    case: tuple[Journey, Path, JourneyNodeSelection, set[str]],
) -> None:
    journey, path, _, _ = case
    views = build_node_views(journey)
    compact = compact_path(path)

    assert current_step(compact, views) == current_step(path, views)
    assert position_is_stale(compact, views) == position_is_stale(path, views)
    assert (bool(compact) and compact[-1] is not None) == (bool(path) and path[-1] is not None)
    run, compact_run = current_run(path), current_run(compact)
    assert set(compact_run) == set(run)
    # entered once or again (a selector's pick said with the request counts on the first entry)
    assert {n: min(c, 2) for n, c in Counter(compact_run).items()} == {
        n: min(c, 2) for n, c in Counter(run).items()
    }
    assert latest_entries(compact_run) == latest_entries(run)
    left, compact_left = exited_run(path, views), exited_run(compact, views)
    assert set(compact_left) == set(left) and compact_left[-1:] == left[-1:]
    assert set(reached_nodes(compact)) == set(reached_nodes(path))
    for depth in (1, 3, 5):
        assert prune_nodes(journey, views, compact, depth) == prune_nodes(
            journey, views, path, depth
        )


@SETTINGS
@given(looping_paths(), st.sets(st.sampled_from([f"f_n{i}" for i in range(8)])))
def test_every_walk_decision_is_the_same_on_the_compacted_path(
    case: tuple[Journey, Path, JourneyNodeSelection, set[str]], known: set[str]
) -> None:
    journey, path, selection, executed = case
    views = build_node_views(journey)
    compact = compact_path(path)

    same_step(
        verify_advancement(journey, views, path, selection, executed, collected=known),
        verify_advancement(journey, views, compact, selection, executed, collected=known),
        path,
        compact,
        views,
    )
    same_step(
        auto_return(journey, views, path, executed),
        auto_return(journey, views, compact, executed),
        path,
        compact,
        views,
    )
    same_step(
        entry_step(journey, views, previous_path=path, known_fields=known),
        entry_step(journey, views, previous_path=compact, known_fields=known),
        path,
        compact,
        views,
    )


@SETTINGS
@given(looping_paths(), st.data())
def test_node_selection_prompts_values_and_steps_are_the_same_on_the_compacted_path(
    case: tuple[Journey, Path, JourneyNodeSelection, set[str]], data: st.DataObject
) -> None:
    """One node selection end to end — the prompt the model reads, the verified step, the values
    kept and those given ahead in earlier turns of the run — on the whole history and on its
    compaction."""
    journey, path, selection, executed = case
    views = build_node_views(journey)
    fields = [f.name for n in journey.nodes for f in n.collects]
    ahead = tuple(
        CollectedValue(journey_id=journey.id, node_id=node, name=name, value="x", turn_id="t0",
                       ahead=True)
        for node, name in data.draw(
            st.lists(st.tuples(st.sampled_from(sorted(views)), st.sampled_from(fields or ["f"])),
                     max_size=3)
        )
    )  # fmt: skip
    reported = data.draw(st.lists(st.sampled_from(fields or ["f"]), max_size=3))
    selection = selection.model_copy(
        update={"collected": [CollectedItem(name=f, value="x") for f in reported]}
    )

    def run(on: Path) -> tuple[Any, str]:
        scripted = ScriptedLLM().on(JourneyNodeSelection, selection.model_dump())
        prompt = build_node_selection_prompt(
            context_for(journey, on, ahead), journey, views, on, collected={}, max_depth=4,
            explain=False,
        )  # fmt: skip
        result = asyncio.run(
            select_journey_step(
                turn_llm(scripted), context_for(journey, on, ahead), journey, on,
                executed_tools=executed, max_depth=4,
            )
        )  # fmt: skip
        return result, prompt

    compact = compact_path(path)
    (full, full_prompt), (short, short_prompt) = run(path), run(compact)

    assert short_prompt == full_prompt
    same_step(full.step, short.step, path, compact, views)
    assert (short.collected, short.ahead, short.notes, short.grounded) == (
        full.collected,
        full.ahead,
        full.notes,
        full.grounded,
    )


@SETTINGS
@given(looping_paths(), st.data())
def test_versions_end_and_migrate_a_compacted_path_as_they_would_the_whole_history(
    case: tuple[Journey, Path, JourneyNodeSelection, set[str]], data: st.DataObject
) -> None:
    journey, path, _, _ = case
    kept = data.draw(st.sets(st.sampled_from([n.id for n in journey.nodes])))
    smaller = journey.model_copy(
        update={
            "nodes": tuple(n for n in journey.nodes if n.id in kept),
            "edges": tuple(
                e
                for e in journey.edges
                if e.source in kept and (e.target is None or e.target in kept)
            ),
        }
    )
    published = AgentSnapshot(id="a", name="Agent", version="v2", journeys=(smaller,))
    renames = {n.id: f"{n.id}_v2" for n in journey.nodes if data.draw(st.booleans())}
    renamed = journey.model_copy(
        update={
            "nodes": tuple(n.model_copy(update={"id": renames.get(n.id, n.id)})
                           for n in journey.nodes),
            "edges": (),
        }
    )  # fmt: skip
    migrating = AgentSnapshot(
        id="a", name="Agent", version="v3", journeys=(renamed,),
        migrations=(JourneyMigration(journey=journey.id, steps=renames),),
    )  # fmt: skip

    def session(on: Path) -> SessionState:
        return SessionState(id="s", agent_id="a", customer_id="c", agent_version="v1",
                            journey_paths={journey.id: on})  # fmt: skip

    compact = compact_path(path)
    full_end, full_ended = end_dangling(session(path), published)
    short_end, short_ended = end_dangling(session(compact), published)
    assert short_ended == full_ended
    # (An ended journey's closed run is never read again: the node selection of a journey that
    # is not running starts from an empty path, so only the live run's facts are compared.)
    views = build_node_views(smaller)
    assert run_facts(short_end.journey_paths[journey.id], views) == run_facts(
        full_end.journey_paths[journey.id], views
    )
    assert session_position(session(compact)) == session_position(session(path))
    full_moved = migrate_session(session(path), "v1", migrating)
    short_moved = migrate_session(session(compact), "v1", migrating)
    assert (full_moved is None) == (short_moved is None)
    if full_moved is not None and short_moved is not None:
        views = build_node_views(renamed)
        assert run_facts(short_moved.journey_paths[journey.id], views) == run_facts(
            full_moved.journey_paths[journey.id], views
        )
