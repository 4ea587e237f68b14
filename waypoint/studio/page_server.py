"""A page-only studio server: the studio page and its assets on a local port, pointed at a
management API elsewhere (a deployed stack), for `waypoint studio --api URL`. No local stack, no
`/api`, no webhooks: the page calls the remote API from the browser, cross-origin, which works
when that API allows this server's origin (template parameter StudioOrigins, or
`WAYPOINT_CORS_ORIGINS` on a non-API-Gateway host; docs/studio.md). The page is served for that
API only: its policy lets it call that API's origin and no other (`waypoint.studio.page_policy`).
"""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

from waypoint.studio import studio_routes


class InvalidApiUrl(ValueError):
    """The management API address given to `waypoint studio --api` is not an http(s) URL."""


def normalized_api_url(url: str) -> str:
    """`url` without its trailing slash, checked to be an absolute http(s) URL without a query
    or fragment (the page appends paths like `/sessions` to it)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidApiUrl(
            f"--api {url!r}: give the management API's absolute URL, e.g. "
            "https://abc123.execute-api.eu-west-1.amazonaws.com (the stack's ManagementApiUrl)"
        )
    if parts.query or parts.fragment:
        raise InvalidApiUrl(f"--api {url!r}: the URL must not carry a query or a fragment")
    return url.strip().rstrip("/")


def studio_page_url(base_url: str, api: str, key: str | None) -> str:
    """The address to open: the page, with the API (and the key, if given) in the fragment —
    a fragment never leaves the browser, so the key reaches no server but the API's."""
    fragment = {"api": api, **({"key": key} if key else {})}
    return f"{base_url}/#{urlencode(fragment)}"


class StudioPageServer:
    """Serve only the studio page on `host:port` (0: any free port) in a background thread."""

    def __init__(self, api_url: str, *, key: str | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:  # fmt: skip
        self.api_url = normalized_api_url(api_url)
        self.key = key
        self.host = host
        self.port = port
        self._http: Any = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StudioPageServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def asgi_app(self) -> Any:
        """The page (`/`) and its assets (`/studio/…`); every other path is a 404."""
        from starlette.applications import Starlette

        return Starlette(routes=studio_routes(self.api_url))

    def start(self) -> None:
        """Listen; returns once the port is bound (`self.port` is then the real one)."""
        import uvicorn

        config = uvicorn.Config(
            self.asgi_app(), host=self.host, port=self.port, log_level="warning", lifespan="off"
        )
        self._http = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._http.run, name="studio-page", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._http.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(
                    f"the studio page server did not start on {self.host}:{self.port}"
                )
            time.sleep(0.02)
        self.port = self._http.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Stop listening and wait (briefly) for the server thread."""
        if self._http is not None:
            self._http.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def origin(self) -> str:
        """What the remote API must allow (StudioOrigins / WAYPOINT_CORS_ORIGINS)."""
        return self.base_url

    @property
    def page_url(self) -> str:
        return studio_page_url(self.base_url, self.api_url, self.key)
