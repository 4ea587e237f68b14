"""The studio page: plain HTML, CSS and JavaScript shipped in the package (no build step), served
by `waypoint serve` at `/` with its assets under `/studio/`, or alone by `waypoint studio --api`
(`page_server`). The page reads only the management API it was served for — `/api` on its own
origin, or the one `--api` names — with the key from the form or the URL fragment.

The page is sent with its Content-Security-Policy and `X-Frame-Options` as headers (a `<meta>`
policy cannot forbid framing): it loads nothing from elsewhere, may not be framed, and may call
(`connect-src`) its own origin and the configured API only, so a key typed into it can reach no
other host whatever a link or a script asks. The API it was served for is written into the page
(`<meta name="waypoint-api">`); the page binds a stored key to the API it was entered for and asks
before switching to another one (studio.js, docs/studio.md).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

STUDIO_DIR = Path(__file__).resolve().parent
ASSETS = (
    "studio.js",
    "inspector.js",
    "handoffs.js",
    "studio.css",
)  # what `/studio/{name}` serves; nothing else is reachable
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
_META_POLICY = re.compile(r'(<meta http-equiv="Content-Security-Policy"\s+content=")[^"]*(">)')
_META_API = re.compile(r'(<meta name="waypoint-api" content=")[^"]*(">)')


def page_policy(api_url: str | None = None) -> str:
    """The page's Content-Security-Policy: its own files only, no framing, no form posting (a
    form that submitted itself would put the key in an address), and calls to its own origin
    plus, for the page-only server, the origin of the API it was served for."""
    connect = "'self'"
    if api_url:
        parts = urlsplit(api_url)
        connect += f" {parts.scheme}://{parts.netloc}"
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            f"connect-src {connect}",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )


def render_page(api_url: str | None = None) -> str:
    """index.html as served: its `<meta>` policy made the same as the header (without
    frame-ancestors, which browsers ignore there) and the configured API written into it."""
    page = (STUDIO_DIR / "index.html").read_text(encoding="utf-8")
    in_meta = page_policy(api_url).replace("; frame-ancestors 'none'", "")
    page, policies = _META_POLICY.subn(lambda m: m[1] + html.escape(in_meta) + m[2], page)
    page, apis = _META_API.subn(lambda m: m[1] + html.escape(api_url or "") + m[2], page)
    if (policies, apis) != (1, 1):
        raise RuntimeError("index.html lost its Content-Security-Policy or waypoint-api meta tag")
    return page


def studio_routes(api_url: str | None = None) -> list[Any]:
    """Starlette routes for the page (`/`) and its assets; place them before a catch-all mount.
    `api_url`: the management API of another origin the page is for (`waypoint studio --api`);
    None: `/api` on the page's own origin (`waypoint serve`)."""
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, Response
    from starlette.routing import Route

    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    page_headers = {
        **headers,
        "Content-Security-Policy": page_policy(api_url),
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
    }

    async def index(request: Request) -> Response:
        return HTMLResponse(render_page(api_url), headers=page_headers)

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
