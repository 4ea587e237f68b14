"""Publishing an agent version safely, and rolling back.

`check_publish_for` gathers what `engine.versioning.diff.check_publish` weighs: the published
version, the sessions in flight (`infra.aws.in_flight`) and the tools the deployment serves:

- in AWS (`WAYPOINT_TOOL_FUNCTION` set, the template's ToolFunction): the tool Lambda itself is
  asked (`{"describe": "tools"}`, one Invoke) — its registry is the one calls will reach;
- in `waypoint serve` and in-process runtimes (`WAYPOINT_TOOLS_MODULE`): that registry;
- neither: inside a deployment (the management API) no tools are served, so an agent that
  declares any is refused; from the command line against a remote stack the registry is
  unknown and tools are not checked (the check says so: `tools_checked`).

`publish_checked` refuses (`PublishRefused`, the check attached) when anything would strand a
session or fail a call, unless `force`; then it publishes as `Runtime.publish_agent` does.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import AgentNotFound, WaypointError
from engine.versioning.diff import PublishCheck, check_publish
from infra.runtime import PublishedAgent, Runtime
from infra.runtime_settings import load_tool_registry

if TYPE_CHECKING:  # (annotations only: the management API imports this module at start)
    from engine.model import AgentSnapshot

TOOL_FUNCTION_ENV = "WAYPOINT_TOOL_FUNCTION"


class PublishRefused(WaypointError):
    """Publishing would strand sessions or call tools the deployment lacks; `check` says what.
    Fix it (a migration, deploy the tools) or publish with force."""

    def __init__(self, check: PublishCheck):
        self.check = check
        lines = "; ".join(r.message for r in check.risks)
        super().__init__(f"publish refused: {lines}. Fix these, or publish with force")


class ToolRegistryUnavailable(WaypointError):
    """The deployed tool function could not describe its registry."""


async def deployed_tool_names(runtime: Runtime, *, in_deployment: bool = True) -> list[str] | None:
    """The names of the tools this deployment serves, or None when unknown (see the module
    docstring)."""
    function = os.environ.get(TOOL_FUNCTION_ENV)
    if function:
        from infra.aws.clients import client

        response = client("lambda").invoke(
            FunctionName=function, Payload=json.dumps({"describe": "tools"}).encode()
        )
        body = json.loads(response["Payload"].read() or b"null")
        if response.get("FunctionError") or not isinstance(body, dict) or "tools" not in body:
            raise ToolRegistryUnavailable(
                f"tool function {function!r} did not describe its tools ({body!r}); is "
                "WAYPOINT_TOOLS_MODULE set on it and does it deploy this version of Waypoint?"
            )
        return [str(tool["name"]) for tool in body["tools"]]
    if runtime.settings.tools_module:
        return [spec.name for spec in load_tool_registry(runtime.settings.tools_module).specs]
    return [] if in_deployment else None


async def check_publish_for(
    runtime: Runtime, snapshot: AgentSnapshot, *, in_deployment: bool = True
) -> PublishCheck:
    """What publishing `snapshot` now would strand or break (nothing is written)."""
    try:
        published: AgentSnapshot | None = await runtime.agents.get(snapshot.id)
    except AgentNotFound:
        published = None
    positions = await runtime.sessions.sessions_in_flight(snapshot.id)
    tools = await deployed_tool_names(runtime, in_deployment=in_deployment)
    return check_publish(published, snapshot, positions, tools)


@dataclass(frozen=True)
class CheckedPublish:
    published: PublishedAgent
    check: PublishCheck
    forced: bool  # published although the check found risks


async def publish_checked(
    runtime: Runtime, snapshot: AgentSnapshot, *, force: bool = False, in_deployment: bool = True
) -> CheckedPublish:
    """Check, then publish (embeddings, then the pointer). Raises `PublishRefused` when the
    check finds risks and `force` is not set; nothing is written then."""
    from engine.memory.stores import versioned

    snapshot = versioned(snapshot)
    check = await check_publish_for(runtime, snapshot, in_deployment=in_deployment)
    if check.refused and not force:
        raise PublishRefused(check)
    published = await runtime.publish_agent(snapshot)
    return CheckedPublish(published, check, forced=check.refused)


async def rollback(runtime: Runtime, agent_id: str, version: str | None = None) -> tuple[str, str]:
    """Flip the published pointer back (to `version`, default the previous one), atomically;
    returns (from, to). Embeddings of every stored version stay in S3, so nothing else moves."""
    return await runtime.agents.rollback(agent_id, version)
