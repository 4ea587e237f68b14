"""The studio page against a management API on another origin (a deployed stack, or a local
server elsewhere), over real HTTP: the API's CORS (`WAYPOINT_CORS_ORIGINS`, the app's own, the
same origins the template gives API Gateway) answers preflights for exactly the configured
origins and still wants the key; the page-only server (`waypoint studio --api`) serves the page
and nothing else. The page itself is driven cross-origin in tests/browser/test_studio_remote.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from examples.banking import TOOLS_MODULE, bank
from examples.banking import load as load_bank
from functions.management_cors import InvalidCorsOrigins, parse_origins
from infra.runtime import reset_runtime
from tests.cli.chat_kit import offline, serve_banner  # noqa: F401 (offline: an autouse fixture)
from waypoint.local_server import LocalServer
from waypoint.studio.page_server import InvalidApiUrl, StudioPageServer

KEY = "studio-cors-test-key-0123456789"
STUDIO = "http://127.0.0.1:8751"  # the origin the API allows
STRANGER = "https://evil.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    bank.reset_bank()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POWERTOOLS_LOG_LEVEL", "CRITICAL")
        patch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        patch.delenv("WAYPOINT_CORS_ORIGINS", raising=False)
        patch.delenv("WAYPOINT_LLM_PROVIDER", raising=False)
        patch.delenv("OPENAI_API_KEY", raising=False)
        with LocalServer(
            load_bank(), tools_module=TOOLS_MODULE, management_api_key=KEY, cors_origins=[STUDIO]
        ) as s:
            yield s
    reset_runtime()


def preflight(server: LocalServer, origin: str, method: str = "POST") -> httpx.Response:
    return httpx.options(
        f"{server.base_url}/api/sessions",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "x-api-key,content-type",
        },
    )


def test_a_preflight_from_the_studio_origin_is_allowed_with_the_key_header(
    server: LocalServer,
) -> None:
    response = preflight(server, STUDIO)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == STUDIO
    allowed = {
        h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")
    }
    assert {"x-api-key", "content-type"} <= allowed
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in response.headers
    assert int(response.headers["access-control-max-age"]) > 0


@pytest.mark.parametrize("origin", [STRANGER, "http://127.0.0.1:8752", "null", STUDIO + ".evil"])
def test_a_preflight_from_any_other_origin_gets_no_allowance(
    server: LocalServer, origin: str
) -> None:
    response = preflight(server, origin)
    assert response.status_code != 200
    assert "access-control-allow-origin" not in response.headers


def test_a_preflight_for_a_method_the_api_does_not_use_is_refused(server: LocalServer) -> None:
    response = preflight(server, STUDIO, method="PUT")
    assert response.status_code != 200


def test_the_key_is_still_required_for_the_actual_request(server: LocalServer) -> None:
    url = f"{server.base_url}/api/sessions"
    refused = httpx.get(url, headers={"Origin": STUDIO})
    # Refused, and readable by the page (it can say "wrong key" rather than "network error").
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == STUDIO
    wrong = httpx.get(url, headers={"Origin": STUDIO, "X-Api-Key": KEY + "x"})
    assert wrong.status_code == 401
    answered = httpx.get(url, headers={"Origin": STUDIO, "X-Api-Key": KEY})
    assert answered.status_code == 200 and "sessions" in answered.json()
    assert answered.headers["access-control-allow-origin"] == STUDIO
    assert answered.headers.get("access-control-allow-origin") != "*"


def test_a_response_to_another_origin_carries_no_allowance(server: LocalServer) -> None:
    """A stranger's page holding a stolen key still cannot read answers in its visitors'
    browsers: the browser withholds a response without the allowance."""
    response = httpx.get(
        f"{server.base_url}/api/sessions", headers={"Origin": STRANGER, "X-Api-Key": KEY}
    )
    assert "access-control-allow-origin" not in response.headers


def test_without_configured_origins_there_is_no_cors(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAYPOINT_CORS_ORIGINS", "")
    response = preflight(server, STUDIO)
    assert "access-control-allow-origin" not in response.headers
    assert response.status_code == 401  # the preflight reaches the key check, and fails it
    monkeypatch.setenv("WAYPOINT_CORS_ORIGINS", STUDIO)
    assert preflight(server, STUDIO).headers["access-control-allow-origin"] == STUDIO


@pytest.mark.parametrize(
    "origins",
    ["*", "http://localhost:8750/", "localhost:8750", "http://a.example/studio", f"{STUDIO},*"],
)
def test_wildcards_and_non_origins_are_refused_with_what_to_write(origins: str) -> None:
    with pytest.raises(InvalidCorsOrigins, match="scheme://host"):
        parse_origins(origins)
    with pytest.raises(InvalidCorsOrigins):
        LocalServer(load_bank(), cors_origins=origins.split(","))


def test_origins_are_parsed_exactly() -> None:
    assert parse_origins("") == ()
    assert parse_origins(f" {STUDIO} , https://studio.example.com") == (
        STUDIO,
        "https://studio.example.com",
    )


# ---- the page-only server (`waypoint studio --api`)


def test_the_page_only_server_serves_the_page_and_nothing_else() -> None:
    with StudioPageServer("https://api.example.com/", key=KEY) as page:
        assert httpx.get(f"{page.base_url}/").status_code == 200
        assert "<script" in httpx.get(f"{page.base_url}/").text
        assert httpx.get(f"{page.base_url}/studio/studio.js").status_code == 200
        for path in ("/api/sessions", "/api/docs", "/webhooks/generic", "/local/replies"):
            assert httpx.get(f"{page.base_url}{path}").status_code == 404, path
        assert httpx.post(f"{page.base_url}/webhooks/generic", json={}).status_code in (404, 405)
        # The page is pointed at the remote API (no trailing slash), the key in the fragment.
        assert page.page_url == (f"{page.base_url}/#api=https%3A%2F%2Fapi.example.com&key={KEY}")


def test_the_page_only_servers_page_may_call_its_api_and_nothing_else() -> None:
    """`waypoint studio --api`: the policy (a header, with framing refused) allows the named
    API's origin and the page's own, and the page knows which API it was served for."""
    from tests.cli.test_studio_page import policy_of

    api = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
    with StudioPageServer(api, key=KEY) as page:
        served = httpx.get(f"{page.base_url}/")
    policy = policy_of(served)
    assert policy["connect-src"] == "'self' https://abc123.execute-api.eu-west-1.amazonaws.com"
    assert policy["frame-ancestors"] == "'none'"
    assert served.headers["x-frame-options"] == "DENY"
    assert f'<meta name="waypoint-api" content="{api}">' in served.text
    assert KEY not in served.text  # the key only ever travels in the fragment


def test_the_page_only_server_without_a_key_leaves_it_to_the_form() -> None:
    page = StudioPageServer("http://127.0.0.1:9/prod")
    assert page.page_url.endswith("/#api=http%3A%2F%2F127.0.0.1%3A9%2Fprod")


@pytest.mark.parametrize(
    "url",
    [
        "api.example.com",
        "ftp://api.example.com",
        "https://",
        "https://a.example/?x=1",
        "https://a.example/#key=1",
    ],
)
def test_the_page_only_server_wants_an_absolute_http_url(url: str) -> None:
    with pytest.raises(InvalidApiUrl):
        StudioPageServer(url)


def test_waypoint_studio_with_api_serves_only_the_page_and_prints_its_address(
    tmp_path: Path,
) -> None:
    banner = serve_banner(
        "--api", "https://abc.execute-api.eu-west-1.amazonaws.com/", "--key", KEY,
        "--port", "0", "--no-browser", cwd=tmp_path, command="studio",
    )  # fmt: skip
    assert "page only: no local stack" in banner, banner
    found = re.search(r"studio\s+(http://127\.0\.0\.1:\d+)/#(\S+)", banner)
    assert found, banner
    assert found.group(2) == (
        f"api=https%3A%2F%2Fabc.execute-api.eu-west-1.amazonaws.com&key={KEY}"
    )
    assert "StudioOrigins=http://127.0.0.1:" in banner
    assert "webhooks" not in banner and "generic channel secret" not in banner
    assert not (tmp_path / ".waypoint").exists()  # no local stack, no state directory


def test_waypoint_studio_with_api_refuses_local_stack_options(tmp_path: Path) -> None:
    banner = serve_banner(
        "--api", "https://abc.example", "--ephemeral", "--no-browser", cwd=tmp_path,
        command="studio",
    )  # fmt: skip
    assert "--api serves only the page" in banner


def test_waypoint_serve_refuses_a_wildcard_in_the_environment_before_starting(
    tmp_path: Path,
) -> None:
    banner = serve_banner(
        "--ephemeral", "--port", "0", cwd=tmp_path, env_extra={"WAYPOINT_CORS_ORIGINS": "*"}
    )
    assert "WAYPOINT_CORS_ORIGINS: '*' is not an origin" in banner, banner
    assert "Ctrl-C to stop" not in banner
