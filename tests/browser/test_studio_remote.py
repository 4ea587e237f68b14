"""The studio page served on its own (`waypoint studio --api`, the page-only server) against a
management API on another origin — a LocalServer standing in for a deployed stack, allowing
the page's origin through `WAYPOINT_CORS_ORIGINS` as the template's StudioOrigins does. In a
real headless Chromium: the page connects cross-origin, a message gets the agent's reply and its turn opens in the inspector; and a
page on an origin the API does not allow is refused by the browser and says what to fix."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from examples.banking import load as load_bank
from tests.browser.conftest import offline_bank_server, screenshot
from tests.browser.test_studio import say, wait_for
from waypoint.local_server import LocalServer
from waypoint.studio.page_server import StudioPageServer

pytestmark = pytest.mark.browser

KEY = "studio-remote-browser-key-0123456789"


def free_port() -> int:
    """A port free now, for the page server whose origin the API must know before it starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, int]]:
    """The "deployed" stack, allowing exactly one page origin; yields it and that page's port."""
    page_port = free_port()
    origins = [f"http://127.0.0.1:{page_port}"]
    with offline_bank_server(
        tmp_path_factory, load_bank(), management_api_key=KEY, cors_origins=origins
    ) as server:
        yield server, page_port


def test_the_page_only_studio_chats_with_a_stack_on_another_origin(
    browser: Any, remote: tuple[LocalServer, int]
) -> None:
    from selenium.webdriver.common.by import By

    server, page_port = remote
    with StudioPageServer(f"{server.base_url}/api", key=KEY, port=page_port) as page:
        assert page.origin != server.base_url  # another port: another origin
        browser.get(page.page_url)
        wait_for(browser, "#status", text=f"connected to {server.base_url}/api")
        assert browser.execute_script("return location.origin") == page.origin
        first = say(browser, "Hi", 0)
        assert "transfer money" in first.text  # the greeting, from the remote agent
        second = say(browser, "Transfer money", 1)
        assert "username" in second.text
        session = browser.execute_script("return studio.chatSession")
        assert session  # the session lives on the remote stack, made through its API
        screenshot(browser, "remote-chat")
        # The inspector reads the turn's trace cross-origin too.
        first.find_element(By.CSS_SELECTOR, "a.inspect").click()
        greet = wait_for(browser, '#guidelines tr.matched[data-guideline="greet"]')[0]
        assert "matched" in greet.text
    events = [e["text"] for e in remote_events(server, session) if e.get("source") == "customer"]
    assert events == ["Hi", "Transfer money"]


def test_a_page_on_an_origin_the_api_does_not_allow_is_refused_and_says_why(
    browser: Any, remote: tuple[LocalServer, int]
) -> None:
    server, _ = remote
    with StudioPageServer(f"{server.base_url}/api", key=KEY) as stranger:  # any other port
        browser.get(stranger.page_url)
        status = wait_for(browser, "#status.error", text="allow the origin")[0]
        assert stranger.origin in status.text and "StudioOrigins" in status.text
        assert "connected" not in status.text


def remote_events(server: LocalServer, session_id: str) -> list[dict[str, Any]]:
    import httpx

    response = httpx.get(
        f"{server.base_url}/api/sessions/{session_id}/events", headers={"X-Api-Key": KEY}
    )
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events
