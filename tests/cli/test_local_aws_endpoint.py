"""`waypoint serve`'s local AWS endpoint (moto's threaded server) answers only the local
processes: over real HTTP, a request from a web page (it carries an `Origin`), a request naming
another host (DNS rebinding), a request without the stack's own credentials and moto's control API
(`/moto-api/…`) are all refused, while the server's own processes and a client with the
credentials `serve` prints (what `waypoint publish` uses) still reach it. The same attack from a
page in headless Chromium: tests/browser/test_local_aws_endpoint.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from examples.banking import TOOLS_MODULE, bank
from examples.banking import load as load_bank
from infra.runtime import reset_runtime
from tests.cli.chat_kit import offline  # noqa: F401 (offline: an autouse fixture)
from waypoint.local_server import GenericChatClient, LocalServer

SAID = "my card number is in this message"
PAGE = "https://evil.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    bank.reset_bank()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POWERTOOLS_LOG_LEVEL", "CRITICAL")
        patch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        for name in ("WAYPOINT_CORS_ORIGINS", "WAYPOINT_LLM_PROVIDER", "OPENAI_API_KEY"):
            patch.delenv(name, raising=False)
        with LocalServer(load_bank(), tools_module=TOOLS_MODULE) as s:
            customer = GenericChatClient(s, "endpoint-test", "seldo")
            customer.send(SAID)
            customer.close()
            yield s
    reset_runtime()


def endpoint(server: LocalServer) -> str:
    assert server.stack.endpoint_url is not None
    return str(server.stack.endpoint_url)


def scan(server: LocalServer, headers: dict[str, str]) -> httpx.Response:
    """A DynamoDB Scan of the state table, as a page's `fetch` would send it."""
    return httpx.post(
        endpoint(server),
        content=json.dumps({"TableName": server.stack.table_name}),
        headers={
            "X-Amz-Target": "DynamoDB_20120810.Scan",
            "Content-Type": "application/x-amz-json-1.0",
            **headers,
        },
    )


def signed_by(key_id: str, server: LocalServer, service: str = "dynamodb") -> str:
    """An Authorization header naming `key_id` (moto checks no signature: the key id is what the
    local stack checks)."""
    scope = f"{key_id}/20250101/{server.stack.region}/{service}/aws4_request"
    return f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature={'0' * 64}"


def aws_client(server: LocalServer, service: str, key_id: str, secret: str) -> object:
    return boto3.client(
        service,
        endpoint_url=endpoint(server),
        region_name=server.stack.region,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
    )


def own_credentials(server: LocalServer) -> tuple[str, str]:
    exported = server.client_env()
    return exported["AWS_ACCESS_KEY_ID"], exported["AWS_SECRET_ACCESS_KEY"]


def test_a_web_page_cannot_read_the_conversations(server: LocalServer) -> None:
    key_id, _ = own_credentials(server)
    # moto checks no signature: any made-up key id in the header routes the request.
    made_up = signed_by("AKIAMADEUPBYAPAGE000", server)
    for headers in (
        {"Origin": PAGE, "Authorization": made_up},
        {"Origin": "null", "Authorization": made_up},  # a sandboxed frame, a file:// page
        {"Origin": PAGE, "Authorization": signed_by(key_id, server)},  # even knowing the key
    ):
        answer = scan(server, headers)
        assert answer.status_code == 403, headers
        assert SAID not in answer.text
        assert "access-control-allow-origin" not in answer.headers
    preflight = httpx.options(
        endpoint(server),
        headers={
            "Origin": PAGE,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-amz-target,content-type",
        },
    )
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers


def test_a_request_without_the_stacks_credentials_is_refused(server: LocalServer) -> None:
    unsigned = scan(server, {})
    assert unsigned.status_code == 403 and SAID not in unsigned.text
    guessed = scan(server, {"Authorization": signed_by("testing", server)})
    assert guessed.status_code == 403 and SAID not in guessed.text
    # A turn queued for the worker to answer, under a made-up key id: refused, nothing sent.
    queued = httpx.post(
        endpoint(server),
        headers={"Authorization": signed_by("AKIAMADEUPBYAPAGE000", server, "sqs")},
        data={
            "Action": "SendMessage",
            "QueueUrl": server.stack.queue_url,
            "MessageBody": "{}",
            "MessageGroupId": "g",
            "MessageDeduplicationId": "d",
        },
    )
    assert queued.status_code == 403
    client = aws_client(server, "dynamodb", "testing", "testing")
    with pytest.raises(ClientError) as refused:
        client.list_tables()  # type: ignore[attr-defined]
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_the_credentials_serve_prints_reach_the_stack(server: LocalServer) -> None:
    exported = server.client_env()
    assert exported["AWS_ACCESS_KEY_ID"] not in ("testing", "")
    client = aws_client(server, "dynamodb", *own_credentials(server))
    tables = client.list_tables()["TableNames"]  # type: ignore[attr-defined]
    assert server.stack.table_name in tables
    answer = scan(server, {"Authorization": signed_by(exported["AWS_ACCESS_KEY_ID"], server)})
    assert answer.status_code == 200 and SAID in answer.text


def test_a_request_naming_another_host_is_refused(server: LocalServer) -> None:
    """DNS rebinding: a page's own name resolved to 127.0.0.1 reaches the port, Host says so."""
    key_id, _ = own_credentials(server)
    port = endpoint(server).rsplit(":", 1)[1]
    for host in (f"rebind.evil.example:{port}", "127.0.0.1", f"127.0.0.1.evil.example:{port}"):
        answer = scan(server, {"Host": host, "Authorization": signed_by(key_id, server)})
        assert answer.status_code == 403, host
        assert SAID not in answer.text
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        answer = scan(server, {"Host": host, "Authorization": signed_by(key_id, server)})
        assert answer.status_code == 200, host


def test_motos_control_api_is_not_served(server: LocalServer) -> None:
    key_id, _ = own_credentials(server)
    for headers in ({}, {"Authorization": signed_by(key_id, server)}):
        for path in ("reset", "data.json", "config"):
            method = "GET" if path == "data.json" else "POST"
            answer = httpx.request(method, f"{endpoint(server)}/moto-api/{path}", headers=headers)
            assert answer.status_code == 403, (path, headers)
            assert SAID not in answer.text
    client = aws_client(server, "dynamodb", *own_credentials(server))
    assert server.stack.table_name in client.list_tables()["TableNames"]  # type: ignore[attr-defined]
