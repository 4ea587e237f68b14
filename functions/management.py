"""Management API Lambda (API Gateway HTTP API → FastAPI through Mangum).

Every request needs `X-Api-Key` (compared in constant time with `WAYPOINT_MANAGEMENT_API_KEY`,
which may come from the SSM secrets path, and holds two keys, space-separated, while it is
rotated: either is accepted); without it: 401, before anything else is looked at.

    POST /agents[?force=true]             publish an agent (JSON or YAML body) → 201 | 422 problems
                                          | 409 when it would strand sessions or lacks tools
                                          (`infra.agent_versions`; `force` publishes anyway)
    POST /agents/check                    the same check, nothing written → 200 {refused, check}
    POST /agents/{agent_id}/rollback      flip the published pointer back (body: {"version"?})
    GET  /agents/{agent_id}[?version=]    the published (or given) version
    GET  /agents/{agent_id}/graph         its journeys drawn, SVG or Mermaid (`functions.graph_api`)
    POST /sessions                        create a session (web chat, tests)
    GET  /sessions?agent=&limit=&cursor=  the agent's sessions, a page at a time (`studio_api`)
    GET  /sessions/{session_id}           its state, without events
    GET  /sessions/{session_id}/turns     its turns (ids and times), to open their traces
    GET  /sessions/{session_id}/events    its events, in order (`?after=` offset)
    GET  /sessions/{session_id}/traces/{turn_id}
    POST /sessions/{session_id}/messages  a customer message: runs the turn and returns the reply,
                                          or queues it (`?async=1`, 202) for the turn worker
    POST /sessions/{session_id}/interrupts/{call_id}
                                          the result of the pending interrupter step (a form):
                                          completes the step and runs the turn (or `?async=1`
                                          queues it); 409 unless `call_id` is the pending one
    GET  /handoffs, POST /sessions/{session_id}/handoff[/take|/messages|/release]
                                          human handoff: list, start, take, write as a person,
                                          hand back (`functions.handoff_api`)
    DELETE /customers/{channel}/{customer_id}
                                          erase everything stored about one customer: their
                                          sessions, events, traces, S3 bodies, inbox claims
                                          (their words in others' group sessions are redacted)
    GET  /                                this index: the operations, where the reference is
    GET  /openapi.json                    the OpenAPI schema
    GET  /docs                            the API reference page (self-contained) — the one path
                                          answered without the key: a static page holding no
                                          data, which asks for the key to load the schema

Errors are `{"error": "...", "problems": [...]}` with the right status; never a stack trace.

This module wires the app: the key check, CORS, the routes of `functions.management_agents`,
`functions.management_sessions`, `functions.studio_api` and `functions.handoff_api`, the errors of
`functions.management_errors`, the index and the reference page, and the Lambda `handler`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from pydantic import BaseModel, SecretStr

from functions import management_agents, management_errors, management_sessions
from functions.handoff_api import routes as handoff_routes
from functions.http_entry import http_lambda_handler
from functions.management_cors import install as install_cors
from functions.management_errors import error_response, logger
from functions.management_params import refuse_unknown_query
from functions.studio_api import routes as studio_routes
from infra.runtime import current_runtime
from infra.runtime_settings import RuntimeConfigurationError

app = FastAPI(
    title="Waypoint management API",
    version="1",
    description="Publish agents, create sessions, read events and traces, post messages. "
    "Every request needs the `X-Api-Key` header.",
    docs_url=None,  # our own page (`api_reference`): it must send the key to load the schema
    redoc_url=None,
    openapi_url="/openapi.json",  # behind the key, like everything but /docs
    dependencies=[Depends(refuse_unknown_query)],  # every route: undeclared query → 422
)
PUBLIC_PATHS = frozenset({"/docs"})


# --------------------------------------------------------------------------------------------------
# Authentication and errors


@app.middleware("http")
async def require_api_key(request: Request, call_next: Any) -> Response:
    """401 unless `X-Api-Key` equals the configured key, or one of the two during a rotation
    (constant-time compare). Runs before routing and body parsing, so an anonymous caller learns
    nothing else."""
    if _route_path(request) in PUBLIC_PATHS:
        public: Response = await call_next(request)
        return public
    try:
        expected = current_runtime().management_api_key()
        if expected is None:
            logger.error("WAYPOINT_MANAGEMENT_API_KEY is not configured: every request is refused")
    except RuntimeConfigurationError as misconfigured:  # e.g. three keys: refuse, say why in logs
        logger.error("every request is refused: %s", misconfigured)
        expected = None
    received = request.headers.get("x-api-key")
    if (
        expected is None
        or received is None
        or not expected.verifies(received, SecretStr.get_secret_value)
    ):
        refused = error_response(401, "missing or wrong X-Api-Key header")
        refused.headers["WWW-Authenticate"] = "ApiKey"
        return refused
    response: Response = await call_next(request)
    return response


# Outside the key check: a browser's preflight carries no key (WAYPOINT_CORS_ORIGINS).
install_cors(app)


def _route_path(request: Request) -> str:
    """The path inside this app (`/docs`), wherever it is mounted (`/api/docs` locally)."""
    path: str = request.scope.get("path", "")
    root: str = request.scope.get("root_path", "").rstrip("/")
    return path[len(root) :] if root and path.startswith(root + "/") else path


management_errors.install(app)  # `{"error", "problems"}` with the right status

# --------------------------------------------------------------------------------------------------
# Routes: agents (`functions.management_agents`), sessions and customers
# (`functions.management_sessions`), the studio's session list (`functions.studio_api`)

management_agents.install(
    app
)  # POST /agents[/check], /agents/{id}/rollback, GET /agents/{id}[/graph]
management_sessions.install(app)  # /sessions/..., DELETE /customers/{channel}/{customer_id}


# The studio's and the handoff routes are the app's own routes, not an included router: the
# app's route list then names each of them — for the API index, the template's route check, and
# the `Allow` header of a 405 (a path two routes serve allows the methods of both). Declared in
# a `RouteTable`, each is built once, here.
studio_routes.add_to(app)  # GET /sessions, /sessions/{id}/turns (the studio page)


# --------------------------------------------------------------------------------------------------
# The API's own reference


def _openapi_with_key() -> dict[str, Any]:
    """FastAPI's schema, plus the `X-Api-Key` scheme every operation requires and the agent
    document's schemas (the body of `POST /agents`, which the route reads itself)."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        components["securitySchemes"] = {
            "ApiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
        }
        schemas = components.setdefault("schemas", {})
        documented = {
            **management_errors.documented_components(),  # the responses' models
            **management_agents.agent_document_components(),
        }
        for name, definition in documented.items():
            # Same name, same model (pydantic names schemas by class): never two meanings.
            if schemas.setdefault(name, definition) != definition:
                raise RuntimeError(f"two schemas named {name!r} in the management API")
        schema["security"] = [{"ApiKey": []}]
        app.openapi_schema = schema
    return app.openapi_schema


app.openapi = _openapi_with_key  # type: ignore[method-assign]


class ApiIndex(BaseModel):
    service: str
    version: str
    openapi: str
    docs: str
    operations: list[str]


@app.get("/", response_model=ApiIndex, include_in_schema=False)
async def api_index(request: Request) -> ApiIndex:
    """What this API offers and where its reference is (instead of a bare 404)."""
    root = request.scope.get("root_path", "").rstrip("/")
    operations = [
        f"{method} {root}{getattr(route, 'path', '')}"
        for route in app.routes
        if getattr(route, "include_in_schema", False)
        for method in sorted(getattr(route, "methods", ()) or ())
    ]
    return ApiIndex(
        service=app.title,
        version=app.version,
        openapi=f"{root}/openapi.json",
        docs=f"{root}/docs",
        operations=operations,
    )


@app.get("/docs", include_in_schema=False)
async def api_reference() -> Response:
    """The API reference page: static, without data; it loads the schema with the key."""
    from fastapi.responses import HTMLResponse

    from functions.api_reference import REFERENCE_PAGE

    return HTMLResponse(REFERENCE_PAGE)


handoff_routes.add_to(app)  # GET /handoffs, POST /sessions/{id}/handoff[...]

# --------------------------------------------------------------------------------------------------
# Lambda entry point

handler = http_lambda_handler(app, logger)
