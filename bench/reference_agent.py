"""The spec's agent built through the reference's SDK, for `python -m bench compare`: its
guidelines and observations, each journey's states and transitions (chat and tool states), and
its tools — SDK tools named and shaped like the spec's, which record each call they serve — and
the perceived-performance policy it runs with (`POLICIES`: the SDK's default, or the same
without its waits).

Loaded by `bench/reference_driver.py` inside the reference's own virtual environment: the
standard library and the reference's packages only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import parlant.sdk as p

RecordTool = Callable[[str, dict[str, Any]], None]  # (tool name, its arguments)


class NoDelays(p.BasicPerceivedPerformancePolicy):  # type: ignore[misc]  # Any where not installed
    """The SDK's default perceived-performance policy (`BasicPerceivedPerformancePolicy`: a
    preamble in the first turns and after slow ones, replies split into messages) without the
    waits it adds on purpose before the reply: before the preamble (1.5–2 s), before the
    processing indicator that follows it (1–2 s), before a follow-up message (0.5–1.5 s). The
    extended "thinking" indicator (after 3.5–5 s) races the matching and holds nothing up: kept."""

    async def get_preamble_delay(self, context: Any = None) -> float:
        return 0.0

    async def get_processing_indicator_delay(self, context: Any = None) -> float:
        return 0.0

    async def get_follow_up_delay(self, context: Any = None) -> float:
        return 0.0


# The driver's `--delays`: "off" runs the agent with `NoDelays`, "default" with the SDK's own.
POLICIES: dict[str, Callable[[], Any] | None] = {"off": NoDelays, "default": None}


def _tool(spec: Mapping[str, Any], record: RecordTool) -> Any:
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
    namespace: dict[str, Any] = {"p": p, "_record": record}
    # dont_inherit: this module's `from __future__ import annotations` would turn the tool's
    # annotations into strings, and the SDK checks them as types.
    exec(compile(source, name, "exec", dont_inherit=True), namespace)
    return p.tool(namespace[name])


async def build_agent(
    server: Any, spec: Mapping[str, Any], record: RecordTool, delays: str = "off"
) -> Any:
    """The spec's agent on `server`; its tools call `record` each time the reference runs one;
    its perceived-performance policy by `delays` (`POLICIES`)."""
    policy = POLICIES[delays]
    agent = await server.create_agent(
        name=spec["name"],
        description=spec["description"],
        perceived_performance_policy=policy() if policy is not None else None,
    )
    tools = {t["name"]: _tool(t, record) for t in spec["tools"]}
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
