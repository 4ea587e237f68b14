"""Who may call the local stack's moto server: the local processes, and nobody else.

moto's server answers every request, checks no signature and reflects any `Origin` in its CORS
headers. On a developer's machine that made `waypoint serve`'s AWS endpoint a data plane open to
any web page that finds the port: read every conversation, queue turns the worker answers, wipe
the stack with a POST to `/moto-api/reset` — the management API's key never asked for. The
server's WSGI app is therefore wrapped (`MotoAccessGuard`) and refuses, with a 403 and no CORS
header:

- a request carrying an `Origin` header: browsers add it to every cross-origin request and to
  every POST; boto3 never sends one. No page is ever a client of this endpoint;
- a request whose `Host` is not the server's own `127.0.0.1:PORT` or `localhost:PORT`: a page
  whose own name was rebound to 127.0.0.1 (DNS rebinding) sends its own name;
- a request not made with the stack's credentials: each stack makes a random access key id
  (`LocalCredentials`), which the local processes use like any AWS credentials (the environment's
  `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`; `waypoint serve` prints them for `waypoint
  publish` in another shell). moto checks no signature, so the key id is what is checked: a
  bearer token that only this machine's user's processes know;
- moto's own control API (`/moto-api/…`: reset, state dumps, configuration): the local stack
  resets and configures moto in-process (`LocalStack`), nothing needs it over HTTP.

Not covered, by design: the Step Functions interpreter's own calls back into the server (fixed
credentials "ak"), which the local stack never makes (tools run in process; state machines run
under in-process moto in the tests).
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# SigV4: "AWS4-HMAC-SHA256 Credential=KEYID/20250101/us-east-1/dynamodb/aws4_request, …"
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
_LOOPBACK_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class LocalCredentials:
    """The credentials the local stack's clients sign with; the key id is what is checked."""

    access_key_id: str
    secret_access_key: str

    @classmethod
    def new(cls) -> LocalCredentials:
        # 20 upper-case letters and digits, the shape of an AWS key id (moto reads it as one).
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
        key_id = "WPL" + "".join(secrets.choice(alphabet) for _ in range(17))
        return cls(key_id, secrets.token_urlsafe(30))


def access_key_id_of(environ: dict[str, Any]) -> str | None:
    """The access key id a request was signed with: from its `Authorization` header, or from a
    presigned URL's `X-Amz-Credential`; None when it names none."""
    found = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    if found:
        return found.group(1)
    presigned = parse_qs(environ.get("QUERY_STRING", "")).get("X-Amz-Credential")
    if presigned:
        return presigned[0].split("/", 1)[0] or None
    return None


class MotoAccessGuard:
    """The moto server's WSGI app, answering only the local processes (module docstring).

    `app` is the wrapped application; it may be replaced after the server started (the data
    directory's snapshotting app wraps moto inside this guard), the guard stays outermost."""

    def __init__(self, app: WsgiApp, credentials: LocalCredentials) -> None:
        self.app = app
        self.credentials = credentials
        self._hosts: frozenset[str] = frozenset()

    def listen_on(self, port: int) -> None:
        """The port the server is bound to: the `Host` values accepted from now on."""
        self._hosts = frozenset(f"{name}:{port}" for name in _LOOPBACK_NAMES)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        why = self.refusal(environ)
        if why is not None:
            return _refused(start_response, why)
        return self.app(environ, start_response)

    def refusal(self, environ: dict[str, Any]) -> str | None:
        """Why this request is refused; None when it comes from a local process."""
        if "HTTP_ORIGIN" in environ:
            return "requests from web pages are refused: this endpoint serves the local processes"
        if environ.get("HTTP_HOST", "").lower() not in self._hosts:
            return "this endpoint answers only to its own address (127.0.0.1 or localhost)"
        if environ.get("PATH_INFO", "").startswith("/moto-api"):
            return "moto's control API is not served by the local stack"
        key_id = access_key_id_of(environ) or ""
        expected = self.credentials.access_key_id
        if not hmac.compare_digest(key_id.encode(), expected.encode()):
            return (
                "unknown credentials: sign with the local stack's AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (`waypoint serve` prints them)"
            )
        return None


def _refused(start_response: Callable[..., Any], why: str) -> list[bytes]:
    body = json.dumps({"__type": "UnrecognizedClientException", "message": why}).encode()
    start_response(
        "403 Forbidden",
        [
            ("Content-Type", "application/x-amz-json-1.0"),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),  # its body is left unread: no next request on this socket
        ],
    )
    return [body]
