"""Synthetic agents at scale for the benchmarks, built with `engine.authoring.Agent`.

`scale_agent(shape)`: N guidelines across J journeys, most of them journey-scoped (as in real
agents), plus a share of agent-wide ("global") guidelines — or, the second shape, all of them
agent-wide; journeys of five to six steps with a
tool step, half of them with a fork after the tool. Every guideline and journey has topic words of
its own (`bench.topic_words`). `scale_conversation` talks to one journey for four turns: enter it
(and ask about a global topic), answer its two questions (the second answer runs its tool), then
ask about a topic whose guideline calls a tool. Their tools answer through
`bench.synthetic_tools.SyntheticTools`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.topic_words import Words
from engine.authoring import END_JOURNEY, Agent
from engine.authoring.journey_builder import JourneyBuilder
from engine.model import AgentSnapshot
from engine.tools.spec import ToolParameter, ToolSpec

VERBS = ["renew", "cancel", "upgrade", "transfer", "report", "replace", "close", "open"]


@dataclass(frozen=True)
class Shape:
    """Authored guidelines (journey conditions and projected steps are extra), journeys, and how
    many of the guidelines are agent-wide; the rest are spread over the journeys."""

    guidelines: int
    journeys: int
    global_guidelines: int

    @property
    def scoped_guidelines(self) -> int:
        return self.guidelines - self.global_guidelines

    @property
    def all_agent_wide(self) -> bool:
        return self.global_guidelines == self.guidelines

    @property
    def kind(self) -> str:
        """Which of the benchmark's two shapes this is."""
        return ALL_AGENT_WIDE if self.all_agent_wide else MOSTLY_SCOPED

    @property
    def label(self) -> str:
        label = f"{self.guidelines:,} guidelines / {self.journeys} journeys"
        return f"{label}, all agent-wide" if self.all_agent_wide else label

    @property
    def agent_id(self) -> str:
        return f"synthetic-{self.guidelines}" + ("-wide" if self.all_agent_wide else "")


MOSTLY_SCOPED = "mostly journey-scoped"
ALL_AGENT_WIDE = "all agent-wide"

# Two shapes: most guidelines scoped to a journey (as in real agents), and every guideline
# agent-wide (recall ranks all of them every turn: the shape that costs recall the most).
SCALE_SHAPES = (
    Shape(10, 5, 5),
    Shape(100, 20, 20),
    Shape(1_000, 100, 100),
    Shape(5_000, 200, 250),
    Shape(100, 20, 100),
    Shape(1_000, 100, 1_000),
    Shape(5_000, 200, 5_000),
)


@dataclass(frozen=True)
class GlobalTopic:
    index: int
    words: tuple[str, str]
    kind: str  # "actionable" | "observational" | "tool"


@dataclass(frozen=True)
class JourneyTopic:
    id: str
    words: tuple[str, str]
    verb: str
    forked: bool
    scoped_words: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ScaleAgent:
    shape: Shape
    snapshot: AgentSnapshot
    globals: tuple[GlobalTopic, ...]
    journeys: tuple[JourneyTopic, ...]


def _tools() -> tuple[list[ToolSpec], list[ToolSpec]]:
    submit = [
        ToolSpec(
            name=f"submit_request_{k}",
            description="Submit the customer's request to the back office",
            parameters=(
                ToolParameter(name="reference", description="the request's reference number"),
                ToolParameter(name="amount", type="number", description="the amount"),
            ),
        )
        for k in range(10)
    ]
    lookup = [
        ToolSpec(
            name=f"lookup_record_{k}",
            description="Look up a record by its reference",
            parameters=(ToolParameter(name="record", description="the record's reference"),),
        )
        for k in range(5)
    ]
    return submit, lookup


def _global_kind(i: int) -> str:
    if i % 10 == 9:
        return "observational"
    if i % 7 == 3:
        return "tool"
    return "actionable"


def _add_journey(
    agent: Agent, words: Words, j: int, submit: Sequence[ToolSpec]
) -> tuple[JourneyBuilder, JourneyTopic]:
    a, b = words.take()
    verb = VERBS[j % len(VERBS)]
    forked = j % 2 == 1
    journey = agent.create_journey(
        title=f"{a.capitalize()} {b} {verb}",
        conditions=[f"The customer wants to {verb} a {a} {b}"],
        description=f"Handles requests to {verb} a {a} {b}, from its reference to confirmation",
        id=f"j{j}",
    )
    ask_ref = journey.initial_state.transition_to(
        chat_state=f"Ask for the reference number of the {a} {b}",
        collects={"reference": "str"},
        id="ask_reference",
    )
    ask_amount = ask_ref.transition_to(
        chat_state=f"Ask how much the customer wants to {verb} for the {a} {b}",
        collects={"amount": "decimal>0"},
        condition="The customer gave the reference number",
        id="ask_amount",
    )
    submit_state = ask_amount.transition_to(
        tool_state=submit[j % len(submit)],
        condition="The customer gave an amount",
        id="submit",
    )
    confirm_text = (
        f"Confirm the {a} {b} {verb} with its reference and amount, and ask whether the "
        "customer needs anything else"
    )
    if forked:
        fork = submit_state.transition_to(fork_state="Was the request accepted?", id="accepted")
        confirm = fork.fork(
            "The request was accepted (accepted is true)", chat_state=confirm_text, id="confirm"
        )
        retry = fork.fork(
            "The request was rejected (accepted is false)",
            chat_state=f"Say the {a} request was rejected and ask for a smaller amount",
            collects={"amount": "decimal>0"},
            id="retry",
        )
        assert confirm is not None and retry is not None
        retry.transition_to(state=submit_state, condition="The customer gave a new amount")
    else:
        confirm = submit_state.transition_to(chat_state=confirm_text, id="confirm")
    confirm.transition_to(state=END_JOURNEY)
    return journey, JourneyTopic(f"j{j}", (a, b), verb, forked, ())


def scale_agent(shape: Shape) -> ScaleAgent:
    """A validated snapshot of the given shape, plus the topic words a conversation can use."""
    words = Words()
    agent = Agent(
        id=shape.agent_id,
        name="Synthetic service agent",
        description="A service agent for many kinds of requests",
    )
    submit, lookup = _tools()
    globals_: list[GlobalTopic] = []
    for i in range(shape.global_guidelines):
        a, b = words.take()
        kind = _global_kind(i)
        if kind == "observational":
            agent.create_observation(
                f"The customer says the {a} {b} is unclear or confusing", id=f"g{i}"
            )
        else:
            agent.create_guideline(
                f"The customer asks about the {a} {b} or how it affects them",
                f"Explain how the {a} {b} works, mention any fee that applies, and offer to help",
                tools=[lookup[i % len(lookup)]] if kind == "tool" else (),
                id=f"g{i}",
            )
        globals_.append(GlobalTopic(i, (a, b), kind))
    journeys: list[JourneyTopic] = []
    per_journey = [shape.scoped_guidelines // shape.journeys] * shape.journeys
    for j in range(shape.scoped_guidelines % shape.journeys):
        per_journey[j] += 1
    for j in range(shape.journeys):
        builder, topic = _add_journey(agent, words, j, submit)
        scoped: list[tuple[str, str]] = []
        for k in range(per_journey[j]):
            a, b = words.take()
            builder.create_guideline(
                f"The customer mentions the {a} {b} of the {topic.words[0]}",
                f"Note the {a} {b}, and explain that it does not delay the {topic.verb}",
                id=f"j{j}s{k}",
            )
            scoped.append((a, b))
        journeys.append(
            JourneyTopic(topic.id, topic.words, topic.verb, topic.forked, tuple(scoped))
        )
    return ScaleAgent(shape, agent.build(), tuple(globals_), tuple(journeys))


def scale_conversation(agent: ScaleAgent, n: int) -> list[str]:
    """Four customer messages for conversation number `n`: enter a journey while asking about an
    agent-wide topic; give the reference (mentioning a journey-scoped topic); give the amount
    (the journey's tool step runs); then ask about a topic whose guideline calls a tool."""
    journey = agent.journeys[(n * 7) % len(agent.journeys)]
    actionable = [g for g in agent.globals if g.kind == "actionable"]
    tooled = [g for g in agent.globals if g.kind == "tool"] or actionable
    topic = actionable[(n * 3) % len(actionable)]
    tool_topic = tooled[n % len(tooled)]
    a, b = journey.words
    scoped = journey.scoped_words[n % len(journey.scoped_words)] if journey.scoped_words else None
    about_scoped = f"About the {scoped[0]} {scoped[1]}: " if scoped else ""
    return [
        f"Hi, I would like to {journey.verb} a {a} {b}. "
        f"Also, how does the {topic.words[0]} {topic.words[1]} work?",
        f"{about_scoped}the reference is RQ-{4000 + n}.",
        f"Make it {150 + 10 * n} please.",
        f"Great. Could you look at the {tool_topic.words[0]} {tool_topic.words[1]} for "
        f"record RC-{7000 + n}?",
    ]
