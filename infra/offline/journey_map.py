"""The journey map of a node-selection prompt, read back: its steps and their flags, the fields
each step collects (as `Slot`s, with what is known of them) and the transitions between steps.

The prompt (`engine.matching.journey_prompt.build_node_selection_prompt`) shows numbered steps with
flags (BEGIN HERE, CURRENT STEP, VISITED, CUSTOMER DEPENDENT, TOOL STEP, FORK), the fields each
step collects and what is known of them, and the transitions; a line it does not know is an
`UnrecognizedPrompt`, never a guess. `infra.offline.journeys` walks the map.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from infra.offline.prompt import UnrecognizedPrompt, section
from infra.offline.slots import BOOL, DATE, ENUM, INT, NUMBER, TEXT, Slot

# Error messages name the node selection's entry point, `journeys.py` (`select_node`).
PARSER = "journey node selection parser (infra/offline/journeys.py)"
_STEP = re.compile(r"^STEP (?P<number>\d+): (?P<title>.*)$")
_FIELD = re.compile(
    r'^collects "(?P<name>[^"]+)" \((?P<details>.*)\): (?P<state>not given yet|known = .*)$'
)
_TRANSITION = re.compile(
    r'^↳ (?:if "(?P<condition>.*)"|(?P<plain>once this step is done|always)) → '
    r"(?:step (?P<target>\d+)(?P<suffix>.*)|END JOURNEY)$"
)
_KIND = re.compile(
    r"^(?:one of: (?P<choices>.*)|(?P<kind>text|whole number|number|yes/no|date YYYY-MM-DD|"
    r"time HH:MM|date and time YYYY-MM-DDTHH:MM|amount of money))"
    r"(?P<bounds>(?: [>≥≤] -?\d+(?:\.\d+)?)*)$"
)
_KINDS = {
    "text": TEXT,
    "whole number": INT,
    "number": NUMBER,
    "yes/no": BOOL,
    "date YYYY-MM-DD": DATE,
    "time HH:MM": TEXT,
    "date and time YYYY-MM-DDTHH:MM": TEXT,
    "amount of money": NUMBER,
}


@dataclass(frozen=True)
class MapField:
    """A field a step collects: its slot and whether it is required and already known."""

    name: str
    slot: Slot
    required: bool
    known: str | None  # the shown value, None when not given yet


@dataclass(frozen=True)
class MapTransition:
    """A way out of a step: its condition (None: unconditional) and the step it leads to."""

    condition: str | None
    target: str | None  # a step number, None = END JOURNEY
    shown: bool = True  # False for "(not shown: more steps follow)"


@dataclass
class MapStep:
    """A numbered step with its flags, the fields it collects and its ways out."""

    number: str
    title: str
    begin: bool = False
    current: bool = False
    visited: bool = False
    customer_dependent: bool = False
    customer_action: str = ""
    tool: bool = False
    tools_ran: bool = False
    fork: bool = False
    fields: list[MapField] = field(default_factory=list)
    transitions: list[MapTransition] = field(default_factory=list)


@dataclass(frozen=True)
class JourneyMap:
    """The journey's title, activation conditions, steps and the order this run visited them."""

    title: str
    conditions: tuple[str, ...]
    steps: dict[str, MapStep]
    visited_order: tuple[str, ...]  # step numbers of this run, in order

    @property
    def current(self) -> MapStep | None:
        return next((s for s in self.steps.values() if s.current), None)

    @property
    def begin(self) -> MapStep | None:
        return next((s for s in self.steps.values() if s.begin), None)


def parse_journey_map(prompt: str) -> JourneyMap:
    """The journey map and position sections of a node-selection prompt."""
    text = section(prompt, "## Journey map\n", parser=PARSER, ends=("\n\n## ",))
    title = re.search(r"^Journey: (.*)$", text, re.M)
    if title is None or "\nSteps:\n" not in text:
        raise UnrecognizedPrompt(f"offline {PARSER}: the journey map has no title or no steps")
    conditions = re.search(r"^Activated when: (.*)$", text, re.M)
    steps: dict[str, MapStep] = {}
    step: MapStep | None = None
    for line in text.split("\nSteps:\n", 1)[1].splitlines():
        if not line.strip():
            continue
        header = _STEP.match(line)
        if header:
            step = MapStep(header["number"], header["title"])
            steps[step.number] = step
        elif step is None:
            raise UnrecognizedPrompt(f"offline {PARSER}: a line before the first step: {line!r}")
        else:
            _read_step_line(step, line.strip())
    if not steps:
        raise UnrecognizedPrompt(f"offline {PARSER}: the journey map lists no steps")
    where = section(prompt, "## Where the journey stands\n", parser=PARSER, ends=("\n\n## ",))
    visited = re.search(r"Visited in this run: ([^.]*)\.", where)
    order = tuple(re.findall(r"step (\d+)", visited.group(1))) if visited else ()
    return JourneyMap(
        title=title.group(1),
        conditions=tuple(re.findall(r'"([^"]*)"', conditions.group(1))) if conditions else (),
        steps=steps,
        visited_order=order,
    )


def _read_step_line(step: MapStep, line: str) -> None:
    if line.startswith("↳ "):
        step.transitions.append(_read_transition(line))
        return
    if not line.startswith("- "):
        raise UnrecognizedPrompt(
            f"offline {PARSER}: unexpected line in step {step.number}: {line!r}"
        )
    flag = line[2:]
    if flag.startswith("collects "):
        step.fields.append(_read_field(flag))
    elif flag.startswith("BEGIN HERE"):
        step.begin = True
    elif flag.startswith("CURRENT STEP"):
        step.current = True
    elif flag.startswith("VISITED"):
        step.visited = True
    elif flag.startswith("CUSTOMER DEPENDENT"):
        step.customer_dependent = True
        step.customer_action = flag.split("customer has: ", 1)[-1]
    elif flag.startswith("TOOL STEP"):
        step.tool = True
        step.tools_ran = " — ran this turn" in flag
    elif flag.startswith("FORK"):
        step.fork = True
    elif flag.startswith(("LEFT HERE", "SAYS SOMETHING NEW")):
        pass  # hints for a model; the walk here stops at chat steps and restarts exited runs
    else:
        raise UnrecognizedPrompt(f"offline {PARSER}: unknown flag in step {step.number}: {flag!r}")


def _read_transition(line: str) -> MapTransition:
    m = _TRANSITION.match(line)
    if m is None:
        raise UnrecognizedPrompt(f"offline {PARSER}: cannot read the transition {line!r}")
    return MapTransition(
        condition=m["condition"],
        target=m["target"],
        shown="not shown" not in (m["suffix"] or ""),
    )


def _read_field(flag: str) -> MapField:
    m = _FIELD.match(flag)
    if m is None:
        raise UnrecognizedPrompt(f"offline {PARSER}: cannot read the collected field {flag!r}")
    details = m["details"].split(", ")
    required = details[-1] != "optional"
    if not required:
        details = details[:-1]
    kind, choices, description = TEXT, (), ""
    head = _KIND.match(details[0])
    if head is None:
        raise UnrecognizedPrompt(f"offline {PARSER}: unknown field type in {flag!r}")
    if head["choices"] is not None:
        # "one of: a, b, c" shares the ", " separator with a description: long items describe
        kind = ENUM
        items = [head["choices"], *details[1:]]
        choices = tuple(i for i in items if len(i.split()) <= 3)
        description = ", ".join(i for i in items if len(i.split()) > 3)
    else:
        kind = _KINDS[head["kind"]]
        description = ", ".join(details[1:])
    state = m["state"]
    known = None if state == "not given yet" else state.removeprefix("known = ").strip('"')
    slot = Slot(m["name"], kind, choices, description)
    return MapField(m["name"], slot, required, known)
