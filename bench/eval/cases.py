"""The evaluation cases: their file format, loading and checking, and the turn context each one
describes.

A case file holds one decision kind:

```yaml
kind: actionable                 # see KINDS
cases:
  - id: transfer-paraphrase
    agent: bank                  # bench/eval/agents/bank.yaml
    hard: true                   # the kinds of case the set is weighted to (see docs)
    note: why this case is here
    conv:                        # the conversation, oldest first
      - "C: hi"                  # C: customer, A: agent
      - "A: Hello! How can I help?"
      - 'T get_balance: {"balance": 120}'   # a tool result seen earlier
      - 'T get_balance(account=savings): {"balance": 900}'   # … with the arguments it came from
      - "C: I'd like to make a transfer please"
    expect: {transfer_help: true, greet: false}
```

What `expect` holds depends on the kind (`bench.eval.decisions`). A case that paraphrases
another names it as its `scenario` (`scenario: act-fees` on `act-fees-paraphrase`): one scenario,
one part of the set (below). Journey cases also give
`journey`, `path` (the steps walked so far; "EXIT" closes a run the customer left), `known`
(values collected earlier) and
`ran` (tools that ran this turn, with their data); tool cases `offered` (tool → why it is
offered) and `known`; canned cases `instructions`, `templates` and `strict`.

The set has two parts, fixed by scenario (`part_of`): the **development** part, which anyone
improving the offline model or the prompts may read and work against, and the held-back **test**
part, on which such a change is judged. A scenario (a case's `scenario`, else its id) is in the
test part when the SHA-256 of its name, read as a number, is divisible by 3 — about a third of the
set; no file says which, so a case cannot be moved to the part it scores better in without
renaming it, and paraphrases of one decision never sit on both sides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.authoring import load_agent
from engine.context import TurnContext
from engine.model import AgentSnapshot
from engine.ports import ToolOutcome
from engine.sessions.session import CollectedValue, Event, EventKind, EventSource, SessionState

HERE = Path(__file__).parent
CASES_DIR = HERE / "cases"
AGENTS_DIR = HERE / "agents"

KINDS = (
    "observational",
    "actionable",
    "previously_applied",
    "customer_dependent",
    "continuous",
    "disambiguation",
    "journey_node",
    "values",
    "tool_arguments",
    "canned",
)

# libyaml's safe loader when installed: the set is read ~8x faster (tests load it often)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

PARTS = ("dev", "test")  # the development part and the held-back test part

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class CaseFileError(ValueError):
    """A case file that cannot be used; the message names the file, the case and what to fix."""


class EvalCase(BaseModel):
    """One labelled decision."""

    model_config = ConfigDict(extra="forbid")
    id: str
    agent: str
    conv: list[str] = Field(min_length=1)
    expect: dict[str, Any]
    hard: bool = False
    note: str = ""
    scenario: str | None = None  # the case this one paraphrases (default: its own id)
    variables: dict[str, Any] = Field(default_factory=dict)
    applied: list[str] = Field(default_factory=list)  # guideline ids the agent followed earlier
    head: str | None = None  # disambiguation: the guideline whose options may be ambiguous
    journey: str | None = None
    path: list[str] = Field(default_factory=list)
    known: dict[str, Any] = Field(default_factory=dict)
    ran: dict[str, Any] = Field(default_factory=dict)  # tool → data, from this turn
    offered: dict[str, str] = Field(default_factory=dict)  # tool → why it is offered
    instructions: list[str] = Field(default_factory=list)
    templates: list[str] | None = None  # canned response ids in scope (default: all)
    strict: bool = False


class CaseFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str
    cases: list[EvalCase]


def scenario_of(case: EvalCase) -> str:
    """The scenario a case belongs to: the case it paraphrases, else itself."""
    return case.scenario or case.id


def part_of(case: EvalCase) -> str:
    """The part a case is in: "test" (held back) or "dev" — fixed by its scenario's name (the
    SHA-256 divisible by 3), never by a file or a flag."""
    digest = hashlib.sha256(scenario_of(case).encode("utf-8")).hexdigest()
    return "test" if int(digest, 16) % 3 == 0 else "dev"


@cache
def agent(name: str) -> AgentSnapshot:
    """The agent `name`, from bench/eval/agents/<name>.yaml."""
    path = AGENTS_DIR / f"{name}.yaml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in AGENTS_DIR.glob("*.yaml")))
        raise CaseFileError(f"no eval agent {name!r} (bench/eval/agents/ has: {known})")
    return load_agent(path)


def load_cases(directory: Path = CASES_DIR) -> dict[str, list[EvalCase]]:
    """Every case file's cases, by kind, in file order. Raises `CaseFileError` on a bad file."""
    by_kind: dict[str, list[EvalCase]] = {}
    seen: set[str] = set()
    for path in sorted(directory.glob("*.yaml")):
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
        try:
            parsed = CaseFile.model_validate(raw)
        except ValidationError as exc:
            raise CaseFileError(f"{path.name}: {exc}") from None
        if parsed.kind not in KINDS:
            raise CaseFileError(f"{path.name}: unknown kind {parsed.kind!r}; use one of {KINDS}")
        for case in parsed.cases:
            if case.id in seen:
                raise CaseFileError(f"{path.name}: case id {case.id!r} is used twice")
            seen.add(case.id)
            _check(path.name, parsed.kind, case)
        by_kind.setdefault(parsed.kind, []).extend(parsed.cases)
    for cases in by_kind.values():
        for case in cases:
            if case.scenario is not None and case.scenario not in seen:
                raise CaseFileError(
                    f"case {case.id!r}: scenario {case.scenario!r} is no case's id (name the "
                    "case this one paraphrases)"
                )
    return by_kind


def _check(file: str, kind: str, case: EvalCase) -> None:
    where = f"{file}: case {case.id!r}"
    snapshot = agent(case.agent)
    for line in case.conv:
        _parse_line(where, line)
    if kind in ("journey_node", "values"):
        if case.journey is None:
            raise CaseFileError(f"{where}: a {kind} case names its `journey`")
        journey = next((j for j in snapshot.journeys if j.id == case.journey), None)
        if journey is None:
            raise CaseFileError(f"{where}: agent {case.agent!r} has no journey {case.journey!r}")
        nodes = {n.id for n in journey.nodes}
        for step in [*case.path, *([case.expect["step"]] if "step" in case.expect else [])]:
            if step not in nodes and step not in ("END", "EXIT"):
                raise CaseFileError(
                    f"{where}: journey {case.journey!r} has no step {step!r} ({sorted(nodes)})"
                )
    ids = {g.id for g in snapshot.guidelines}
    for gid in [*case.applied, *([case.head] if case.head else [])]:
        if gid not in ids:
            raise CaseFileError(f"{where}: agent {case.agent!r} has no guideline {gid!r}")
    if kind in ("observational", "actionable", "previously_applied", "continuous"):
        for gid, label in case.expect.items():
            if gid not in ids or not isinstance(label, bool):
                raise CaseFileError(f"{where}: expect maps guideline ids to true/false ({gid!r})")
    tools = {t.name for t in snapshot.tools}
    for name in [*case.offered, *(_tool_call(head)[0] for head in case.ran)]:
        if name not in tools:
            raise CaseFileError(f"{where}: agent {case.agent!r} has no tool {name!r}")


def _parse_line(where: str, line: str) -> tuple[str, str, Any]:
    """("C"|"A", text, None) or ("T", tool name, data)."""
    head, sep, rest = line.partition(":")
    if not sep:
        raise CaseFileError(f"{where}: conversation line {line!r} needs 'C: ', 'A: ' or 'T tool: '")
    head = head.strip()
    if head in ("C", "A"):
        return head, rest.strip(), None
    if head.startswith("T "):
        try:
            return "T", head[2:].strip(), json.loads(rest)
        except json.JSONDecodeError as exc:
            raise CaseFileError(f"{where}: tool line {line!r} is not JSON: {exc}") from None
    raise CaseFileError(f"{where}: conversation line {line!r} needs 'C: ', 'A: ' or 'T tool: '")


def _tool_call(head: str) -> tuple[str, dict[str, str]]:
    """`get_balance(account=savings)` → ("get_balance", {"account": "savings"}): a tool line
    may name the arguments its result came from (values as plain text)."""
    name, _, rest = head.partition("(")
    arguments = {}
    for pair in rest.rstrip(")").split(","):
        key, sep, value = pair.partition("=")
        if sep:
            arguments[key.strip()] = value.strip()
    return name.strip(), arguments


def history(case: EvalCase) -> list[Event]:
    """The case's conversation as session events."""
    events = []
    for offset, line in enumerate(case.conv):
        who, text, data = _parse_line(case.id, line)
        common: dict[str, Any] = {
            "id": f"e{offset}",
            "offset": offset,
            "created_at": T0 + timedelta(seconds=30 * offset),
            "turn_id": f"t{offset}",
        }
        if who == "T":
            tool, arguments = _tool_call(text)
            events.append(
                Event(
                    kind=EventKind.TOOL,
                    source=EventSource.SYSTEM,
                    data={"tool": tool, "arguments": arguments, "llm_view": data},
                    **common,
                )
            )
        else:
            source = EventSource.CUSTOMER if who == "C" else EventSource.AGENT
            events.append(Event(kind=EventKind.MESSAGE, source=source, text=text, **common))
    return events


def _collected(snapshot: AgentSnapshot, case: EvalCase) -> tuple[CollectedValue, ...]:
    if case.journey is None:
        return ()
    journey = next(j for j in snapshot.journeys if j.id == case.journey)
    owners = {f.name: n.id for n in journey.nodes for f in n.collects}
    values = []
    for name, value in case.known.items():
        if name in owners:
            values.append(
                CollectedValue(
                    journey_id=journey.id,
                    node_id=owners[name],
                    name=name,
                    value=value,
                    turn_id="t0",
                )
            )
    return tuple(values)


def journey_path(case: EvalCase) -> tuple[str | None, ...]:
    """The case's `path` as the session stores it: "EXIT" closes a run (the journey was left
    there), so `[ask_source, EXIT]` is a run exited at ask_source."""
    return tuple(None if step == "EXIT" else step for step in case.path)


def session_before(case: EvalCase, *, pending: tuple[str, ...] = ()) -> SessionState:
    """The session as the case's turn finds it: the conversation up to the customer's last
    messages (those are the turn's), the journey's run, the guidelines applied earlier, the
    customer-dependent ones `pending`, the values collected and the context variables."""
    snapshot = agent(case.agent)
    events = history(case)
    this_turn = len(events)
    while (
        this_turn > 0
        and events[this_turn - 1].kind is EventKind.MESSAGE
        and events[this_turn - 1].source is EventSource.CUSTOMER
    ):
        this_turn -= 1
    return SessionState(
        id=f"eval-{case.id}",
        agent_id=snapshot.id,
        customer_id="eval-customer",
        events=tuple(events[:this_turn]),
        journey_paths={case.journey: journey_path(case)} if case.journey and case.path else {},
        applied_guideline_ids=tuple(case.applied),
        pending_customer_guideline_ids=pending,
        collected=_collected(snapshot, case),
        variables=dict(case.variables),
    )


def ran_results(case: EvalCase) -> list[ToolOutcome]:
    """The case's `ran` as this turn's tool results; a key may name the arguments the call ran
    on, as a conversation's tool line does (`check_funds(account=savings, amount=300)`)."""
    results = []
    for i, (head, data) in enumerate(case.ran.items()):
        tool, arguments = _tool_call(head)
        results.append(ToolOutcome(call_id=f"call-{i}", tool=tool, data=data, arguments=arguments))
    return results


def context(case: EvalCase, *, pending: tuple[str, ...] = ()) -> TurnContext:
    """The turn context the case describes: its agent, conversation, state and tool results."""
    snapshot = agent(case.agent)
    return TurnContext(
        agent=snapshot,
        session=session_before(case, pending=pending),
        history=history(case),
        variables=dict(case.variables),
        terms=snapshot.terms,
        tool_results=tuple(ran_results(case)),
    )


def count(by_kind: Mapping[str, list[EvalCase]]) -> int:
    return sum(len(v) for v in by_kind.values())


def iter_cases(by_kind: Mapping[str, list[EvalCase]]) -> Iterator[tuple[str, EvalCase]]:
    for kind in KINDS:
        for case in by_kind.get(kind, []):
            yield kind, case
