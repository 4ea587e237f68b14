"""`waypoint serve`'s stack: one log line per HTTP request and per turn, and the management API's
reference (index, OpenAPI schema behind the key, a public docs page without data)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from examples.banking import TOOLS_MODULE, bank
from examples.banking import load as load_bank
from infra.runtime import reset_runtime
from tests.cli.chat_kit import offline, run_cli  # noqa: F401 (offline: an autouse fixture)
from waypoint.local_server import GenericChatClient, LocalServer

KEY = "local-test-key-0123456789"


@pytest.fixture
def served() -> Iterator[tuple[LocalServer, list[str]]]:
    bank.reset_bank()
    lines: list[str] = []
    with LocalServer(
        load_bank(), tools_module=TOOLS_MODULE, management_api_key=KEY, log_line=lines.append
    ) as server:
        yield server, lines
    reset_runtime()


def test_serve_logs_one_line_per_request_and_per_turn(
    served: tuple[LocalServer, list[str]],
) -> None:
    server, lines = served
    client = GenericChatClient(server, "log-test", "seldo")
    client.send("Hi")
    client.send("Transfer money")
    client.close()
    httpx.get(f"{server.base_url}/api/sessions/nope?token=hunter2", headers={"X-Api-Key": KEY})
    # A request's line is written once its response is sent, a turn's once the worker's batch
    # is done (after the reply went out): wait for both.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (
        any("/api/sessions/{session_id}" in line for line in lines)
        and sum(line.startswith("turn ") for line in lines) >= 2
    ):
        time.sleep(0.05)

    requests = [line for line in lines if line.startswith("request ")]
    turns = [line for line in lines if line.startswith("turn ")]
    webhook = [line for line in requests if line.startswith("request POST /webhooks/generic 200 ")]
    assert len(webhook) == 2 and all(line.endswith(" ms") for line in webhook)
    assert any(line.startswith("request POST /local/replies 200 ") for line in requests)
    # (422: the management API refuses a query parameter the operation does not declare)
    assert any(line.startswith("request GET /api/sessions/{session_id} 422 ") for line in requests)
    assert not any("hunter2" in line for line in lines)  # a query string is never logged
    assert len(turns) == 2, lines
    session = client.session_id
    assert turns[0].startswith(f"turn    {session} version {server.agent.version} matched=[greet]")
    assert "matched=[start of Money transfer]" in turns[1] and turns[1].endswith(" ms")


def test_a_request_line_names_no_id_the_path_held_not_even_an_erased_persons(
    served: tuple[LocalServer, list[str]],
) -> None:
    """Issue #33: `DELETE /api/customers/generic/{id}` left the erased id in serve's log."""
    server, lines = served
    client = GenericChatClient(server, "erase-me", "seldo-4471")
    client.send("Hi")
    client.close()
    api, key = f"{server.base_url}/api", {"X-Api-Key": KEY}
    assert httpx.get(f"{api}/sessions/{client.session_id}/events", headers=key).status_code == 200
    assert httpx.delete(f"{api}/customers/generic/seldo-4471", headers=key).status_code == 200
    assert httpx.get(f"{server.base_url}/webhooks/seldo-4471").status_code == 404
    assert httpx.get(f"{api}/no-such/seldo-4471", headers=key).status_code == 404
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any("GET /api/…/… 404" in line for line in lines):
        time.sleep(0.05)

    requests = [line for line in lines if line.startswith("request ")]
    assert [r for r in requests if "seldo" in r or client.session_id in r] == []
    logged = [" ".join(r.split()[1:4]) for r in requests]
    assert "POST /webhooks/generic 200" in logged  # a channel, answered: shown
    assert "GET /api/sessions/{session_id}/events 200" in logged
    assert "DELETE /api/customers/generic/{customer_id} 200" in logged
    assert "GET /webhooks/{channel} 404" in logged  # not accepted as a channel: hidden
    assert "GET /api/…/… 404" in logged  # no route: only the routes' own words


def test_the_management_api_serves_its_reference(served: tuple[LocalServer, list[str]]) -> None:
    server, _ = served
    api = f"{server.base_url}/api"

    index = httpx.get(f"{api}/", headers={"X-Api-Key": KEY})
    assert index.status_code == 200
    assert index.json()["docs"] == "/api/docs" and index.json()["openapi"] == "/api/openapi.json"
    assert "POST /api/agents" in index.json()["operations"]

    schema = httpx.get(f"{api}/openapi.json", headers={"X-Api-Key": KEY})
    assert schema.status_code == 200
    assert schema.json()["servers"] == [{"url": "/api"}]  # "try it out" reaches the mount
    assert "/sessions/{session_id}/messages" in schema.json()["paths"]
    assert schema.json()["components"]["securitySchemes"]["ApiKey"]["name"] == "X-Api-Key"

    page = httpx.get(f"{api}/docs")  # without the key: a page, no data
    assert page.status_code == 200 and 'fetch("openapi.json"' in page.text
    assert "X-Api-Key" in page.text
    assert KEY not in page.text
    # self-contained: nothing is loaded from another host (works offline, behind a private API)
    assert "http://" not in page.text and "https://" not in page.text


def test_everything_but_the_docs_page_still_needs_the_key(
    served: tuple[LocalServer, list[str]],
) -> None:
    server, _ = served
    api = f"{server.base_url}/api"
    for path in ("/", "/openapi.json", "/agents/bank", "/sessions/x", "/docs/../openapi.json"):
        response = httpx.get(f"{api}{path}")
        assert response.status_code == 401, path
    assert httpx.post(f"{api}/docs").status_code == 405  # a page to read, nothing to post


def test_serve_prints_where_the_reference_is(tmp_path: Path) -> None:
    from tests.cli.chat_kit import serve_banner

    seen = serve_banner("--port", "0", "--ephemeral", cwd=tmp_path)
    assert "API reference   http://127.0.0.1:" in seen and "/api/docs" in seen, seen


def test_run_cli_helper_is_offline(tmp_path: Path) -> None:
    result = run_cli(
        "validate", str(Path(__file__).parents[2] / "examples/banking/agent.yaml"), cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_turn_the_management_api_runs_is_logged_too(
    served: tuple[LocalServer, list[str]],
) -> None:
    server, lines = served
    api, headers = f"{server.base_url}/api", {"X-Api-Key": KEY}
    session = httpx.post(f"{api}/sessions", json={"customer_id": "c1"}, headers=headers).json()
    answered = httpx.post(
        f"{api}/sessions/{session['id']}/messages", json={"text": "Hi"}, headers=headers, timeout=60
    )
    assert answered.status_code == 200, answered.text

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
        line.startswith(f"turn    {session['id']} ") for line in lines
    ):
        time.sleep(0.05)
    assert any(
        line.startswith(f"turn    {session['id']} version ") and "matched=[greet]" in line
        for line in lines
    ), lines


def test_the_template_routes_the_api_reference_to_the_management_function() -> None:
    from tests.cli.chat_kit import ROOT

    template = (ROOT / "template.yaml").read_text()
    management = template[template.index("  ManagementFunction:") :]
    management = management[: management.index("\n  # ---") if "\n  # ---" in management else None]
    for path in ("/", "/openapi.json", "/docs"):
        assert f"            Method: GET\n            Path: {path}\n" in management, path


def test_the_local_stack_gives_the_engine_its_secret_digest_key(
    served: tuple[LocalServer, list[str]],
) -> None:
    from infra.runtime import current_runtime

    server, _ = served

    assert len(server.secret_digest_key) >= 32
    assert current_runtime().engine.pipeline.deps.secret_key == server.secret_digest_key.encode()


def test_serve_keeps_the_secret_digest_key_with_its_data_and_adds_it_to_an_older_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart with a new key would no longer recognise what the sessions kept of their
    secrets: the key is kept in `secrets.json` (this user's only), added to a file written
    before it existed without touching what that file held; the environment still wins."""
    import json

    from waypoint.served_state import SECRETS_FILE, served_secrets

    for name in ("MANAGEMENT_API_KEY", "GENERIC_SECRET", "SECRET_DIGEST_KEY"):
        monkeypatch.delenv(f"WAYPOINT_{name}", raising=False)
    path = tmp_path / SECRETS_FILE
    path.write_text(json.dumps({"management_api_key": "old-key", "generic_secret": "old"}))

    first = served_secrets(tmp_path)
    again = served_secrets(tmp_path)
    monkeypatch.setenv("WAYPOINT_SECRET_DIGEST_KEY", "from-the-environment-" + "x" * 32)
    overridden = served_secrets(tmp_path)

    assert (first.management_api_key, first.generic_secret) == ("old-key", "old")
    assert len(first.secret_digest_key) == 64 and again == first
    assert json.loads(path.read_text())["secret_digest_key"] == first.secret_digest_key
    assert path.stat().st_mode & 0o777 == 0o600
    assert overridden.secret_digest_key.startswith("from-the-environment-")
    assert json.loads(path.read_text())["secret_digest_key"] == first.secret_digest_key


def test_serve_keeps_its_data_readable_by_its_user_only(tmp_path: Path) -> None:
    """`waypoint serve`'s default data directory, its credentials and its snapshots of every
    conversation: 0700 and 0600, whatever the umask gives other files."""
    from tests.cli.chat_kit import serve_banner

    serve_banner("--port", "0", cwd=tmp_path)
    data = tmp_path / ".waypoint"
    files = [p for p in data.rglob("*") if p.is_file()]
    assert {"secrets.json", "dynamodb.pickle"} <= {p.name for p in files}
    for directory in (data, data / "moto"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    for path in files:
        assert path.stat().st_mode & 0o777 == 0o600, path
