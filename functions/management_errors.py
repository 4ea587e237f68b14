"""How the management API answers a failure: `{"error": ..., "problems": [...]}` with the right
status, never a stack trace — the error body, which exception becomes which status, and how the
OpenAPI document declares them (`error_responses`). Also the API's logger, shared by its route
modules (`functions.management_agents`, `functions.management_sessions`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from engine.agent_id import InvalidAgentId, agent_id_problem
from engine.authoring.document_text import DocumentTooComplex, DocumentTooLarge
from engine.errors import (
    AgentNotFound,
    InvalidAgentDefinition,
    ModelRateLimited,
    SessionConflict,
)
from engine.versioning.diff import PublishCheck
from infra.agent_versions import PublishRefused, ToolRegistryUnavailable

logger = Logger(service="waypoint-management")
_AGENT_ID_FIELDS = frozenset({"agent_id", "agent"})  # what an agent id is called in requests


class ErrorBody(BaseModel):
    """Every error the API answers: what went wrong, and each problem found (may be empty)."""

    error: str
    problems: list[str] = Field(default_factory=list)


class PublishRefusedBody(ErrorBody):
    """409 of `POST /agents`: the problems, and the whole check (`POST /agents/check`'s)."""

    check: PublishCheck


# What each error status means on this API (an operation may say it more precisely).
ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "an id that breaks its rule, a document refused before it is read (`problems` name "
    "the rule), or a body that cannot be read (not UTF-8 JSON)",
    401: "missing or wrong `X-Api-Key` header: checked before anything else",
    404: "no such agent, version, session, trace or journey",
    409: "conflicts with the current state; `error` says what to do instead",
    413: "the body is over its size limit",
    422: "the request breaks this schema or a rule of the operation; `problems` lists each",
    501: "this deployment's session store cannot answer it",
    503: "a dependency is unavailable for now; retry",
}


# The models the OpenAPI document names only in routes' `responses=` (never a route's own
# response_model), by name: `documented_response` refers to each by `$ref`, and
# `documented_components` writes their schemas once, when the document is built. FastAPI's
# `{"model": ...}` would instead build a pydantic validator and serializer for every route and
# status at import (≈ 140 of them, a quarter of this API's import) that nothing ever runs.
_DOCUMENTED: dict[str, type[BaseModel]] = {}
_SCHEMA_REF = "#/components/schemas/{model}"


def documented_response(model: type[BaseModel], description: str) -> dict[str, Any]:
    """A `responses=` entry whose JSON body is `model`: what `{"model": model, "description":
    description}` writes into the OpenAPI document, without building `model` a validator."""
    known = _DOCUMENTED.setdefault(model.__name__, model)
    if known is not model:  # one name, one schema in the document's components
        raise RuntimeError(f"two response models named {model.__name__!r}")
    return {
        "description": description,
        "content": {
            "application/json": {"schema": {"$ref": _SCHEMA_REF.format(model=model.__name__)}}
        },
    }


def documented_components() -> dict[str, Any]:
    """The schemas of the models `documented_response` refers to, and of the models they hold,
    by name, as FastAPI writes a response model's (serialization mode; through its OpenAPI
    `Schema`, which leaves out what is None: a `default` of None)."""
    from fastapi.encoders import jsonable_encoder
    from fastapi.openapi.models import Schema
    from pydantic.json_schema import models_json_schema

    _, schema = models_json_schema(
        [(model, "serialization") for model in _DOCUMENTED.values()], ref_template=_SCHEMA_REF
    )
    return {
        name: jsonable_encoder(Schema(**definition), by_alias=True, exclude_none=True)
        for name, definition in schema.get("$defs", {}).items()
    }


def error_responses(
    *statuses: int, described: Mapping[int, str] | None = None
) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: 401 (the key check) and 422 (an invalid request) always, plus
    `statuses`, each an `ErrorBody` with its description (`described` overrides)."""
    descriptions = {**ERROR_DESCRIPTIONS, **(described or {})}
    return {
        status: documented_response(ErrorBody, descriptions[status])
        for status in sorted({401, 422, *statuses})
    }


def error_response(
    status: int,
    error: str,
    problems: list[str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(error=error, problems=problems or [])
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        # Starlette names the methods of the first route whose path matched; a path served by
        # two routes (`GET` and `POST /sessions`) allows the methods of both.
        headers["Allow"] = _allowed_methods(request) or headers.get("Allow", "")
    return error_response(exc.status_code, str(exc.detail), headers=headers)


def _allowed_methods(request: Request) -> str:
    """Every method some route of the app serves at this request's path."""
    from starlette.routing import Match, Route

    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    bad_agent_ids = [
        agent_id_problem(error.get("input"))
        for error in errors
        if error["type"] == "string_pattern_mismatch"
        and error["loc"]
        and error["loc"][-1] in _AGENT_ID_FIELDS
    ]
    if bad_agent_ids and len(bad_agent_ids) == len(errors):
        # The agent id rule answers as it does inside the routes (engine.agent_id): 400.
        return error_response(400, "invalid agent id", [p for p in bad_agent_ids if p])
    problems = [
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in errors
    ]
    return error_response(422, "invalid request", problems)


async def _invalid_agent(request: Request, exc: InvalidAgentDefinition) -> JSONResponse:
    if isinstance(exc, DocumentTooLarge):
        return error_response(413, "agent document too large", exc.problems)
    if isinstance(exc, InvalidAgentId):
        return error_response(400, "invalid agent id", exc.problems)
    if isinstance(exc, DocumentTooComplex):
        return error_response(400, "agent document refused", exc.problems)
    return error_response(422, "invalid agent definition", exc.problems)


async def _publish_refused(request: Request, exc: PublishRefused) -> JSONResponse:
    body = PublishRefusedBody(
        error="publish refused: it would strand sessions or call tools the deployment lacks; "
        "fix the problems, or publish again with ?force=true",
        problems=[r.message for r in exc.check.risks],
        check=exc.check,
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=409)


async def _registry_unavailable(request: Request, exc: ToolRegistryUnavailable) -> JSONResponse:
    return error_response(503, str(exc))


async def _agent_not_found(request: Request, exc: AgentNotFound) -> JSONResponse:
    return error_response(404, str(exc))


async def _conflict(request: Request, exc: SessionConflict) -> JSONResponse:
    return error_response(409, "the session changed concurrently; retry the request")


async def _rate_limited(request: Request, exc: ModelRateLimited) -> JSONResponse:
    # Nothing was committed: the same request (same event_id) is answered once the model has room.
    retry_after = max(1, math.ceil(exc.retry_after or 0))
    return error_response(
        503,
        "the model is rate-limited; nothing was recorded — send the same request again later",
        headers={"Retry-After": str(retry_after)},
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("management request failed")
    return error_response(500, "internal error")


def install(app: FastAPI) -> None:
    """Answer these exceptions from every route of `app` with an `ErrorBody` and their status."""
    app.exception_handler(HTTPException)(_http_error)
    app.exception_handler(RequestValidationError)(_invalid_request)
    app.exception_handler(InvalidAgentDefinition)(_invalid_agent)
    app.exception_handler(PublishRefused)(_publish_refused)
    app.exception_handler(ToolRegistryUnavailable)(_registry_unavailable)
    app.exception_handler(AgentNotFound)(_agent_not_found)
    app.exception_handler(SessionConflict)(_conflict)
    app.exception_handler(ModelRateLimited)(_rate_limited)
    app.exception_handler(Exception)(_unexpected)
