"""The attack of the second security review, in headless Chromium: a page on another origin finds
`waypoint serve`'s local AWS endpoint (moto's server) and tries to read every conversation, to
queue a turn for the worker, and to wipe the stack with a simple POST to `/moto-api/reset`. The
endpoint answers only the local processes (tests/cli/test_local_aws_endpoint.py over plain HTTP),
so the page reads nothing and changes nothing."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from examples.banking import load as load_bank
from tests.browser.conftest import offline_bank_server
from waypoint.local_server import GenericChatClient, LocalServer

pytestmark = pytest.mark.browser

SAID = "words of the customer that nobody else may read"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    with offline_bank_server(tmp_path_factory, load_bank()) as s:
        customer = GenericChatClient(s, "browser-endpoint", "seldo")
        customer.send(SAID)
        customer.close()
        yield s


class _BlankPage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>another site</title><p>nothing here"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def other_site() -> Iterator[str]:
    """A page on an origin of its own (another port), standing in for any web site."""
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BlankPage)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}/"
    finally:
        site.shutdown()
        thread.join(timeout=5)


# What the page runs: a DynamoDB Scan and an SQS SendMessage to the turn queue, each under a
# made-up key id (moto checks no signature; the header only routes the request), and the reset,
# a simple request the browser sends without asking (its answer unreadable, its effect not).
_ATTACK = """
const [endpoint, region, table, queueUrl, done] = arguments;
const signed = (service) =>
  `AWS4-HMAC-SHA256 Credential=AKIAMADEUPBYAPAGE000/20250101/${region}/${service}/aws4_request, ` +
  `SignedHeaders=host, Signature=${"0".repeat(64)}`;
const outcome = {};
try {
  const answer = await fetch(endpoint + "/", {
    method: "POST",
    headers: {"X-Amz-Target": "DynamoDB_20120810.Scan", Authorization: signed("dynamodb"),
              "Content-Type": "application/x-amz-json-1.0"},
    body: JSON.stringify({TableName: table}),
  });
  outcome.scan = await answer.text();
} catch (error) {
  outcome.scan_error = String(error);
}
const form = new URLSearchParams({Action: "SendMessage", QueueUrl: queueUrl, MessageBody: "{}",
                                  MessageGroupId: "page", MessageDeduplicationId: "page"});
try {
  const queued = await fetch(endpoint + "/", {method: "POST", body: form,
                                              headers: {Authorization: signed("sqs")}});
  outcome.queued = queued.status;
} catch (error) {
  outcome.queue_error = String(error);
}
await fetch(endpoint + "/moto-api/reset", {method: "POST", mode: "no-cors"}).catch(() => null);
done(outcome);
"""


def test_a_page_on_another_site_reads_nothing_and_wipes_nothing(
    browser: Any, server: LocalServer, other_site: str
) -> None:
    browser.get(other_site)
    browser.set_script_timeout(30)
    endpoint = server.stack.endpoint_url
    outcome = browser.execute_async_script(
        f"(async () => {{ {_ATTACK} }})()", endpoint, server.stack.region,
        server.stack.table_name, server.stack.queue_url,
    )  # fmt: skip
    assert SAID not in outcome.get("scan", ""), "the page read the conversations"
    assert "scan_error" in outcome  # the browser refused to hand the answer to the page
    assert "queue_error" in outcome, outcome  # nor was the turn queued
    # The stack is intact: the table and the conversation are still there.
    dynamodb = server.stack.client("dynamodb")
    assert server.stack.table_name in dynamodb.list_tables()["TableNames"]
    items = dynamodb.scan(TableName=server.stack.table_name)["Items"]
    assert any(SAID in str(item) for item in items)
