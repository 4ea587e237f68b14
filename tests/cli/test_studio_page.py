"""The studio page as `waypoint serve` ships it: the page at `/` and its two assets beside the
webhooks and the management API (which keep working), nothing else of the disk reachable, and
`waypoint studio` opening the page with the key in the fragment. The page itself is driven in a
real browser by tests/browser (`make browser-test`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from examples.banking import TOOLS_MODULE, bank
from examples.banking import load as load_bank
from infra.runtime import reset_runtime
from tests.cli.chat_kit import offline, serve_banner  # noqa: F401 (offline: an autouse fixture)
from waypoint.local_server import GenericChatClient, LocalServer

KEY = "studio-page-test-key-0123456789"


@pytest.fixture
def server() -> Iterator[LocalServer]:
    bank.reset_bank()
    with LocalServer(load_bank(), tools_module=TOOLS_MODULE, management_api_key=KEY) as s:
        yield s
    reset_runtime()


def test_the_page_and_its_assets_are_served_beside_webhooks_and_the_api(
    server: LocalServer,
) -> None:
    page = httpx.get(f"{server.base_url}/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert '<script src="studio/studio.js">' in page.text
    assert "content-security-policy" in page.headers  # nothing loads from elsewhere
    for name, kind in (
        ("studio.js", "javascript"),
        ("inspector.js", "javascript"),
        ("handoffs.js", "javascript"),
        ("studio.css", "css"),
    ):
        asset = httpx.get(f"{server.base_url}/studio/{name}")
        assert asset.status_code == 200 and kind in asset.headers["content-type"]
    # the webhook app still answers its routes, the API still wants its key
    client = GenericChatClient(server, "studio-page", "seldo")
    assert client.send("Hi")["text"]
    client.close()
    assert httpx.get(f"{server.base_url}/api/sessions").status_code == 401
    listed = httpx.get(f"{server.base_url}/api/sessions", headers={"X-Api-Key": KEY})
    assert [s["channel"] for s in listed.json()["sessions"]] == ["generic"]


def policy_of(response: httpx.Response) -> dict[str, str]:
    """The page's Content-Security-Policy header, directive → sources."""
    directives = (
        d.strip().split(" ", 1) for d in response.headers["content-security-policy"].split(";")
    )
    return {name: sources for name, sources in directives}


def test_the_page_sends_its_policy_as_headers_calls_only_its_api_and_cannot_be_framed(
    server: LocalServer,
) -> None:
    """A `<meta>` policy cannot forbid framing (browsers ignore its frame-ancestors), and the
    page talks to `/api` on its own origin only: the key can go nowhere else."""
    page = httpx.get(f"{server.base_url}/")
    policy = policy_of(page)
    assert policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["script-src"] == "'self'" and policy["default-src"] == "'self'"
    assert policy["form-action"] == "'none'"  # a form that posted itself would put the key in a URL
    assert page.headers["x-frame-options"] == "DENY"
    assert 'content="connect-src *' not in page.text and "connect-src *" not in page.text


@pytest.mark.parametrize(
    "path",
    ["/studio/index.html", "/studio/__init__.py", "/studio/..%2F__init__.py", "/studio/%2e%2e"],
)
def test_nothing_but_the_pages_assets_is_served(server: LocalServer, path: str) -> None:
    response = httpx.get(f"{server.base_url}{path}")
    assert response.status_code == 404
    assert "STUDIO_DIR" not in response.text and "import" not in response.text


def test_waypoint_studio_opens_the_page_with_the_key_in_the_fragment(tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    fake_browser = tmp_path / "browser.py"
    fake_browser.write_text(
        "import sys, pathlib\npathlib.Path(sys.argv[2]).write_text(sys.argv[1])\n",
        encoding="utf-8",
    )
    # webbrowser runs $BROWSER with the address in place of %s
    command = f"{sys.executable} {fake_browser} %s {opened}"
    banner = serve_banner(
        "--ephemeral", "--port", "0", cwd=tmp_path, command="studio",
        env_extra={"BROWSER": command, "WAYPOINT_MANAGEMENT_API_KEY": KEY},
    )  # fmt: skip
    assert f"/#key={KEY}" in banner, banner
    deadline = time.monotonic() + 60
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert opened.read_text(encoding="utf-8").endswith(f"/#key={KEY}")


def test_waypoint_studio_without_a_browser_only_prints_the_address(tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    command = f"{sys.executable} -c 'import pathlib; pathlib.Path(\"{opened}\").touch()' %s"
    banner = serve_banner(
        "--ephemeral", "--port", "0", "--no-browser", cwd=tmp_path, command="studio",
        env_extra={"BROWSER": command},
    )  # fmt: skip
    assert "studio          http://127.0.0.1:" in banner
    assert not opened.exists()
