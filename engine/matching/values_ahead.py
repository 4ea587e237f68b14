"""Values given ahead of their step: "Transfer $250 to 7770001" while the journey asks for the
destination also answers the amount step that comes after it.

- A value for a field of a step the journey has not reached — but can reach from where it now
  stands — is kept only when it is found in the customer's own messages of this turn, or of the
  turn that asked for the journey while a prerequisite ran first (`engine.values.binding`): a
  model that invents a value for a later step fills nothing, and the step will ask. Every value
  kept is bound to its question there: said for it (bound) or worked out (inferred).
- Once the walk stops on a chat step every field of which was given ahead (or in this very
  turn), the step is passed: its single way out is taken, through single-exit forks, and the
  journey stops on the next step — never past a tool step (its tools still run, through the
  safe-actions gate: grounding and confirmation), never to the end of the journey (completion
  needs a performed step), never where the step has a choice of transitions.

Pure and deterministic: the model proposes values; these rules decide what is kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.matching.collected_values import CollectedItem, coerce_items
from engine.matching.journey_graph import NodeView, current_run
from engine.matching.journey_walk import VerifiedStep
from engine.model import CollectedField, Journey, NodeKind
from engine.values.binding import Binding, Role, bind_answers
from engine.values.grounding import CustomerMessage
from engine.values.runs import ReadingContext

MAX_PASSED_STEPS = 16  # a bound on passing satisfied steps in one turn (cycles of satisfied steps)


def reached_nodes(path: Sequence[str | None]) -> tuple[str, ...]:
    """The nodes of the run this turn ended in (the closed run when it just completed)."""
    trimmed = list(path)
    if trimmed and trimmed[-1] is None:
        trimmed.pop()
    return current_run(trimmed)


def nodes_ahead(
    views: Mapping[str, NodeView], start: str | None, reached: Collection[str]
) -> set[str]:
    """Steps reachable from `start` by the graph's transitions that this run has not reached."""
    if start is None or start not in views:
        return set()
    seen = {start}
    queue = deque([start])
    while queue:
        for nxt in views[queue.popleft()].successors:
            if nxt not in seen and nxt in views:
                seen.add(nxt)
                queue.append(nxt)
    return seen - set(reached)


def _fields_by_name(journey: Journey) -> dict[str, tuple[set[str], CollectedField]]:
    fields: dict[str, tuple[set[str], CollectedField]] = {}
    for node in journey.nodes:
        for fld in node.collects:
            owners, _ = fields.setdefault(fld.name, (set(), fld))
            owners.add(node.id)
    return fields


@dataclass(frozen=True)
class CollectedThisTurn:
    """What node selection collected for one journey in one turn."""

    values: dict[str, Any]  # typed values, for steps reached and for steps ahead
    ahead: dict[str, str]  # field → the step ahead it was given for
    grounded: frozenset[str]  # fields whose value is in the customer's words this turn
    notes: tuple[str, ...]  # what was dropped and why
    # values the customer gave that failed validation: field → why (the reply says why)
    refused: dict[str, str] = field(default_factory=dict)
    # field → the offset of the customer message whose words hold it (who said it, in a group)
    said_at: dict[str, int] = field(default_factory=dict)
    # field → how the customer gave it (`engine.values.binding`)
    bindings: dict[str, Binding] = field(default_factory=dict)


@dataclass(frozen=True)
class Words:
    """The customer's words a journey's values are read from in one turn."""

    now: Sequence[CustomerMessage] = ()  # this turn's messages
    ahead: Sequence[CustomerMessage] = ()  # … and those of the request a prerequisite delayed
    earlier: Sequence[CustomerMessage] = ()  # the conversation before this turn
    results: Sequence[Any] = ()  # tool results in view
    offered: Sequence[CustomerMessage] = ()  # the agent's last message (options it offered)
    reading: ReadingContext = field(default_factory=ReadingContext)
    # field → who gave the value it holds in this run; and who wrote this turn's messages: a
    # value another sender gave is no answer of this one's to change
    held_by: Mapping[str, str] = field(default_factory=dict)
    writers: frozenset[str] = frozenset()


def collect_values(
    journey: Journey,
    views: Mapping[str, NodeView],
    step: VerifiedStep,
    items: Sequence[CollectedItem],
    words: Words,
    previous_path: Sequence[str | None] = (),
) -> CollectedThisTurn:
    """The typed values the model reported for the steps reached in this run, plus those for
    steps ahead that the customer's words of this turn (and of the request a prerequisite
    delayed) contain — each bound to its question (`engine.values.binding`): the answer to the
    step the journey stood at, a value ahead, or a change to a step already passed. A value
    nothing the customer said supports is dropped, with a note."""
    reached = reached_nodes(step.path)
    ahead_nodes = nodes_ahead(views, step.node_id, reached)
    values, refused, notes = coerce_items(journey, items, (*reached, *ahead_nodes))
    fields = _fields_by_name(journey)
    order = {n.id: i for i, n in enumerate(journey.nodes)}
    roles, bindings = _bind(journey, values, words, previous_path)
    ahead: dict[str, str] = {}
    grounded: set[str] = set()
    said_at: dict[str, int] = {}
    kept: dict[str, Binding] = {}
    this_turn = {m.number for m in (*words.now, *words.ahead)}
    for name in sorted(values):
        owners, _ = fields[name]
        binding = bindings.get(name)
        if binding is None:
            value = values.pop(name)
            notes.append(_dropped_note(name, value, roles[name]))
            continue
        kept[name] = binding
        if binding.said_at in this_turn:
            grounded.add(name)
        if binding.said_at is not None:
            said_at[name] = binding.said_at
        if owners & set(reached):
            continue  # the field of a step this run reached: an answer, not a value ahead
        ahead[name] = min(owners & ahead_nodes, key=order.__getitem__)
    return CollectedThisTurn(
        values, ahead, frozenset(grounded), tuple(notes), refused, said_at, kept
    )


def supported_items(
    journey: Journey,
    items: Sequence[CollectedItem],
    words: Words,
    previous_path: Sequence[str | None] = (),
) -> list[CollectedItem]:
    """The reported values that something the customer said supports (bound or inferred, by
    `engine.values.binding`), and those that failed validation (their step must ask again): the
    values the journey's walk may count as given. An invented value answers no step."""
    values, rejected, _ = coerce_items(journey, items, [n.id for n in journey.nodes])
    _, bindings = _bind(journey, values, words, previous_path)
    keep = {n for n, b in bindings.items() if b is not None} | set(rejected)
    folded = {n.casefold() for n in keep}
    return [i for i in items if i.name.strip().casefold() in folded]


def _bind(
    journey: Journey,
    values: Mapping[str, Any],
    words: Words,
    previous_path: Sequence[str | None],
) -> tuple[dict[str, Role], dict[str, Binding | None]]:
    """Each value's role in this turn and its binding (`engine.values.binding`)."""
    fields = _fields_by_name(journey)
    roles = {name: _role(fields[name][0], previous_path, name, words) for name in values}
    bindings = bind_answers(
        {name: fields[name][1].shape for name in values},
        values,
        roles,
        now=words.now,
        ahead_words=words.ahead,
        earlier=words.earlier,
        results=words.results,
        offered=words.offered,
        ctx=words.reading,
    )
    return roles, bindings


def _role(owners: set[str], previous_path: Sequence[str | None], name: str, words: Words) -> Role:
    """What a value for a field of `owners` is, given where the journey stood: the answer to the
    step it stood at, a change to a step this run passed (a value the writer gave before), or
    a value ahead (of its step, or of anything this writer said for it)."""
    if not previous_path or previous_path[-1] is None:
        return "ahead"  # a new run: everything is said with the request
    if previous_path[-1] in owners:
        return "answer"
    passed = owners & set(current_run(list(previous_path)))
    if passed and (not words.writers or words.held_by.get(name) in words.writers):
        return "change"
    return "ahead"


def _dropped_note(name: str, value: Any, role: Role) -> str:
    if role == "ahead":
        return f"ignored {name}={value!r} for a step ahead: not in the customer's words this turn"
    if role == "change":
        return f"ignored {name}={value!r}: a change the customer did not say this turn"
    return f"ignored {name}={value!r}: nothing the customer said gives it"


def pass_satisfied_steps(
    views: Mapping[str, NodeView],
    step: VerifiedStep,
    given_now: Collection[str],
    given_ahead: Mapping[str, Collection[str]],
) -> VerifiedStep:
    """Pass the chat steps whose every field was given: in the customer's words this turn
    (`given_now`), or ahead for that very step (`given_ahead`: step → fields), each along its
    only way out; stop on the first step that is not satisfied, on a tool step, or where passing
    would need a choice or would end the journey. A backtrack is never passed on: the customer
    is changing an answer."""
    if step.outcome not in ("advance", "stay") or step.node_id is None:
        return step
    path = list(step.path)
    here = step.node_id
    repairs = list(step.repairs)
    passed: set[str] = set()
    for _ in range(MAX_PASSED_STEPS):
        view = views[here]
        if view.kind is not NodeKind.CHAT or not view.collects or here in passed:
            break
        ahead_here = given_ahead.get(here, ())
        if not all(f.name in given_now or f.name in ahead_here for f in view.collects):
            break
        chain = _single_way_on(views, here)
        if chain is None or chain[-1] in passed or chain[-1] == step.node_id:
            break  # a choice, the end, or back to a step this walk passed: stop here
        repairs.append(f"passed {view.id}: its values were given ahead")
        passed.add(here)
        path.extend(chain)
        here = chain[-1]
        if views[here].kind is NodeKind.TOOL:
            break
    if here == step.node_id:
        return step
    return replace(step, path=tuple(path), node_id=here, outcome="advance", repairs=tuple(repairs))


def _single_way_on(views: Mapping[str, NodeView], start: str) -> list[str] | None:
    """The nodes entered by leaving `start` along its only way out, through single-exit
    transit nodes; None when there is a choice, a cycle, or the way ends the journey."""
    exits = views[start].exits
    if len(exits) != 1 or exits[0] is None:
        return None
    chain = [exits[0]]
    while views[chain[-1]].transit:
        onward = views[chain[-1]].exits
        if len(onward) != 1 or onward[0] is None or onward[0] in chain:
            return None
        chain.append(onward[0])
    return chain
