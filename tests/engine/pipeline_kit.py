"""A small kit for pipeline tests: agents built from plain model constructors, a keyword embedder,
and ScriptedLLM handlers that read the prompt the way a model would (by handles and step numbers).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.agent_config import AgentConfig
from engine.clock import FixedClock, SequentialIds
from engine.matching.journey_graph import build_node_views
from engine.matching.projection import journey_condition_guideline_id
from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
from engine.model import (
    AgentSnapshot,
    CustomerDependentAction,
    EntityKind,
    EntityRef,
    Guideline,
    Journey,
    JourneyEdge,
    JourneyNode,
    NodeKind,
    Relationship,
    RelationshipKind,
)
from engine.recall.vectors import (
    InMemoryVectorIndex,
    agent_index_texts,
    build_index,
    journey_index_texts,
)
from engine.sessions.session import InboundMessage, SessionState
from engine.testing import ScriptedLLM
from engine.tools.spec import ToolSpec
from engine.turn import EngineDeps, TurnEngine

# -- agents -------------------------------------------------------------------------------------


def chain_journey(
    jid: str,
    title: str,
    condition: str,
    steps: Sequence[tuple[str, str] | tuple[str, str, dict[str, Any]]],
    *,
    requires: Sequence[str] = (),
) -> tuple[Journey, Guideline]:
    """A linear journey root → s1 → s2 … → END. Steps are (id, action[, node kwargs]); an action
    starting with 'tool:' makes a tool node."""
    nodes = [JourneyNode(id="root", kind=NodeKind.CHAT)]
    edges = []
    previous = "root"
    for i, step in enumerate(steps):
        node_id, action, *extra = step
        kwargs = extra[0] if extra else {}
        if action.startswith("tool:"):
            nodes.append(
                JourneyNode(
                    id=node_id, kind=NodeKind.TOOL, tools=tuple(action[5:].split(",")), **kwargs
                )
            )
        else:
            nodes.append(JourneyNode(id=node_id, kind=NodeKind.CHAT, action=action, **kwargs))
        edges.append(JourneyEdge(id=f"e{i}", source=previous, target=node_id))
        previous = node_id
    edges.append(JourneyEdge(id="end", source=previous, target=None))
    cond = Guideline(
        id=journey_condition_guideline_id(jid, 0),
        condition=condition,
        metadata={"journey_condition": jid},
    )
    journey = Journey(
        id=jid,
        title=title,
        conditions=(condition,),
        condition_guideline_ids=(cond.id,),
        root_id="root",
        nodes=tuple(nodes),
        edges=tuple(edges),
        requires=tuple(requires),
    )
    return journey, cond


def make_agent(
    *,
    guidelines: Iterable[Guideline] = (),
    journeys: Iterable[tuple[Journey, Guideline]] = (),
    relationships: Iterable[Relationship] = (),
    tools: Iterable[ToolSpec] = (),
    config: AgentConfig | None = None,
) -> AgentSnapshot:
    js = list(journeys)
    return AgentSnapshot(
        id="agent",
        name="Test agent",
        guidelines=(*guidelines, *(c for _, c in js)),
        journeys=tuple(j for j, _ in js),
        relationships=tuple(relationships),
        tools=tuple(tools),
        config=config or AgentConfig(),
    ).with_content_version()


def tool_harness(
    llm: ScriptedLLM,
    *tools: Any,
    guidelines: Iterable[Guideline] = (),
    journeys: Iterable[tuple[Journey, Guideline]] = (),
    index: bool = True,
    **deps: Any,
) -> Harness:
    """An engine whose agent has `guidelines`, `journeys` and the `@tool` functions `tools`,
    dispatched in process (`deps`: more `EngineDeps` fields, e.g. `secret_key`)."""
    from engine.toolkit import InProcessDispatcher, ToolRegistry, spec_of

    agent = make_agent(guidelines=guidelines, journeys=journeys, tools=[spec_of(t) for t in tools])
    dispatcher = InProcessDispatcher(ToolRegistry(list(tools)))
    return Harness(agent, llm, tools=dispatcher, index=index, **deps)


def priority(source: Guideline | Journey, target: Guideline | Journey) -> Relationship:
    return Relationship(kind=RelationshipKind.PRIORITY, source=_ref(source), target=_ref(target))


def _ref(entity: Guideline | Journey) -> EntityRef:
    kind = EntityKind.JOURNEY if isinstance(entity, Journey) else EntityKind.GUIDELINE
    return EntityRef(kind=kind, id=entity.id)


def customer_dependent(customer_action: str, agent_action: str) -> dict[str, Any]:
    return {
        "customer_dependent_action_data": CustomerDependentAction(
            customer_action=customer_action, agent_action=agent_action
        ).model_dump()
    }


# -- embeddings -----------------------------------------------------------------------------------


class KeywordEmbedder:
    """Bag of words hashed into 256 dims: enough for 'flight' to find the flight journey."""

    dimensions = 256

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                if len(word) > 3:
                    out[row, zlib.crc32(word.rstrip("s").encode()) % self.dimensions] += 1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        return out


async def journey_index(agent: AgentSnapshot, embedder: KeywordEmbedder) -> InMemoryVectorIndex:
    texts = journey_index_texts(agent)
    ids = list(texts)
    vectors = await embedder.embed([texts[i] for i in ids])
    return InMemoryVectorIndex({"journeys": (ids, vectors)})


# -- scripted model behaviour ---------------------------------------------------------------------

_GUIDELINE_LINE = re.compile(r"^- \[(g\d+)\] when: (.*)$", re.M)
_INSTRUCTION_LINE = re.compile(r"^- \[(i\d+)\] (.*)$", re.M)


def last_customer_message(prompt: str) -> str:
    lines = [line for line in prompt.splitlines() if line.startswith("Customer: ")]
    return lines[-1][len("Customer: ") :] if lines else ""


def match_when(rules: dict[str, Callable[[str], bool] | bool]) -> Callable[[str], dict[str, Any]]:
    """Answer a matching batch: a guideline applies when a rule keyed by a substring of its
    condition says so (a bool, or a predicate over the latest customer message)."""

    def answer(prompt: str) -> dict[str, Any]:
        message = last_customer_message(prompt).lower()
        verdicts = []
        for handle, condition in _GUIDELINE_LINE.findall(prompt):
            applies = False
            for key, rule in rules.items():
                if key.lower() in condition.lower():
                    applies = rule(message) if callable(rule) else rule
            verdicts.append({"id": handle, "applies": applies, "score": 9 if applies else 1})
        return {"verdicts": verdicts}

    return answer


def compose_echo(prompt: str) -> dict[str, Any]:
    """Compose by listing the instructions; report every instruction as applied."""
    instructions = _INSTRUCTION_LINE.findall(prompt)
    message = " | ".join(text for _, text in instructions) or "How can I help?"
    return {"message": message, "applied": [h for h, _ in instructions]}


def step_number(journey: Journey, node_id: str) -> str:
    return str(build_node_views(journey)[node_id].index)


# -- wiring ---------------------------------------------------------------------------------------


class Harness:
    """An engine over in-memory ports, with a session ready to talk to."""

    def __init__(
        self,
        agent: AgentSnapshot,
        llm: ScriptedLLM,
        *,
        tools: Any = None,
        index: bool = True,
        **deps: Any,
    ):
        self.agent = agent
        self.llm = llm
        self.agents = InMemoryAgentStore()
        self.sessions = InMemorySessionStore()
        self.embedder = KeywordEmbedder()
        self._index: InMemoryVectorIndex | None = None
        self._use_index = index
        self.engine = TurnEngine(
            self.agents,
            self.sessions,
            EngineDeps(
                llm=llm,
                embedder=self.embedder if index else None,
                tools=tools,
                clock=FixedClock(),
                ids=SequentialIds(),
                **deps,
            ),
            index_for=self._index_for,
        )
        self._n = 0

    async def _index_for(self, agent: AgentSnapshot) -> InMemoryVectorIndex | None:
        if not self._use_index:
            return None
        if self._index is None:  # every namespace publishing would embed
            self._index = await build_index(self.embedder, agent_index_texts(agent))
        return self._index

    async def start(self, session_id: str = "s1") -> None:
        await self.agents.publish(self.agent)
        await self.sessions.create(
            SessionState(id=session_id, agent_id=self.agent.id, customer_id="c1")
        )

    async def say(self, text: str, session_id: str = "s1", **kwargs: Any):  # type: ignore[no-untyped-def]
        return await self.engine.handle(session_id, [self.message(text, **kwargs)])

    def message(self, text: str, *, id_prefix: str = "m", **kwargs: Any) -> InboundMessage:
        """The next customer message (event ids `m1`, `m2` …, or with another prefix)."""
        self._n += 1
        return InboundMessage(event_id=f"{id_prefix}{self._n}", text=text, **kwargs)


def per_journey(script: dict[str, list[Any]]) -> Callable[[str], Any]:
    """Node-selection answers per journey title, consumed in order (the last one repeats)."""

    def answer(prompt: str) -> Any:
        title = re.search(r"^Journey: (.*)$", prompt, re.M)
        assert title, "node selection prompt without a journey title"
        queue = script[title.group(1)]
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        return item(prompt) if callable(item) else item

    return answer


def advance(*numbers: str, collected: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "journey_applies": True,
        "step_advancement": list(numbers),
        "next_step": numbers[-1],
        "collected": [{"name": k, "value": v} for k, v in (collected or {}).items()],
    }


FLIGHT_LIKE = chain_journey("trip", "Trip", "The customer plans a trip", [("a", "Ask")])[0]


def outputs_under_hash_seeds(script: str, seeds: Sequence[str]) -> set[str]:
    """What `script` prints, run in a fresh interpreter at the repository root under each
    `PYTHONHASHSEED` — two Lambda containers differ by exactly that. One output means the code
    decides alike whatever the hash order."""
    root = Path(__file__).resolve().parents[2]
    outputs = set()
    for seed in seeds:
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=root, env=env,
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        outputs.add(done.stdout)
    return outputs
