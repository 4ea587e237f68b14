"""`waypoint studio --api URL [--key KEY]`: the page-only server, run in the foreground."""

from __future__ import annotations

import time
from typing import Any

import typer

from waypoint.studio.page_server import InvalidApiUrl, StudioPageServer


def serve_page_only(
    console: Any, api: str, key: str | None, host: str, port: int, *, open_browser: bool
) -> None:
    """Serve the studio page pointed at `api` until Ctrl-C; print (and open) its address."""
    try:
        server = StudioPageServer(api, key=key, host=host, port=port)
    except InvalidApiUrl as exc:
        console.print(f"[red]✗ {exc}[/red]")
        raise typer.Exit(2) from None
    server.start()
    try:
        console.print(f"studio page     {server.base_url}   (page only: no local stack)")
        console.print(f"management API  {server.api_url}")
        console.print(
            f"The API must allow the origin {server.origin}: deploy with "
            f"StudioOrigins={server.origin} (docs/studio.md)."
        )
        if key is None:
            console.print("No --key: type the API key into the page's form.")
        # The key travels in the fragment: the browser sends it to the API only, in a header.
        console.print(f"studio          {server.page_url}", markup=False, highlight=False,
                      soft_wrap=True)  # fmt: skip
        if open_browser:
            import webbrowser

            webbrowser.open(server.page_url)
        console.print("Ctrl-C to stop.")
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        server.stop()
