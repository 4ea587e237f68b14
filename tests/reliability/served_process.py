"""`waypoint serve` as a real process, the way a developer runs it, and a front end that receives
its signed reply callbacks: for tests that kill the process (SIGKILL) and start it again.

The front end keeps every reply it is sent, keyed by reply id and by the message it answers
(`in_reply_to`); like any front end it drops a repeated reply id (the generic channel's documented
re-send after an unconfirmed delivery) but counts it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from infra.channels.signing import constant_time_equals, generic_headers, sign_generic
from tests.channels.signed import GENERIC_SECRET
from tests.functions.conftest import API_KEY

REPO = Path(__file__).resolve().parents[2]
_SERVING = re.compile(r"webhooks\s+(http://\S+?)/webhooks/")
_SCRUBBED_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER")


class FrontEnd:
    """An HTTP server on 127.0.0.1 receiving the generic channel's reply callbacks."""

    def __init__(self) -> None:
        self.replies: dict[str, dict[str, Any]] = {}  # reply id → payload (first copy)
        self.repeats = 0
        self.bad_signatures = 0
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        front_end = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                expected = sign_generic(
                    GENERIC_SECRET, body, self.headers.get("x-waypoint-timestamp", "")
                )
                signature = self.headers.get("x-waypoint-signature", "")
                status = 200 if constant_time_equals(signature, expected) else 401
                if status == 200:
                    front_end._receive(json.loads(body))
                else:
                    front_end.bad_signatures += 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/replies"

    def _receive(self, payload: dict[str, Any]) -> None:
        with self._arrived:
            if payload["id"] in self.replies:
                self.repeats += 1
            else:
                self.replies[payload["id"]] = payload
            self._arrived.notify_all()

    def answers_to(self, event_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.replies.values() if r["in_reply_to"] == event_id]

    def wait_for(
        self,
        event_ids: Sequence[str],
        timeout: float,
        describe: Callable[[Sequence[str]], str] | None = None,
    ) -> None:
        """Until every event id has at least one reply; TimeoutError naming the missing ones
        and, with `describe`, what it says of them (e.g. the served stack's state)."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                answered = {r["in_reply_to"] for r in self.replies.values()}
                missing = [e for e in event_ids if e not in answered]
                if not missing:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    detail = f"\n{describe(missing)}" if describe is not None else ""
                    raise TimeoutError(f"no reply after {timeout:.0f} s to {missing}{detail}")
                self._arrived.wait(left)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class ServedProcess:
    """`python -m waypoint.cli serve --llm offline --port 0 ARGS…` in `cwd`, with the tests' secrets."""

    def __init__(self, args: Sequence[str], *, cwd: Path, cache_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        env.update(
            {
                "WAYPOINT_GENERIC_SECRET": GENERIC_SECRET,
                "WAYPOINT_MANAGEMENT_API_KEY": API_KEY,
                "WAYPOINT_CACHE_DIR": str(cache_dir),
                "PYTHONPATH": str(REPO),
                "COLUMNS": "200",  # one line per printed URL
            }
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "waypoint.cli",
                "serve",
                "--llm",
                "offline",
                "--port",
                "0",
                *args,
            ],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output: list[str] = []
        self.base_url = self._wait_until_serving(timeout=120)
        threading.Thread(target=self._drain, daemon=True).start()
        self._http = httpx.Client(timeout=30)

    def _wait_until_serving(self, timeout: float) -> str:
        assert self.process.stdout is not None
        found: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                match = _SERVING.search(line)
                if match:
                    found.append(match.group(1))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if not found:
            self.kill()
            raise TimeoutError(
                f"`waypoint serve` did not start within {timeout:.0f} s:\n{''.join(self.output)}"
            )
        return found[0]

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def send(self, conversation: str, event_id: str, text: str, callback_url: str) -> int:
        """POST one signed generic-channel message; the status (0: no answer at all)."""
        body = json.dumps(
            {
                "event_id": event_id,
                "conversation_id": conversation,
                "customer_id": f"customer-{conversation}",
                "text": text,
                "callback_url": callback_url,
            }
        ).encode()
        headers = generic_headers(GENERIC_SECRET, body, int(time.time()))
        try:
            response = self._http.post(
                f"{self.base_url}/webhooks/generic", content=body, headers=headers
            )
        except httpx.TransportError:
            return 0
        except RuntimeError:  # the process was killed and its client closed: never sent
            return 0
        return response.status_code

    def wait_for_output(self, text: str, timeout: float = 60) -> str:
        """The output so far once it holds `text` (the lines after the one naming the webhooks
        URL arrive on the drain thread, a moment after the constructor returns)."""
        deadline = time.monotonic() + timeout
        while True:
            output = "".join(self.output)
            if text in output:
                return output
            if time.monotonic() >= deadline or self.process.poll() is not None:
                raise AssertionError(f"{text!r} not printed within {timeout:.0f} s:\n{output}")
            time.sleep(0.05)

    def aws_client(self, service: str) -> Any:
        """A boto3 client of the served stack's moto endpoint (the one it prints for
        `waypoint publish`)."""
        import boto3

        exported = self.exported()
        return boto3.client(
            service,
            endpoint_url=exported["WAYPOINT_AWS_ENDPOINT_URL"],
            region_name=exported["AWS_DEFAULT_REGION"],
            aws_access_key_id=exported["AWS_ACCESS_KEY_ID"],  # the only ones it accepts
            aws_secret_access_key=exported["AWS_SECRET_ACCESS_KEY"],
        )

    def exported(self) -> dict[str, str]:
        """What it prints for `waypoint publish` from another shell (the moto endpoint, the
        queue's URL…), once printed."""
        return dict(re.findall(r"export (\w+)=(\S+)", self.wait_for_output("Ctrl-C to stop")))

    def describe(self, event_ids: Sequence[str], log_lines: int = 60) -> str:
        """For a test that timed out waiting on `event_ids`: whether the process lives, the
        turn queue's counts, every stored item that names one of them, the log's tail."""
        parts = [f"served process: {'running' if self.process.poll() is None else 'exited'}"]
        try:
            sqs = self.aws_client("sqs")
            attributes = sqs.get_queue_attributes(
                QueueUrl=self.exported()["WAYPOINT_QUEUE_URL"], AttributeNames=["All"]
            )["Attributes"]
            counts = {k: v for k, v in attributes.items() if k.startswith("ApproximateNumber")}
            parts.append(f"turn queue: {counts}")
            dynamodb = self.aws_client("dynamodb")
            conversations = {e.rsplit("-", 1)[0] for e in event_ids} | set(event_ids)
            for table in dynamodb.list_tables()["TableNames"]:
                for page in dynamodb.get_paginator("scan").paginate(TableName=table):
                    for item in page["Items"]:
                        text = json.dumps(item, default=str)
                        if any(c in text for c in conversations):
                            parts.append(f"{table}: {text[:600]}")
        except Exception as exc:  # the description must not hide the timeout it explains
            parts.append(f"(stack not readable: {type(exc).__name__}: {exc})")
        parts.append("log tail:\n" + "".join(self.output[-log_lines:]))
        return "\n".join(parts)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        self.process.kill()
        self.process.wait(timeout=30)
        self._close_http()

    def stop(self) -> None:
        """Ctrl-C, as a developer stops it."""
        if self.process.poll() is None:
            self.process.send_signal(2)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self._close_http()

    def _close_http(self) -> None:
        http = getattr(self, "_http", None)
        if http is not None:
            http.close()
