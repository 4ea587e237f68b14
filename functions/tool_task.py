"""Lambda entry point of a tool task: runs ONE tool call of `statemachine/tools.asl.json`.

Event: `{"call": {id, tool, arguments, idempotency_key}, "context": {agent_id, session_id,
customer_id, turn_id, variables}}`. Returns the call's `ToolOutcome` as JSON. (Or
`{"describe": "tools"}`: the registry's tool specs, for publish-time checks.) One function serves
every tool: it routes by tool name through the registry named by `WAYPOINT_TOOLS_MODULE` (a module
exposing `registry: ToolRegistry` or `TOOLS: list`), loaded once per warm container.

A tool that fails, raises or exceeds its timeout gives an error outcome (`ToolRegistry.invoke`),
so the Lambda succeeds. Only a broken deployment (no registry) raises, which the state machine
turns into an error outcome for the call and Lambda's error metrics make visible.

Imports stay light (engine + stdlib, no boto3/openai/fastapi): this runs on every cold start.
"""

from __future__ import annotations

import asyncio
import functools
import os
from typing import Any

from engine.toolkit import ToolRegistry, ToolRegistryNotConfigured, registry_from_module
from infra.aws.sfn_dispatcher import decode_call, decode_context, encode_outcome

TOOLS_MODULE_ENV = "WAYPOINT_TOOLS_MODULE"


@functools.cache
def load_registry(module_path: str) -> ToolRegistry:
    """The registry of `module_path`, imported once per container (`load_registry.cache_clear()`
    forgets it)."""
    return registry_from_module(module_path, setting=TOOLS_MODULE_ENV)


def configured_registry() -> ToolRegistry:
    module_path = os.environ.get(TOOLS_MODULE_ENV)
    if not module_path:
        raise ToolRegistryNotConfigured(
            f"{TOOLS_MODULE_ENV} is not set; set it to the module of the agent's tools, "
            "e.g. examples.banking.tools"
        )
    return load_registry(module_path)


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Run the event's tool call and return its outcome (errors included) as JSON data.

    `{"describe": "tools"}` instead returns `{"tools": [ToolSpec, …]}`: the registry this
    deployment serves, which `POST /agents` checks a new agent version against."""
    registry = configured_registry()
    if isinstance(event, dict) and event.get("describe") == "tools":
        return {"tools": [spec.model_dump(mode="json") for spec in registry.specs]}
    raw_call = event.get("call") if isinstance(event, dict) else None
    raw_call = raw_call if isinstance(raw_call, dict) else {}
    try:
        call = decode_call(raw_call)
        tool_context = decode_context(event.get("context") or {})
    except (KeyError, TypeError, ValueError) as exc:
        return _error(raw_call, f"invalid tool task: {type(exc).__name__}: {exc}")
    outcome = asyncio.run(registry.invoke(call, tool_context))
    try:
        return encode_outcome(outcome)
    except (TypeError, ValueError) as exc:
        return _error(raw_call, f"tool result is not JSON-serializable: {exc}")


def _error(raw_call: dict[str, Any], error: str) -> dict[str, Any]:
    return {
        "call_id": str(raw_call.get("id", "")),
        "tool": str(raw_call.get("tool", "")),
        "error": error,
    }
