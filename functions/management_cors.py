"""CORS of the management API, for a page on another origin (the studio page served by
`waypoint studio --api …`) when the app runs somewhere other than API Gateway (the local server,
a container). On API Gateway the HttpApi's CorsConfiguration answers instead (template.yaml,
parameter StudioOrigins, which also sets `WAYPOINT_CORS_ORIGINS` here).

Exact origins only: a wildcard would let any page on the internet that learns a key call the API
from its visitors' browsers, so `*` is refused, not honoured. No credentials: the key travels in
a header, never in a cookie. The origins are read from the environment on each request, so a
process that changes them (tests, `LocalServer(cors_origins=…)`) needs no restart of the app.
"""

from __future__ import annotations

import os
import re
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

CORS_ORIGINS_ENV = "WAYPOINT_CORS_ORIGINS"
API_KEY_HEADER = "X-Api-Key"
ALLOWED_HEADERS = (API_KEY_HEADER, "Content-Type")
ALLOWED_METHODS = ("GET", "POST", "DELETE", "OPTIONS")
PREFLIGHT_MAX_AGE = 600  # seconds; the same as the template's MaxAge
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?")


class InvalidCorsOrigins(ValueError):
    """`WAYPOINT_CORS_ORIGINS` holds something that is not an exact origin."""


def parse_origins(raw: str) -> tuple[str, ...]:
    """The comma-separated origins of `raw` (empty: none). Each must be `scheme://host[:port]`
    exactly as a browser sends it in `Origin`: no path, no trailing slash, no wildcard."""
    origins = tuple(part.strip() for part in raw.split(",") if part.strip())
    for origin in origins:
        if not _ORIGIN.fullmatch(origin):
            raise InvalidCorsOrigins(
                f"{CORS_ORIGINS_ENV}: {origin!r} is not an origin; write scheme://host[:port] "
                "without a path or a trailing slash (e.g. http://localhost:8750), comma-separated; "
                "wildcards are not allowed"
            )
    return origins


class StudioCors:
    """ASGI middleware: Starlette's CORSMiddleware for the origins configured now, or the app
    unchanged when there are none. Place it outermost, so preflights (which carry no key) are
    answered before the key check and refusals still carry the headers a page needs to read
    them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._built: dict[str, ASGIApp] = {}

    def _for(self, raw: str) -> ASGIApp:
        built = self._built.get(raw)
        if built is None:
            origins = parse_origins(raw)
            built = self.app
            if origins:
                built = CORSMiddleware(
                    self.app,
                    allow_origins=list(origins),
                    allow_methods=list(ALLOWED_METHODS),
                    allow_headers=list(ALLOWED_HEADERS),
                    allow_credentials=False,
                    max_age=PREFLIGHT_MAX_AGE,
                )
            self._built = {raw: built}  # one configuration at a time; a change rebuilds
        return built

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self._for(os.environ.get(CORS_ORIGINS_ENV, ""))(scope, receive, send)


def install(app: Any) -> None:
    """Wrap the FastAPI `app` in `StudioCors`, outside every middleware added before."""
    app.add_middleware(StudioCors)
