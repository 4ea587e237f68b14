"""The reference engine's side of `python -m bench compare`. Runs INSIDE the reference's own
virtual environment (`.bench-venvs/parlant/bin/python bench/reference_driver.py SPEC LATENCY_MS`):
standard library, the reference's packages and the modules beside it only, nothing of Waypoint.

It starts the reference SDK's server with a fake NLP service (`bench/reference_nlp.py`), builds
the spec's agent through the SDK (`bench/reference_agent.py`: guidelines, observations, the
journey and its states, tools), then sends the spec's customer messages through the server's
REST API one at a time, waiting for each reply and for the engine to go quiet. Prints one JSON
line: per turn calls, rounds, prompt tokens (chars/4), wall ms, the engine's CPU (below) and the
whole process's; the boot's calls; the process's own peak RSS (VmHWM, bench/peak_memory.py).

`--delays off` (the default) runs the agent with the SDK's default perceived-performance policy
without its deliberate waits (`reference_agent.NoDelays`); `--delays default` with the SDK's own.

The engine's CPU of a turn is the CPU of the engine's own asyncio tasks (bench/task_cpu.py): the
session's processing task the customer's message starts (`SessionModule._process_session`) and
every task and callback it creates (matching, tool calls, the reply, the response analysis after
it), plus the requests its plugin server serves (the tools run there, over local HTTP); minus
the fake LLM's own CPU. The customer's side (this driver's HTTP client), the server's handlers of
its requests (the message's POST, the event polls) and the event loop's own bookkeeping are not
in it; the whole process's CPU over the turn is reported beside it.

The fake follows the spec's `script` — what our engine decided on the same turn — through the
pure rules of `bench/reference_fake.py`; a schema it has no rule for gets its minimal valid
instance (counted per schema). The run (`bench/reference_run.py`) also records what the
reference then did per turn: the conditions its checks were told hold, the step each journey is
at (the session's agent state, read in the process), the tools that ran (the tool functions
record their calls) — so the report can say whether both engines decided alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import parlant.sdk as p
from parlant.core.app_modules.sessions import SessionModule
from parlant.core.nlp.service import NLPService
from parlant.core.services.tools.plugins import PluginServer
from parlant.core.sessions import SessionId, SessionStore

if TYPE_CHECKING:  # mypy reads the modules beside this one as the bench package's
    from bench import reference_script
    from bench.peak_memory import peak_rss_mb
    from bench.reference_agent import POLICIES, build_agent
    from bench.reference_nlp import FakeService
    from bench.reference_run import ReferenceRun
    from bench.task_cpu import TaskCpu, install
else:  # run as a script of the reference's venv: they are found beside it, not in Waypoint
    HERE = str(Path(__file__).resolve().parent)
    if HERE not in sys.path:  # sys.path[0] already, unless PYTHONSAFEPATH is set
        sys.path.insert(0, HERE)
    import reference_script
    from peak_memory import peak_rss_mb
    from reference_agent import POLICIES, build_agent
    from reference_nlp import FakeService
    from reference_run import ReferenceRun
    from task_cpu import TaskCpu, install


def charge_engine_work(account: TaskCpu) -> None:
    """Charge the engine's own tasks to `account` (see the module's docstring): the session's
    processing task marks itself when it starts, and the plugin server's app marks each request
    it serves (a pure ASGI wrapper around the app, so the whole request is in)."""
    install()
    process_session = SessionModule._process_session

    async def _process_session(self: Any, session: Any) -> None:
        account.mark()
        await process_session(self, session)

    SessionModule._process_session = _process_session  # type: ignore[method-assign]
    create_app = PluginServer._create_app

    class _Charged:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope.get("type") == "http":
                account.mark()
            await self.app(scope, receive, send)

    def _create_app(self: Any) -> Any:
        app = create_app(self)
        app.add_middleware(_Charged)
        return app

    PluginServer._create_app = _create_app  # type: ignore[method-assign]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


async def _quiet(run: ReferenceRun, seconds: float = 1.5) -> None:
    """Wait until no LLM call has started or ended for `seconds` (post-reply work included)."""
    while True:
        last = max((max(c["start"], c["end"]) for c in run.calls), default=0.0)
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


async def _journey_steps(
    run: ReferenceRun, container: Any, session: str, active: Sequence[str]
) -> list[str]:
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
            action = run.step_ids.get(str(path[-1]), str(path[-1]))
            steps.append(reference_script.our_step_id(run.spec_journeys, action) or action)
    return steps


async def _talk(
    run: ReferenceRun,
    port: int,
    agent_id: str,
    spec: Mapping[str, Any],
    out: dict[str, Any],
    container: Any,
    engine: TaskCpu,
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
        await _quiet(run)
        out["boot"] = {"calls": len(run.calls), "seconds": time.perf_counter() - out["started"]}
        created = await http.post("/sessions", json={"agent_id": agent_id})
        created.raise_for_status()
        session = created.json()["id"]
        turns = []
        for n, text in enumerate(spec["messages"]):
            turn_script = run.script[n] if n < len(run.script) else None
            run.current.update(message=text, phase=f"turn{n}", turn=turn_script)
            first = len(run.calls)
            cpu, engine_cpu, posted_at = time.process_time(), engine.seconds, datetime.now(UTC)
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
            await _quiet(run)
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
            turn_calls = run.calls[first:]
            process_ms = (time.process_time() - cpu) * 1000
            engine_ms = (engine.seconds - engine_cpu) * 1000
            fake_ms = sum(c["fake_cpu_ms"] for c in turn_calls)
            schemas: dict[str, int] = {}
            for c in turn_calls:
                schemas[c["schema"]] = schemas.get(c["schema"], 0) + 1
            did = run.did.get(f"turn{n}", {"guidelines": [], "steps": [], "tools": []})
            turns.append(
                {
                    "message": text,
                    "calls": len(turn_calls),
                    "rounds": _rounds(turn_calls),
                    "prompt_tokens": sum(c["prompt_chars"] for c in turn_calls) // 4,
                    "wall_ms": wall_ms,
                    "engine_cpu_ms": max(0.0, engine_ms - fake_ms),
                    "process_cpu_ms": max(0.0, process_ms - fake_ms),
                    "schemas": schemas,
                    "reply": reply[:120],
                    "did": {
                        "guidelines": sorted(set(did["guidelines"])),
                        "steps_chosen": did["steps"],
                        "journeys": await _journey_steps(
                            run,
                            container,
                            session,
                            [str(j["id"]) for j in ready.get("matched_journeys", [])],
                        ),
                        "tools": did["tools"],
                    },
                }
            )
        out["turns"] = turns


async def converse(
    spec: Mapping[str, Any], run: ReferenceRun, delays: str = "off"
) -> dict[str, Any]:
    """Build the agent (its perceived-performance policy by `delays`), serve it, talk to it,
    stop the server; the measurements."""
    engine = TaskCpu()
    charge_engine_work(engine)
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
            await _talk(run, port, agent_id, spec, out, kept.get("container"), engine)
        except BaseException as exc:  # reported after the server stops
            failure.append(exc)
        finally:
            serving.cancel()  # the SDK serves until its task is cancelled

    def factory(container: Any) -> NLPService:  # the SDK calls it synchronously
        return FakeService(run)

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
            agent = await build_agent(server, spec, run.record_tool, delays)
            talking = asyncio.get_running_loop().create_task(customer(agent.id))
    except asyncio.CancelledError:
        pass
    await asyncio.gather(talking, return_exceptions=True)
    if failure:
        raise RuntimeError(f"talking to the reference server failed: {failure[0]!r}")
    all_schemas: dict[str, int] = {}
    minimal: dict[str, int] = {}  # calls answered by the minimal instance, not the script
    for c in run.calls:
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
        "delays": delays,
        "peak_rss_mb": peak_rss_mb(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="The reference's side of `python -m bench compare`."
    )
    parser.add_argument("spec", type=Path)
    parser.add_argument("latency_ms", type=float, nargs="?", default=400.0)
    parser.add_argument("--delays", choices=sorted(POLICIES), default="off")
    args = parser.parse_args()
    spec = json.loads(args.spec.read_text(encoding="utf-8"))
    run = ReferenceRun(
        script=list(reference_script.scripts(spec)),
        known=reference_script.known_conditions(spec),
        spec_journeys=list(spec.get("journeys", [])),
    )
    run.latency_s = args.latency_ms / 1000
    print(json.dumps(asyncio.run(converse(spec, run, args.delays))))
