"""The studio page: plain HTML, CSS and JavaScript shipped in the package (no build step), served
by `waypoint serve` at `/` with its assets under `/studio/`. The page reads only the management
API (its base URL and key come from the form or the URL fragment), so the same files work
against a deployed stack: open them from any static host and point them at its API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

STUDIO_DIR = Path(__file__).resolve().parent
ASSETS = (
    "studio.js",
    "inspector.js",
    "handoffs.js",
    "studio.css",
)  # what `/studio/{name}` serves; nothing else is reachable
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


def studio_routes() -> list[Any]:
    """Starlette routes for the page (`/`) and its assets; place them before a catch-all mount."""
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, Response
    from starlette.routing import Route

    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}

    async def index(request: Request) -> Response:
        page = (STUDIO_DIR / "index.html").read_text(encoding="utf-8")
        return HTMLResponse(page, headers={**headers, "Referrer-Policy": "no-referrer"})

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:  # a fixed list: no path from the request reaches the disk
            return PlainTextResponse("not found", status_code=404)
        body = (STUDIO_DIR / name).read_text(encoding="utf-8")
        return Response(body, media_type=_TYPES[Path(name).suffix], headers=headers)

    return [
        Route("/", index, methods=["GET"]),
        Route("/studio/{name}", asset, methods=["GET"]),
    ]
