"""`GET /agents/{agent_id}/graph` — an agent's journeys drawn (SVG or Mermaid), for the studio
page and for docs; included in the management API, behind its `X-Api-Key` like every route.

    ?format=svg|mermaid          image/svg+xml (default) or text/plain Mermaid
    &version=V                   a stored version instead of the published one
    &journey=J                   one journey instead of all of them
    &current=STEP                the step a session stands at (needs journey)
    &proposed=a,b,c&kept=a,b     the walk a turn's model proposed / what verification kept

An unknown agent, version, journey or step is a 404 naming it.

`add_graph_route(app)` adds it as the app's own route rather than through an included
`APIRouter`: FastAPI keeps an included router's routes out of `app.routes`, which the API's index
and the SAM template's route check read.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import FastAPI, Query, Response
from starlette.exceptions import HTTPException

from engine.agent_id import check_agent_id
from functions.management_errors import error_responses
from functions.management_params import AgentIdPath
from infra.runtime import current_runtime

SVG_MEDIA_TYPE = "image/svg+xml"
MERMAID_MEDIA_TYPE = "text/plain; charset=utf-8"
# An SVG opened on its own is a document that could run script: everything drawn is escaped,
# and the browser is told to run nothing and load nothing should anything slip through.
SVG_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
}
MAX_WALK = 200  # steps in a proposed or kept walk; a turn's walk is a handful


def _walk(raw: str | None, name: str) -> tuple[str, ...]:
    steps = tuple(step.strip() for step in (raw or "").split(",") if step.strip())
    if len(steps) > MAX_WALK:
        raise HTTPException(422, f"{name}: at most {MAX_WALK} steps")
    return steps


async def agent_graph(
    agent_id: AgentIdPath,
    drawing: Annotated[Literal["svg", "mermaid"], Query(alias="format")] = "svg",
    version: Annotated[str | None, Query(max_length=64)] = None,
    journey: Annotated[str | None, Query(max_length=200)] = None,
    current: Annotated[str | None, Query(max_length=200)] = None,
    proposed: Annotated[str | None, Query(max_length=10_000)] = None,
    kept: Annotated[str | None, Query(max_length=10_000)] = None,
) -> Response:
    """The agent's journeys (or one journey, marked with a turn's position and walks), drawn."""
    from infra.graphs import (
        GraphSubjectNotFound,
        agent_mermaid,
        agent_svg,
        journey_mermaid,
        journey_svg,
    )

    check_agent_id(agent_id)
    walks = {"proposed": _walk(proposed, "proposed"), "kept": _walk(kept, "kept")}
    if journey is None and (current or walks["proposed"] or walks["kept"]):
        raise HTTPException(422, "current, proposed and kept mark a journey: give journey too")
    snapshot = await current_runtime().agents.get(agent_id, version)
    try:
        if journey is None:
            body = agent_svg(snapshot) if drawing == "svg" else agent_mermaid(snapshot)
        elif drawing == "svg":
            body = journey_svg(snapshot, journey, current=current or None, **walks)
        else:
            body = journey_mermaid(snapshot, journey, current=current or None, **walks)
    except GraphSubjectNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    if drawing == "svg":
        return Response(body, media_type=SVG_MEDIA_TYPE, headers=SVG_HEADERS)
    return Response(body, media_type=MERMAID_MEDIA_TYPE)


def add_graph_route(app: FastAPI) -> None:
    """Serve `GET /agents/{agent_id}/graph` from `app` (the management API)."""
    app.add_api_route(
        "/agents/{agent_id}/graph",
        agent_graph,
        methods=["GET"],
        response_class=Response,
        responses={
            200: {
                "content": {
                    SVG_MEDIA_TYPE: {"schema": {"type": "string"}},
                    "text/plain": {"schema": {"type": "string"}},
                },
                "description": "the drawing: SVG, or Mermaid text (`format=mermaid`)",
            },
            **error_responses(400, 404),
        },
    )
