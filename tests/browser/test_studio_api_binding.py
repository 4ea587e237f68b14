"""The studio's key goes only to the API it was entered for (second security review): a link
naming another API (`#api=…` in the fragment, on load or on `hashchange`) is asked about and never
gets the stored key; a fresh tab opened from such a link does not send the next key typed there;
the form asks before sending a key to another API; and the page's Content-Security-Policy lets it
call only its own API at all. "Elsewhere" is a server on another origin that answers every CORS
preflight and records each `X-Api-Key` it receives."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from examples.banking import load as load_bank
from tests.browser.conftest import offline_bank_server
from tests.browser.test_studio import wait_for
from waypoint.local_server import LocalServer

pytestmark = pytest.mark.browser

KEY = "studio-binding-browser-key-0123456789"


class Elsewhere(http.server.ThreadingHTTPServer):
    """A management API look-alike on another origin that lets any page call it."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.keys: list[str] = []
        self.requests = 0

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api"


class _Recorder(http.server.BaseHTTPRequestHandler):
    server: Elsewhere

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Headers", "x-api-key, content-type")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, DELETE")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_OPTIONS(self) -> None:
        self._answer(b"")

    def do_GET(self) -> None:
        self.server.requests += 1
        if self.headers.get("X-Api-Key"):
            self.server.keys.append(self.headers["X-Api-Key"])
        self._answer(b'{"sessions": [], "cursor": null}')

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    with offline_bank_server(tmp_path_factory, load_bank(), management_api_key=KEY) as s:
        yield s


@pytest.fixture
def elsewhere() -> Iterator[Elsewhere]:
    site = Elsewhere()
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.shutdown()
        thread.join(timeout=5)


@pytest.fixture
def tab(browser: Any) -> Iterator[Any]:
    """A fresh tab (its own sessionStorage), closed afterwards."""
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    try:
        yield browser
    finally:
        _dismiss_any_dialog(browser)
        browser.close()
        browser.switch_to.window(first)


def _dismiss_any_dialog(browser: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with contextlib.suppress(NoAlertPresentException):
        browser.switch_to.alert.dismiss()


def question(browser: Any, elsewhere: Elsewhere, timeout: float = 10) -> Any:
    """The page's question (a confirm dialog), or None if the page asked nothing and instead
    called `elsewhere` (or nothing) within `timeout`."""
    from selenium.common.exceptions import NoAlertPresentException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return browser.switch_to.alert
        except NoAlertPresentException:
            if elsewhere.requests:
                return None
            time.sleep(0.1)
    return None


def connected(browser: Any, server: LocalServer) -> None:
    browser.get(f"{server.base_url}/#key={KEY}")
    wait_for(browser, "#status", text=f"connected to {server.base_url}/api")


def test_a_link_to_another_api_is_asked_about_and_never_gets_the_key(
    tab: Any, server: LocalServer, elsewhere: Elsewhere
) -> None:
    connected(tab, server)
    tab.execute_script("location.hash = arguments[0]", f"api={elsewhere.api}")  # hashchange
    asked = question(tab, elsewhere)
    assert elsewhere.keys == [], "the stored key went to the linked API"
    assert asked is not None, "the page switched APIs without asking"
    assert elsewhere.api in asked.text and f"{server.base_url}/api" in asked.text
    asked.dismiss()  # stay
    wait_for(tab, "#status", text=f"{server.base_url}/api")
    assert tab.execute_script("return [studio.base, studio.key]") == [f"{server.base_url}/api", KEY]

    tab.get(f"{server.base_url}/#api={elsewhere.api}")  # the same link, as a new load
    asked = question(tab, elsewhere)
    assert asked is not None and elsewhere.keys == []
    asked.accept()  # switch: the old key stays behind
    time.sleep(1)
    assert tab.execute_script("return [studio.base, studio.key]") == [elsewhere.api, ""]
    assert elsewhere.keys == []


def test_a_fresh_tab_from_a_link_does_not_send_the_next_key_to_the_linked_api(
    tab: Any, server: LocalServer, elsewhere: Elsewhere
) -> None:
    from selenium.webdriver.common.by import By

    tab.get(f"{server.base_url}/#api={elsewhere.api}")
    asked = question(tab, elsewhere)
    if asked is not None:
        asked.dismiss()  # a developer who did not mean to use another API
    assert tab.find_element(By.ID, "api-base").get_attribute("value") == f"{server.base_url}/api"
    # Even one who accepts it: the key typed next never reaches it (the page's policy).
    tab.get(f"{server.base_url}/#api={elsewhere.api}")
    asked = question(tab, elsewhere)
    if asked is not None:
        asked.accept()
    tab.find_element(By.ID, "api-key").send_keys(KEY)
    tab.find_element(By.ID, "connect").click()
    wait_for(tab, "#status.error", text="cannot reach")
    assert elsewhere.keys == [] and elsewhere.requests == 0


def test_the_form_asks_before_sending_the_key_to_another_api(
    tab: Any, server: LocalServer, elsewhere: Elsewhere
) -> None:
    from selenium.webdriver.common.by import By

    connected(tab, server)
    field = tab.find_element(By.ID, "api-base")
    field.clear()
    field.send_keys(elsewhere.api)
    tab.find_element(By.ID, "connect").click()  # the key field still holds the key for /api
    asked = question(tab, elsewhere)
    assert elsewhere.keys == []
    assert asked is not None and "key" in asked.text and elsewhere.api in asked.text
    asked.dismiss()
    time.sleep(1)
    assert tab.find_element(By.ID, "api-key").get_attribute("value") == ""
    assert tab.execute_script("return studio.key") == ""
    assert elsewhere.keys == []


def test_the_page_can_call_no_api_but_its_own(
    tab: Any, server: LocalServer, elsewhere: Elsewhere
) -> None:
    connected(tab, server)
    tab.set_script_timeout(30)
    outcome = tab.execute_async_script(
        "const done = arguments[1];"
        "fetch(arguments[0] + '/sessions').then(r => done('fetched ' + r.status),"
        " e => done('refused ' + e));",
        elsewhere.api,
    )
    assert outcome.startswith("refused"), outcome
    assert elsewhere.requests == 0
