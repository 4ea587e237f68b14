"""How the management API answers a failure: `{"error": ..., "problems": [...]}` with the right
status, never a stack trace — the error body, and which exception becomes which status. Also the
API's logger, shared by its route modules (`functions.management_agents`,
`functions.management_sessions`)."""

from __future__ import annotations

from aws_lambda_powertools import Logger
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from engine.agent_id import InvalidAgentId
from engine.document_text import DocumentTooComplex, DocumentTooLarge
from engine.errors import AgentNotFound, InvalidAgentDefinition, SessionConflict
from infra.agent_versions import PublishRefused, ToolRegistryUnavailable

logger = Logger(service="waypoint-management")


class ErrorBody(BaseModel):
    error: str
    problems: list[str] = Field(default_factory=list)


def error_response(status: int, error: str, problems: list[str] | None = None) -> JSONResponse:
    body = ErrorBody(error=error, problems=problems or [])
    return JSONResponse(body.model_dump(), status_code=status)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return error_response(exc.status_code, str(exc.detail))


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
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
    body = ErrorBody(
        error="publish refused: it would strand sessions or call tools the deployment lacks; "
        "fix the problems, or publish again with ?force=true",
        problems=[r.message for r in exc.check.risks],
    ).model_dump()
    body["check"] = exc.check.model_dump(mode="json")
    return JSONResponse(body, status_code=409)


async def _registry_unavailable(request: Request, exc: ToolRegistryUnavailable) -> JSONResponse:
    return error_response(503, str(exc))


async def _agent_not_found(request: Request, exc: AgentNotFound) -> JSONResponse:
    return error_response(404, str(exc))


async def _conflict(request: Request, exc: SessionConflict) -> JSONResponse:
    return error_response(409, "the session changed concurrently; retry the request")


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
    app.exception_handler(Exception)(_unexpected)
