"""The reference engine's side of `python -m bench compare`. Runs INSIDE the reference's own
virtual environment (`.bench-venvs/parlant/bin/python bench/reference_driver.py SPEC LATENCY_MS`):
standard library and the reference package only, nothing of Waypoint.

It starts the reference SDK's server with a fake NLP service (its public `NLPService`
interface: schematic generators, an embedder, no moderation), builds the spec's agent through
the SDK (guidelines, observations, the journey and its states, tools), then sends the spec's
customer messages through the server's REST API one at a time, waiting for each reply and for
the engine to go quiet. Prints one JSON line: per turn calls, rounds, prompt tokens (chars/4),
wall ms and process CPU minus the fake's own; the boot's calls; peak RSS.

The fake follows the spec's `script` — what our engine decided on the same turn — through the
pure rules of `bench/reference_fake.py` (guideline checks, response analysis, the journey's
reachable-step conditions at boot and its step selection, tool calls, the reply draft); a
schema it has no rule for gets its minimal valid instance (counted per schema). It also records
what the reference then did per turn: the conditions its checks were told hold, the step each
journey is at (the session's agent state, read in the process), the tools that ran (the tool
functions record their calls) — so the report can say whether both engines decided alike.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import os
import re
import resource
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx
import parlant.sdk as p
from parlant.core.common import DefaultBaseModel
from parlant.core.nlp.embedding import Embedder, EmbeddingResult
from parlant.core.nlp.generation import SchematicGenerationResult, SchematicGenerator
from parlant.core.nlp.generation_info import GenerationInfo, UsageInfo
from parlant.core.nlp.moderation import ModerationService, NoModeration
from parlant.core.nlp.service import NLPService
from parlant.core.nlp.tokenization import EstimatingTokenizer
from parlant.core.sessions import SessionId, SessionStore


def _load_fake() -> Any:
    """bench/reference_fake.py, by path: this process has the reference's venv, not Waypoint."""
    path = Path(__file__).with_name("reference_fake.py")
    spec = importlib.util.spec_from_file_location("reference_fake", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference_fake"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fake = _load_fake()

LATENCY_S = 0.4
CURRENT: dict[str, Any] = {"message": "", "phase": "boot", "turn": None}
CALLS: list[dict[str, Any]] = []
SCRIPT: list[Any] = []  # reference_fake.TurnScript per customer message
SPEC_JOURNEYS: list[Any] = []  # the spec's journeys (our node ids, actions, tools)
KNOWN: frozenset[str] = frozenset()  # our agent's conditions (the others are decided lexically)
STEP_IDS: dict[str, str] = {}  # the reference's journey step id → action, learnt at indexing
# What the reference did, per phase: conditions its checks were told hold, the steps its step
# selections chose, the tools that ran.
DID: dict[str, dict[str, list[Any]]] = {}


# Fields a minimal instance would leave empty, and the engine needs to act like a model that
# answered: the preamble's and the draft's text (without it no message is sent).
OVERRIDES: dict[str, dict[str, Any]] = {
    "CannedResponsePreambleSchema": {"preamble": "One moment."},
    "CannedResponseDraftSchema": {"response_body": "Thanks for your message. How can I help?"},
}


def _did(kind: str) -> list[Any]:
    phase = DID.setdefault(CURRENT["phase"], {"guidelines": [], "steps": [], "tools": []})
    return phase[kind]


_DUMPED = itertools.count()


def _dump(schema: str, prompt: str, answer: str) -> None:
    """With REFERENCE_PROMPTS_DIR set, every prompt and the fake's answer, one file each (for
    reading what the reference asks while changing the fake)."""
    folder = os.environ.get("REFERENCE_PROMPTS_DIR")
    if folder:
        name = f"{next(_DUMPED):04d}-{CURRENT['phase']}-{schema}.txt"
        Path(folder, name).write_text(f"{prompt}\n\n=== ANSWER ===\n{answer}\n", encoding="utf-8")


class CharTokenizer(EstimatingTokenizer):
    async def estimate_token_count(self, prompt: str) -> int:
        return len(prompt) // 4


def _minimal(schema: dict[str, Any], defs: Mapping[str, Any]) -> Any:
    """The smallest instance a JSON schema accepts (objects get their required fields)."""
    if "$ref" in schema:
        return _minimal(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        options = schema["anyOf"]
        nullable = [o for o in options if o.get("type") == "null"]
        return None if nullable else _minimal(options[0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _minimal(props[k], defs) for k in schema.get("required", [])}
    return {"array": [], "string": "fake", "boolean": False, "integer": 0, "number": 0.0}.get(
        str(kind)
    )


# FakeGenerator's own type parameter (the reference's `T`, re-declared): its genericity does not
# depend on the reference being installed where mypy runs (without it, its base is Any).
Schema = TypeVar("Schema", bound=DefaultBaseModel)


class FakeGenerator(SchematicGenerator[Schema], Generic[Schema]):
    def __init__(self, schema: type[Any]) -> None:
        self._schema = schema

    @property
    def schema(self) -> type[Any]:
        return self._schema

    async def generate(
        self, prompt: Any, hints: Mapping[str, Any] | None = None
    ) -> SchematicGenerationResult[Any]:
        text = prompt if isinstance(prompt, str) else prompt.build()
        started, cpu = time.perf_counter(), time.process_time()
        name = self._schema.__name__
        content = self._scripted(name, text)
        followed = content is not None
        if content is None:
            json_schema = self._schema.model_json_schema()
            data = _minimal(json_schema, json_schema.get("$defs", {}))
            data.update(OVERRIDES.get(name, {}))
            content = self._schema.model_validate(data)
        fake_cpu = (time.process_time() - cpu) * 1000
        _dump(self._schema.__name__, text, content.model_dump_json(indent=1))
        await asyncio.sleep(LATENCY_S)
        CALLS.append(
            {
                "phase": CURRENT["phase"],
                "schema": self._schema.__name__,
                "prompt_chars": len(text),
                "start": started,
                "end": time.perf_counter(),
                "fake_cpu_ms": fake_cpu,
                "followed": followed,
            }
        )
        output = content.model_dump_json()
        return SchematicGenerationResult(
            content=content,
            info=GenerationInfo(
                schema_name=self._schema.__name__,
                model="fake",
                duration=LATENCY_S,
                usage=UsageInfo(input_tokens=len(text) // 4, output_tokens=len(output) // 4),
            ),
        )

    def _scripted(self, name: str, text: str) -> Any:
        """The answer by the script's rules (reference_fake), validated; None if it has none."""
        turn = CURRENT["turn"]
        if fake.is_guideline_check(name):
            # Without a script for this turn, every condition is decided lexically.
            turn = turn or fake.TurnScript.of({"message": CURRENT["message"]})
            for candidate in fake.guideline_check_answers(text, turn, KNOWN):
                try:
                    content = self._schema.model_validate(candidate)
                except Exception:
                    continue
                if "GuidelineMatches" in name:
                    _did("guidelines").extend(fake.decided_conditions(candidate))
                return content
            return None
        data = fake.answer(name, text, turn, KNOWN)
        if data is None:
            return None
        try:
            content = self._schema.model_validate(data)
        except Exception:
            return None
        if name == "ReachableNodesEvaluationSchema":
            STEP_IDS.update(fake.step_ids(text))
        if name == "JourneyNextStepSelectionSchema":
            _did("steps").append(fake.chosen_target(text, data))
        return content

    @property
    def id(self) -> str:
        return "fake"

    @property
    def max_tokens(self) -> int:
        return 128_000

    @property
    def tokenizer(self) -> EstimatingTokenizer:
        return CharTokenizer()


class FakeEmbedder(Embedder):
    """Bag of words hashed into 256 dimensions (deterministic, instant)."""

    async def embed(
        self, texts: list[str], hints: Mapping[str, Any] | None = None
    ) -> EmbeddingResult:
        vectors = []
        for t in texts:
            v = [0.0] * 256
            for w in re.findall(r"[a-z]+", t.lower()):
                v[sum(map(ord, w)) % 256] += 1.0
            norm = sum(x * x for x in v) ** 0.5 or 1.0
            vectors.append([x / norm for x in v])
        return EmbeddingResult(vectors=vectors)

    @property
    def id(self) -> str:
        return "fake-embedder"

    @property
    def max_tokens(self) -> int:
        return 8192

    @property
    def tokenizer(self) -> EstimatingTokenizer:
        return CharTokenizer()

    @property
    def dimensions(self) -> int:
        return 256


class FakeService(NLPService):
    @property
    def supports_streaming(self) -> bool:
        return False

    async def get_schematic_generator(self, t: type[Any], hints: Any = None) -> Any:
        # Parametrized per schema: the server registers each generator under its own type.
        return FakeGenerator[t](t)  # type: ignore[valid-type]  # a type known at run time only

    async def get_streaming_text_generator(self, hints: Any = None) -> Any:
        raise NotImplementedError("the fake does not stream")

    async def get_embedder(self, hints: Any = None) -> Embedder:
        return FakeEmbedder()

    async def get_moderation_service(self) -> ModerationService:
        return NoModeration()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _record_tool(name: str, arguments: dict[str, Any]) -> None:
    """The reference ran a tool (its plugin server serves them in this process)."""
    _did("tools").append({"name": name, "arguments": arguments})


def _tool(spec: Mapping[str, Any]) -> Any:
    """An SDK tool named and shaped like the spec's (its result like our synthetic tools')."""
    name = spec["name"]
    params = [x["name"] for x in spec["parameters"]]
    args = ", ".join(f"{x}: str" for x in params)
    recorded = ", ".join(f"{x!r}: {x}" for x in params)
    source = (
        f"async def {name}(context: p.ToolContext, {args}) -> p.ToolResult:\n"
        f"    {spec['description']!r}\n"
        f"    _record({name!r}, {{{recorded}}})\n"
        f"    return p.ToolResult({{'status': 'shipped', 'accepted': True}})\n"
    )
    namespace: dict[str, Any] = {"p": p, "_record": _record_tool}
    # dont_inherit: this module's `from __future__ import annotations` would turn the tool's
    # annotations into strings, and the SDK checks them as types.
    exec(compile(source, name, "exec", dont_inherit=True), namespace)
    return p.tool(namespace[name])


async def build_agent(server: Any, spec: Mapping[str, Any]) -> Any:
    agent = await server.create_agent(name=spec["name"], description=spec["description"])
    tools = {t["name"]: _tool(t) for t in spec["tools"]}
    for g in spec["guidelines"]:
        refs = [tools[name] for name in g["tools"]]
        if g["action"]:
            await agent.create_guideline(condition=g["condition"], action=g["action"], tools=refs)
        else:
            await agent.create_observation(condition=g["condition"])
    for j in spec["journeys"]:
        journey = await agent.create_journey(
            title=j["title"], description=j["description"], conditions=j["conditions"]
        )
        nodes = {n["id"]: n for n in j["nodes"]}
        states: dict[str, Any] = {j["root"]: journey.initial_state}
        for edge in j["edges"]:  # edges are listed from the root down (a chain)
            source = states[edge["source"]]
            if edge["target"] is None:
                await source.transition_to(state=p.END_JOURNEY)
                continue
            node = nodes[edge["target"]]
            if node["kind"] == "tool":
                transition = await source.transition_to(
                    condition=edge["condition"], tool_state=[tools[t] for t in node["tools"]]
                )
            else:
                transition = await source.transition_to(
                    condition=edge["condition"], chat_state=node["action"]
                )
            states[edge["target"]] = transition.target
    return agent


def _rounds(calls: Sequence[Mapping[str, Any]]) -> int:
    """Sequential rounds: a call that starts after every earlier call ended begins a new one."""
    rounds, horizon = 0, float("-inf")
    for c in sorted(calls, key=lambda c: c["start"]):
        if c["start"] >= horizon:
            rounds += 1
            horizon = c["end"]
        else:
            horizon = max(horizon, c["end"])
    return rounds


async def _quiet(seconds: float = 1.5) -> None:
    """Wait until no LLM call has started or ended for `seconds` (post-reply work included)."""
    while True:
        last = max((max(c["start"], c["end"]) for c in CALLS), default=0.0)
        idle = time.perf_counter() - last
        if idle >= seconds:
            return
        await asyncio.sleep(seconds - idle + 0.05)


async def _completed(http: httpx.AsyncClient, session: str, offset: int) -> dict[str, Any]:
    """Wait for the engine's "ready" status with stage "completed" after `offset`; its data
    (what the turn matched: guideline ids, the journeys active, their steps)."""
    deadline = time.perf_counter() + 120
    while time.perf_counter() < deadline:
        got = await http.get(
            f"/sessions/{session}/events",
            params={"min_offset": offset, "kinds": "status", "wait_for_data": 0},
        )
        for event in got.json() if got.status_code == 200 else []:
            data = event.get("data") or {}
            if data.get("status") == "ready" and (data.get("data") or {}).get("stage"):
                return dict(data["data"])
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the reference did not complete the turn after event {offset}")


async def _journey_steps(container: Any, session: str, active: Sequence[str]) -> list[str]:
    """The step each journey the turn kept active is at, from the session's last agent state,
    as our node id (the spec's step with the same action; else the reference's action text).
    A journey left or completed is not active (its stored path keeps its last step)."""
    if container is None:
        return []
    stored = await container[SessionStore].read_session(SessionId(session))
    if not stored.agent_states:
        return []
    steps = []
    for journey, path in stored.agent_states[-1].journey_paths.items():
        if path and path[-1] and str(journey) in active:
            action = STEP_IDS.get(str(path[-1]), str(path[-1]))
            steps.append(fake.our_step_id(SPEC_JOURNEYS, action) or action)
    return steps


async def _talk(
    port: int, agent_id: str, spec: Mapping[str, Any], out: dict[str, Any], container: Any
) -> None:
    """The customer's side, once the server answers: the spec's messages one turn each."""
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        for _ in range(3000):  # the server evaluates and indexes the agent before it serves
            try:
                if (await http.get("/healthz")).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
        await _quiet()
        out["boot"] = {"calls": len(CALLS), "seconds": time.perf_counter() - out["started"]}
        created = await http.post("/sessions", json={"agent_id": agent_id})
        created.raise_for_status()
        session = created.json()["id"]
        turns = []
        for n, text in enumerate(spec["messages"]):
            turn_script = SCRIPT[n] if n < len(SCRIPT) else None
            CURRENT.update(message=text, phase=f"turn{n}", turn=turn_script)
            first = len(CALLS)
            cpu, posted_at = time.process_time(), datetime.now(UTC)
            posted = await http.post(
                f"/sessions/{session}/events",
                json={"kind": "message", "source": "customer", "message": text},
            )
            posted.raise_for_status()
            offset = posted.json()["offset"] + 1
            # The turn is over when the engine said it completed (status "ready", stage
            # "completed": after a preamble it pauses on purpose, so going quiet is not enough)
            # and then went quiet (the post-reply analysis included); its wall time ends at
            # the agent's last message (server clock).
            ready = await _completed(http, session, offset)
            await _quiet()
            got = await http.get(
                f"/sessions/{session}/events",
                params={"min_offset": offset, "kinds": "message", "source": "ai_agent"},
            )
            replies = got.json() if got.status_code == 200 else []
            reply = " | ".join(str((e.get("data") or {}).get("message", "")) for e in replies)
            wall_ms = float("nan")
            if replies:
                last = datetime.fromisoformat(replies[-1]["creation_utc"].replace("Z", "+00:00"))
                wall_ms = (last - posted_at).total_seconds() * 1000
            reply = reply or "(no message)"
            turn_calls = CALLS[first:]
            cpu_ms = (time.process_time() - cpu) * 1000
            schemas: dict[str, int] = {}
            for c in turn_calls:
                schemas[c["schema"]] = schemas.get(c["schema"], 0) + 1
            did = DID.get(f"turn{n}", {"guidelines": [], "steps": [], "tools": []})
            turns.append(
                {
                    "message": text,
                    "calls": len(turn_calls),
                    "rounds": _rounds(turn_calls),
                    "prompt_tokens": sum(c["prompt_chars"] for c in turn_calls) // 4,
                    "wall_ms": wall_ms,
                    "engine_cpu_ms": max(0.0, cpu_ms - sum(c["fake_cpu_ms"] for c in turn_calls)),
                    "schemas": schemas,
                    "reply": reply[:120],
                    "did": {
                        "guidelines": sorted(set(did["guidelines"])),
                        "steps_chosen": did["steps"],
                        "journeys": await _journey_steps(
                            container,
                            session,
                            [str(j["id"]) for j in ready.get("matched_journeys", [])],
                        ),
                        "tools": did["tools"],
                    },
                }
            )
        out["turns"] = turns


async def converse(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Build the agent, serve it, talk to it, stop the server; the measurements."""
    port, tools_port = _free_port(), _free_port()
    out: dict[str, Any] = {"started": time.perf_counter()}
    serving = asyncio.current_task()
    assert serving is not None
    failure: list[BaseException] = []
    kept: dict[str, Any] = {}

    async def keep(container: Any) -> None:  # the session store, to read its agent states
        kept["container"] = container

    async def customer(agent_id: str) -> None:
        try:
            await _talk(port, agent_id, spec, out, kept.get("container"))
        except BaseException as exc:  # reported after the server stops
            failure.append(exc)
        finally:
            serving.cancel()  # the SDK serves until its task is cancelled

    def factory(container: Any) -> NLPService:  # the SDK calls it synchronously
        return FakeService()

    try:
        # The SDK builds the agent inside `async with`, and evaluates, indexes and serves it
        # on the way out: the customer's side runs beside that.
        async with p.Server(
            port=port,
            tool_service_port=tools_port,
            nlp_service=factory,
            log_level=p.LogLevel.ERROR,
            initialize_container=keep,
        ) as server:
            agent = await build_agent(server, spec)
            talking = asyncio.get_running_loop().create_task(customer(agent.id))
    except asyncio.CancelledError:
        pass
    await asyncio.gather(talking, return_exceptions=True)
    if failure:
        raise RuntimeError(f"talking to the reference server failed: {failure[0]!r}")
    all_schemas: dict[str, int] = {}
    minimal: dict[str, int] = {}  # calls answered by the minimal instance, not the script
    for c in CALLS:
        if c["phase"] != "boot":
            all_schemas[c["schema"]] = all_schemas.get(c["schema"], 0) + 1
        if not c["followed"]:
            key = f"{c['schema']} ({'boot' if c['phase'] == 'boot' else 'turns'})"
            minimal[key] = minimal.get(key, 0) + 1
    return {
        "turns": out.get("turns", []),
        "boot": out.get("boot", {}),
        "schemas": all_schemas,
        "minimal": minimal,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    SCRIPT = list(fake.scripts(spec))
    KNOWN = fake.known_conditions(spec)
    SPEC_JOURNEYS = list(spec.get("journeys", []))
    LATENCY_S = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else LATENCY_S
    print(json.dumps(asyncio.run(converse(spec))))
