"""The management API's agent routes: publish (after the check against what is published),
check only, rollback, and read a version; its journeys' drawing is `functions.graph_api`'s.
Added to the app by `install` (`functions.management`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import FastAPI, Query, Request
from pydantic import BaseModel, Field

from engine.agent_id import check_agent_id
from engine.authoring.document_text import MAX_DOCUMENT_BYTES, DocumentTooLarge, parse_document_text
from engine.errors import InvalidAgentDefinition
from engine.versioning.diff import PublishCheck
from functions.graph_api import add_graph_route
from functions.management_errors import (
    PublishRefusedBody,
    documented_response,
    error_responses,
    logger,
)
from functions.management_params import AgentIdPath
from infra.runtime import current_runtime

if TYPE_CHECKING:
    from engine.model import AgentSnapshot

_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
AGENT_DOCUMENT = "AgentDocument"  # its schema's name among the OpenAPI document's components
# The body of POST /agents and /agents/check, read by the route itself (JSON or YAML, limits
# first: `parse_agent_document`), so FastAPI cannot derive it: declared here.
AGENT_DOCUMENT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "an agent document (docs/agent.schema.json; docs/authoring.md), as JSON "
        f"or YAML, at most {MAX_DOCUMENT_BYTES} bytes",
        "content": {
            "application/json": {
                "schema": {"$ref": f"#/components/schemas/{AGENT_DOCUMENT}"},
                "example": {
                    "agent": {"id": "hello", "name": "Hello"},
                    "guidelines": [
                        {
                            "id": "greet",
                            "condition": "the customer greets",
                            "action": "greet them back",
                        }
                    ],
                },
            },
            "application/yaml": {
                "schema": {"type": "string", "description": "the same document written as YAML"},
                "example": "agent: {id: hello, name: Hello}\n"
                "guidelines:\n"
                "  - {id: greet, condition: the customer greets, action: greet them back}\n",
            },
        },
    }
}


class PublishedAgentView(BaseModel):
    agent_id: str
    version: str
    embedded: dict[str, int]  # namespace → vectors written to S3
    # the diff against the version published before, and the risks (non-empty only if forced)
    check: PublishCheck | None = None
    forced: bool = False


class PublishCheckView(BaseModel):
    agent_id: str
    version: str  # the version it would be published as
    refused: bool  # POST /agents would answer 409 (without ?force=true)
    check: PublishCheck


class RollbackRequest(BaseModel):
    version: str | None = Field(default=None, max_length=64)  # default: the previous one


class RollbackView(BaseModel):
    agent_id: str
    from_version: str
    to_version: str


class AgentView(BaseModel):
    id: str
    version: str
    name: str
    description: str
    guidelines: list[str]
    journeys: list[str]
    tools: list[str]
    definition: dict[str, Any]  # the agent as a document (same shape POST /agents accepts)


def parse_agent_document(raw: bytes, content_type: str) -> dict[str, Any]:
    """The request body as an agent document (YAML when the content type says so, else JSON)."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    # Byte, alias-expansion and nesting limits: engine.authoring.document_text.
    data = parse_document_text(raw, "yaml" if media_type in _YAML_TYPES else "json", "body")
    header = data.get("agent") if isinstance(data, dict) else None
    if isinstance(header, dict) and "id" in header:
        check_agent_id(header["id"])  # a 400 naming the rule, before anything else
    if not isinstance(data, dict):
        raise InvalidAgentDefinition(["body: expected a mapping with an 'agent' section"])
    return data


def agent_document_components() -> dict[str, Any]:
    """The agent document's JSON Schema and every schema it refers to, as OpenAPI components
    (the document's own is named `AGENT_DOCUMENT`)."""
    from engine.authoring.document import AgentDocument

    schema = AgentDocument.model_json_schema(
        by_alias=True, mode="validation", ref_template="#/components/schemas/{model}"
    )
    components: dict[str, Any] = schema.pop("$defs", {})
    components[AGENT_DOCUMENT] = schema
    return components


async def publish_agent(request: Request, force: bool = False) -> PublishedAgentView:
    """Validate, check against the published version (sessions in flight, deployed tools) and
    publish: embeddings to S3, then the version pointer. 409 with the check when refused."""
    from infra.agent_versions import publish_checked

    snapshot = await _agent_from_request(request)
    outcome = await publish_checked(current_runtime(), snapshot, force=force)
    published = outcome.published
    logger.info(
        "agent published",
        extra={
            "agent_id": published.agent_id,
            "version": published.version,
            "forced_over": [r.message for r in outcome.check.risks] if outcome.forced else [],
        },
    )
    return PublishedAgentView(
        agent_id=published.agent_id,
        version=published.version,
        embedded=published.embedded,
        check=outcome.check,
        forced=outcome.forced,
    )


async def check_agent(request: Request) -> PublishCheckView:
    """What publishing this agent now would change and whether it would be refused, without
    writing anything (the same check `POST /agents` makes)."""
    from engine.memory.stores import versioned
    from infra.agent_versions import check_publish_for

    snapshot = versioned(await _agent_from_request(request))
    check = await check_publish_for(current_runtime(), snapshot)
    return PublishCheckView(
        agent_id=snapshot.id, version=snapshot.version, refused=check.refused, check=check
    )


async def _agent_from_request(request: Request) -> AgentSnapshot:
    """The request body as a validated agent (YAML or JSON), size-limited before reading."""
    from engine.authoring import load_agent

    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > MAX_DOCUMENT_BYTES:  # refused before reading it
        raise DocumentTooLarge(
            [
                f"body: {declared} bytes is over the {MAX_DOCUMENT_BYTES}-byte limit for agent documents"
            ]
        )
    raw = await request.body()
    return load_agent(parse_agent_document(raw, request.headers.get("content-type", "")))


async def rollback_agent(
    agent_id: AgentIdPath, body: RollbackRequest | None = None
) -> RollbackView:
    """Point the agent back at an earlier stored version (default: the previous one)."""
    from infra.agent_versions import rollback

    check_agent_id(agent_id)
    before, after = await rollback(current_runtime(), agent_id, body.version if body else None)
    logger.info("agent rolled back", extra={"agent_id": agent_id, "from": before, "to": after})
    return RollbackView(agent_id=agent_id, from_version=before, to_version=after)


async def get_agent(
    agent_id: AgentIdPath, version: Annotated[str | None, Query(max_length=64)] = None
) -> AgentView:
    from engine.authoring import dump_agent

    check_agent_id(agent_id)
    snapshot = await current_runtime().agents.get(agent_id, version)
    return AgentView(
        id=snapshot.id,
        version=snapshot.version,
        name=snapshot.name,
        description=snapshot.description,
        guidelines=[g.id for g in snapshot.guidelines],
        journeys=[j.id for j in snapshot.journeys],
        tools=[t.name for t in snapshot.tools],
        definition=dump_agent(snapshot),
    )


def install(app: FastAPI) -> None:
    """Add the agent routes to `app`, as its own routes, in this order."""
    refused: dict[int | str, dict[str, Any]] = {
        409: documented_response(
            PublishRefusedBody,
            "refused: it would strand sessions or call tools the deployment lacks (`check` "
            "says which); fix it, or publish again with ?force=true",
        )
    }
    app.add_api_route(
        "/agents",
        publish_agent,
        methods=["POST"],
        response_model=PublishedAgentView,
        status_code=201,
        responses={**error_responses(400, 413, 503), **refused},
        openapi_extra=AGENT_DOCUMENT_BODY,
    )
    app.add_api_route(
        "/agents/check",
        check_agent,
        methods=["POST"],
        response_model=PublishCheckView,
        responses=error_responses(400, 413, 503),
        openapi_extra=AGENT_DOCUMENT_BODY,
    )
    app.add_api_route(
        "/agents/{agent_id}/rollback",
        rollback_agent,
        methods=["POST"],
        response_model=RollbackView,
        responses=error_responses(400, 404),
    )
    app.add_api_route(
        "/agents/{agent_id}",
        get_agent,
        methods=["GET"],
        response_model=AgentView,
        responses=error_responses(400, 404),
    )
    add_graph_route(app)  # GET /agents/{agent_id}/graph
