"""Journey node selection (`JourneyNodeSelection`) from the map in the prompt.

The map (steps with their flags, the fields each collects and what is known of them, the
transitions) is read back by `infra.offline.journey_map`. The walk over it:

- a clear abandonment ("cancel", "never mind", "stop", "I don't want to … anymore") drops the
  journey — unless the current step has a transition for exactly that (e.g. "The customer
  cancelled"), which is then taken;
- a correction ("actually, make it 300") of a value collected at a VISITED step backtracks there;
- the current step is complete when: customer dependent → every required field is known or
  given now (no fields: the customer answered); tool step → its tools ran; plain chat → the agent
  spoke;
- from a complete step: a single way out is taken; among several, the transition whose condition
  is most similar to the latest message / tool results (with yes-no and success-failure polarity)
  wins; a fork always takes one; a chat step with no clear winner stays;
- on a newly reached step the walk stops, except at a customer-dependent step whose fields the
  customer already gave (so a first message "send $500 to account 1234" passes the asking step);
- it never passes a tool step whose tools did not run, and "NONE" means the journey ended.

`engine.matching.journey_answer.verify_advancement` still checks every answer against the graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.matching.collected_values import CollectedItem
from engine.matching.journey_answer import JourneyNodeSelection
from engine.own_lines import FALLBACK_REPLY
from infra.offline.choices import with_vocabulary
from infra.offline.journey_map import (
    PARSER,
    JourneyMap,
    MapField,
    MapStep,
    MapTransition,
    parse_journey_map,
)
from infra.offline.language import (
    answer_polarity,
    asks_for_change,
    branch_polarity,
    condition_polarity,
    data_polarity,
    in_agent_words,
    is_abandonment,
    is_question,
    negated_wish,
    similarity,
)
from infra.offline.prompt import (
    SharedContext,
    UnrecognizedPrompt,
    flatten,
    parse_shared_context,
)
from infra.offline.slots import BOOL
from infra.offline.values import extract_values

_MAX_WALK = 24
_ABOUT_IT = 0.3  # similarity from which a message is about a journey
_CORRECTION = re.compile(
    r"\b(actually|instead|change (it|that)|make it|correction|i meant|sorry,? i meant|rather)\b",
    re.I,
)


@dataclass
class _Walk:
    journey: JourneyMap
    context: SharedContext
    message: str
    collected: dict[str, str] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    entering: bool = False  # no live run: values shown as known are from an earlier run
    named_only: bool = False  # the message is not about this journey: only values it names
    consumed: bool = False  # tools ran this turn: the message already gave what it had

    def known(self, f: MapField) -> bool:
        """Given in this run. Values of an earlier run (shown as known when a journey is entered
        again) are not reused: a second transfer must not inherit the first one's amount."""
        return (f.known is not None and not self.entering) or f.name in self.collected

    def reopened(self, step: MapStep) -> bool:
        """A step entered again through a loop ("the login failed" → back to asking): its known
        values are the ones that did not work, so it needs new ones."""
        return self.journey.visited_order.count(step.number) > 1 or (
            step.number in self.journey.visited_order and not step.current
        )


def select_node(prompt: str) -> JourneyNodeSelection:
    """Answer a node-selection prompt."""
    journey = parse_journey_map(prompt)
    context = parse_shared_context(prompt, parser=PARSER)
    here = journey.current
    message = context.latest_customer_text
    # Tool results mean this is the re-selection after the tools ran: the message was already
    # used by the walk that led to them (reading it again would re-send a failed password).
    walk = _Walk(
        journey, context, message, entering=here is None, consumed=bool(context.tool_results)
    )
    if here is None and _about(walk, _topic(journey)) < _ABOUT_IT:
        # A journey resumed after its prerequisite reads the prerequisite's last answer ("1234"
        # was a PIN): only values it names explicitly ("account ID 1234324") count here.
        walk.named_only = True
    start = here or journey.begin
    if start is None:
        raise UnrecognizedPrompt(f"offline {PARSER}: no CURRENT STEP and no BEGIN HERE step")

    if here is not None and _dropped(walk, here):
        exit_by = _cancel_transition(here)
        if exit_by is None:
            return JourneyNodeSelection(
                rationale="the customer dropped it",
                journey_applies=False,
                next_step=here.number,
            )
        walk.steps.append(here.number)
        walk.notes.append("the customer cancelled")
        return _answer(walk, _follow(walk, exit_by))

    backtrack = _backtrack_target(walk) if here is not None and not walk.consumed else None
    if backtrack is not None:
        walk.steps.append(backtrack.number)
        return _answer(walk, _continue_from(walk, backtrack), backtracked=backtrack.number)

    walk.steps.append(start.number)
    if here is None:
        _named_for_later_steps(walk)
        if start.fork or _passable_on_arrival(walk, start):
            return _answer(walk, _continue_from(walk, start))
        return _answer(walk, start.number)
    if not _complete(walk, here, answering=True):
        walk.notes.append(f"step {here.number} is not complete")
        return _answer(walk, here.number)
    return _answer(walk, _continue_from(walk, here))


def _named_for_later_steps(walk: _Walk) -> None:
    """The request that starts a journey may already name a value a later step asks for ("I want
    to transfer 200 dollars" while the first step asks for the destination): only values a cue
    names (a currency, "account ID …"), never a bare word or number, never a secret. The engine
    keeps them only when they are grounded in the customer's words (values ahead)."""
    if walk.named_only or walk.consumed or not walk.message:
        return
    wanted = [
        f
        for s in walk.journey.steps.values()
        for f in s.fields
        if f.name not in walk.collected and f.slot.role != "secret"
    ]
    if not wanted:
        return
    found = extract_values(
        [with_vocabulary(f.slot, walk.context.glossary) for f in wanted],
        walk.message,
        named_only=True,
    )
    if found:
        walk.collected.update(found)
        walk.notes.append(f"named with the request: {', '.join(sorted(found))}")


def _dropped(walk: _Walk, here: MapStep) -> bool:
    """Abandonment, or an explicit "I don't want …" about this journey."""
    if not walk.message:
        return False
    if is_abandonment(walk.message):
        return True
    return negated_wish(walk.message) and _about(walk, _topic(walk.journey)) >= _ABOUT_IT


def _about(walk: _Walk, topic: str) -> float:
    """How much the latest message is about `topic`, both read in the agent's words."""
    glossary = walk.context.glossary
    return similarity(in_agent_words(topic, glossary), in_agent_words(walk.message, glossary))


def _topic(journey: JourneyMap) -> str:
    return " ".join([journey.title, *journey.conditions])


def _cancel_transition(step: MapStep) -> MapTransition | None:
    """A transition of the current step meant for a refusal ("The customer cancelled")."""
    negative = [
        t
        for t in step.transitions
        if t.condition and condition_polarity(t.condition) < 0 and _is_refusal(t.condition)
    ]
    if len(negative) == 1 and (step.customer_dependent or not step.tool):
        return negative[0]
    return None


def _is_refusal(condition: str) -> bool:
    return bool(
        re.search(r"\b(cancel\w*|declin\w*|refus\w*|gives? up|stop\w*|abandon\w*)", condition, re.I)
    )


def _backtrack_target(walk: _Walk) -> MapStep | None:
    """A VISITED step whose known value the customer corrects in the latest message."""
    if not _CORRECTION.search(walk.message):
        return None
    for step in walk.journey.steps.values():
        if not step.visited or step.current:
            continue
        corrections = _values_for(walk, step, corrections=True)
        if corrections:
            walk.collected.update(corrections)
            walk.notes.append(f"corrected {', '.join(corrections)} given at step {step.number}")
            return step
    return None


def _values_for(
    walk: _Walk, step: MapStep, *, answering: bool = False, corrections: bool = False
) -> dict[str, str]:
    """Values of `step`'s fields in the latest message: fields not known yet; with `corrections`
    (or at a reopened step) also known fields, kept only when the value changed."""
    if not step.fields or not walk.message or walk.consumed:
        return {}
    anew = corrections or walk.reopened(step) or _reasked(walk, step)
    wanted = [f for f in step.fields if anew or not walk.known(f)]
    if corrections:
        wanted = [f for f in wanted if walk.known(f)]
    if not wanted:
        return {}
    order = _asked_order(walk.context.previous_agent_message or "", wanted) if answering else ()
    found = extract_values(
        [with_vocabulary(f.slot, walk.context.glossary) for f in wanted],
        walk.message,
        answering=order,
        named_only=walk.named_only,
        offered=walk.context.previous_agent_message or "",
    )
    if anew:
        changed = {k: v for k, v in found.items() if _differs(v, _known_of(step, k))}
        # The same value said again as the answer to the question asked anew is the customer's
        # answer (the username was right, the password was not); otherwise a repeated value in
        # passing is not a new one.
        found = changed or (found if answering and not corrections else {})
    return found


def _wants_change(walk: _Walk, step: MapStep) -> bool:
    """At a read-back ("shall I send 300?"), asking to change something answers it: the step's
    missing fields are yes/no ones, the customer did not agree, and a branch is for changes."""
    missing = [f for f in step.fields if f.required and not walk.known(f)]
    return (
        bool(missing)
        and all(f.slot.kind == BOOL for f in missing)
        and answer_polarity(walk.message) <= 0
        and asks_for_change(walk.message)
        and any(t.condition and branch_polarity(t.condition) < 0 for t in step.transitions)
    )


def _reasked(walk: _Walk, step: MapStep) -> bool:
    """The current step asks again for values that are all known already ("the balance is too
    low: how much instead?"): only a new value completes it, never the one that failed."""
    return (
        step.current
        and not walk.entering
        and bool(step.fields)
        and all(f.known is not None for f in step.fields)
    )


def _known_of(step: MapStep, name: str) -> str:
    return next((f.known or "" for f in step.fields if f.name == name), "")


def _differs(new: str, old: str) -> bool:
    try:
        return float(new) != float(old)
    except ValueError:
        return new.strip().lower() != old.strip().lower()


def _asked_order(agent_message: str, fields: list[MapField]) -> tuple[str, ...]:
    """The fields the agent asked for, in the order it named them (unnamed ones after)."""
    text = agent_message.lower()

    def position(f: MapField) -> int:
        spots = [text.find(w) for w in f.slot.name_words if len(w) > 2 and w in text]
        return min(spots) if spots else 10_000

    return tuple(f.name for f in sorted(fields, key=position))


def _complete(walk: _Walk, step: MapStep, *, answering: bool) -> bool:
    """Whether `step` is done. Fields given now are recorded in `walk.collected`."""
    if step.tool:
        return step.tools_ran
    if step.fork:
        return True
    if step.fields:
        found = _values_for(walk, step, answering=answering)
        walk.collected.update(found)
        if (walk.reopened(step) or _reasked(walk, step)) and not found:
            return False  # asked again because the value did not work: a new one is needed
        if all(walk.known(f) for f in step.fields if f.required):
            return True
        return answering and _wants_change(walk, step)
    if step.customer_dependent:
        return answering and _answered(walk, step)
    # a plain chat step is done once the agent performed it (it was last turn's reply)
    spoke = walk.context.previous_agent_message
    return answering and spoke is not None and spoke.strip() != FALLBACK_REPLY


def _answered(walk: _Walk, step: MapStep) -> bool:
    """A customer-dependent step without fields: the latest message gives what it waits for."""
    message = walk.message
    if not message or (is_question(message) and not answer_polarity(message)):
        return False
    wanted = step.customer_action.lower()
    if re.search(r"confirm|agree|accept|approve|decline|cancel|reject|yes|no\b", wanted):
        return answer_polarity(message) != 0 or is_abandonment(message)
    return True


def _continue_from(walk: _Walk, step: MapStep) -> str | None:
    """Leave the complete `step` and walk on; the step number where the walk stops (None = end)."""
    current = step
    for _ in range(_MAX_WALK):
        choice = _choose_transition(walk, current)
        if choice is None:
            return current.number  # no clear way out yet: stay
        nxt = _follow(walk, choice)
        if nxt is None or nxt not in walk.journey.steps or nxt in walk.steps[:-1]:
            return nxt  # the end, a step beyond the map, or a loop closing within this walk
        target = walk.journey.steps[nxt]
        if not target.fork and not _passable_on_arrival(walk, target):
            return nxt
        current = target
    return current.number


def _passable_on_arrival(walk: _Walk, step: MapStep) -> bool:
    """A step reached in this walk may be passed only when the agent has nothing to do there:
    it collects fields, and the customer has given all of them already."""
    if step.tool or not step.fields:
        return False
    return _complete(walk, step, answering=False)


def _follow(walk: _Walk, transition: MapTransition) -> str | None:
    """Take `transition`: the step it leads to (recorded in the walk), None for the end."""
    if transition.target is not None:
        walk.steps.append(transition.target)
    return transition.target


def _choose_transition(walk: _Walk, step: MapStep) -> MapTransition | None:
    """One way out of a complete step, or None to stay."""
    exits = step.transitions
    if not exits:
        return MapTransition(None, None)
    distinct = {(t.target, t.condition) for t in exits}
    if len({t.target for t in exits}) == 1 or len(distinct) == 1:
        return exits[0]
    evidence, polarity = _evidence(walk, step)
    answered = polarity != 0 and evidence == walk.message  # a yes / no from the customer
    if evidence == walk.message and not polarity and _wants_change(walk, step):
        polarity, answered = -1, True
    scored = []
    for t in exits:
        if t.condition is None:
            continue
        score = similarity(
            *(in_agent_words(x, walk.context.glossary) for x in (t.condition, evidence))
        )
        if polarity:
            sign = branch_polarity(t.condition) if answered else condition_polarity(t.condition)
            score += 0.5 if sign == polarity else -0.5
        scored.append((score, t))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    unconditional = [t for t in exits if t.condition is None]
    best = scored[0] if scored else None
    clear = best is not None and best[0] >= 0.35 and (len(scored) < 2 or best[0] > scored[1][0])
    if clear and best is not None:
        walk.notes.append(f'took "{best[1].condition}"')
        return best[1]
    if unconditional:
        return unconditional[0]
    if step.fork and best is not None:
        return best[1]  # a fork never stops a walk: take the likeliest branch
    return None


def _evidence(walk: _Walk, step: MapStep) -> tuple[str, int]:
    """What decides between conditions: tool results after a tool step, else the customer's
    latest message, with its polarity (+1 success / yes, -1 failure / no, 0 unknown)."""
    results = walk.context.recent_tool_results()
    after_tool = step.tool or (step.fork and _came_from_tool(walk))
    if results and after_tool:
        polarity = 0
        texts = []
        for r in results:
            polarity = polarity or data_polarity(r.data)
            flat = flatten(r.data)
            texts.append(" ".join(f"{k} {v}" for k, v in flat.items()))
        return " ".join(texts), polarity or 1
    return walk.message, answer_polarity(walk.message)


def _came_from_tool(walk: _Walk) -> bool:
    """Whether the fork being decided was reached from a tool step."""
    previous = walk.steps[-2] if len(walk.steps) >= 2 else None
    if previous is not None and previous in walk.journey.steps:
        return walk.journey.steps[previous].tool
    return any(s.tool for s in walk.journey.steps.values() if s.current)


def _answer(walk: _Walk, stop: str | None, backtracked: str | None = None) -> JourneyNodeSelection:
    steps = [s for i, s in enumerate(walk.steps) if i == 0 or walk.steps[i - 1] != s]
    if stop is not None and (not steps or steps[-1] != stop):
        steps.append(stop)
    rationale = "; ".join(walk.notes[-2:]) or (
        "journey ends" if stop is None else f"step {stop} next"
    )
    return JourneyNodeSelection(
        rationale=" ".join(rationale.split()[:12]),
        journey_applies=True,
        requires_backtracking=backtracked is not None,
        backtracking_target_step=backtracked,
        step_advancement=steps,
        next_step=stop if stop is not None else "NONE",
        collected=[CollectedItem(name=k, value=v) for k, v in walk.collected.items()],
    )
