"""The management API's ids in paths and queries, each declared once with the rule it follows,
so the OpenAPI document states what the routes accept (client generators and fuzzers read it)
and FastAPI refuses anything else before a route runs; and no query parameter an operation does
not declare (`refuse_unknown_query`).

An agent id that breaks its rule is a 400 naming the rule wherever it appears (path, query or
body: `functions.management_errors`), as `engine.agent_id` answers it inside the routes; any other
id that breaks its pattern is a 422 listing the problem, like every invalid request.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query, Request
from fastapi.exceptions import RequestValidationError

from engine.agent_id import AGENT_ID_PATTERN, AGENT_ID_RULE
from infra.turn_queue import SESSION_ID_PATTERN

# Turn ids are `turn_{hex}`, call ids `{turn id}:{n}` (engine.turn, engine.stages.tools).
TURN_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,100}$"
CALL_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,200}$"
CHANNEL_PATTERN = r"^[a-z]{1,32}$"
# A customer id is the channel's own (a phone number, a chat or user id, an email); a path
# segment holds it, so it may be anything but a control character.
CUSTOMER_ID_PATTERN = r"^[^\x00-\x1f\x7f]{1,200}$"

AgentIdPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN, description=AGENT_ID_RULE)]
AgentIdQuery = Annotated[
    str | None,
    Query(pattern=AGENT_ID_PATTERN, description=AGENT_ID_RULE + " (default: the configured one)"),
]
SessionIdPath = Annotated[
    str, Path(pattern=SESSION_ID_PATTERN, description="1-100 characters of A-Z a-z 0-9 _ . : -")
]
TurnIdPath = Annotated[str, Path(pattern=TURN_ID_PATTERN, description="a turn id (`turn_…`)")]
CallIdPath = Annotated[
    str, Path(pattern=CALL_ID_PATTERN, description="the pending interrupter's call id")
]
ChannelPath = Annotated[
    str, Path(pattern=CHANNEL_PATTERN, description="`api`, `telegram`, `slack`, `whatsapp` …")
]
CustomerIdPath = Annotated[
    str, Path(pattern=CUSTOMER_ID_PATTERN, description="the customer's id on that channel")
]


async def refuse_unknown_query(request: Request) -> None:
    """A query parameter the operation does not declare is a 422 naming it, not silently
    ignored: a misspelt `?asnyc=1` would run the turn now instead of queueing it, a misspelt
    `?force` would not publish. (An app-wide dependency: `functions.management`.)"""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    declared = _declared_query(dependant)
    unknown = [name for name in dict.fromkeys(request.query_params) if name not in declared]
    if unknown:
        raise RequestValidationError(
            [
                {
                    "type": "extra_forbidden",
                    "loc": ("query", name[:60]),
                    "msg": "unknown query parameter"
                    + (
                        f" (this operation takes {', '.join(sorted(declared))})" if declared else ""
                    ),
                    "input": None,
                }
                for name in unknown[:10]
            ]
        )


def _declared_query(dependant: Any) -> set[str]:
    """The query parameters a route (`fastapi.dependencies.models.Dependant`) and its
    dependencies declare, by the name a client sends."""
    names = {str(param.alias) for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _declared_query(sub)
    return names
