"""The whole deployment in one process, for `waypoint demo | chat | serve`.

- moto's threaded server stands in for DynamoDB, S3 and SQS, with the table, bucket and queues
  created from `template.yaml`;
- the webhook and management Lambda apps are served on one local HTTP port (webhooks under
  `/webhooks/{channel}`, the management API under `/api`);
- a poller does what Lambda's SQS event source mapping does: it receives batches from the FIFO
  turn queue, invokes `functions.worker.handler` with the same event shape, deletes what
  succeeded and lets failed records come back;
- `/local/replies` receives the generic channel's signed reply callbacks, for a front end
  running on this machine (the demo's customer);
- with `data_dir`, the stack's state (sessions, agent versions, queued and in-flight messages)
  is kept in that directory and comes back on the next start (`infra.aws.moto_persistence`).

The same handlers, runtime, stores and channel code run here as in a deployment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model import AgentSnapshot
from engine.trace import TraceTitles, TurnTrace
from waypoint.turn_progress import ReportingDispatcher, ReportingLLM, TurnProgress

log = logging.getLogger("waypoint.local")

# Quiet, offline-friendly defaults; anything already set in the environment wins.
LOCAL_DEFAULTS: Mapping[str, str] = {
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_DISABLED": "1",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_SERVICE_NAME": "waypoint-local",
    "POWERTOOLS_METRICS_NAMESPACE": "WaypointLocal",
}


def queue_records(messages: Sequence[Mapping[str, Any]], queue_arn: str) -> list[dict[str, Any]]:
    """Lambda event records for messages received from an SQS FIFO queue, built the way the SQS
    event source mapping builds them."""
    records = []
    for message in messages:
        attributes = dict(message.get("Attributes", {}))
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": {
                    "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
                    "SentTimestamp": attributes.get("SentTimestamp", "0"),
                    "SequenceNumber": attributes.get("SequenceNumber", "0"),
                    "MessageGroupId": attributes["MessageGroupId"],
                    "SenderId": attributes.get("SenderId", "AIDAEXAMPLE"),
                    "MessageDeduplicationId": attributes.get("MessageDeduplicationId", ""),
                    "ApproximateFirstReceiveTimestamp": attributes.get(
                        "ApproximateFirstReceiveTimestamp", "0"
                    ),
                },
                "messageAttributes": {},
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            }
        )
    return records


class QueuePoller(threading.Thread):
    """Lambda's SQS event source mapping, locally: batches → worker handler → delete successes.
    Failed records become visible again after `retry_after` seconds and are retried."""

    def __init__(self, sqs: Any, queue_url: str, *, batch_size: int = 10, retry_after: int = 1):
        super().__init__(name="waypoint-queue-poller", daemon=True)
        self.sqs = sqs
        self.queue_url = queue_url
        self.batch_size = batch_size
        self.retry_after = retry_after
        self.batches = 0
        self.failed_records = 0
        # Why records of a message group (a session) failed, oldest first: `waypoint chat` tells
        # the customer's side in one line instead of waiting on a turn that keeps failing.
        self.failures: dict[str, list[str]] = {}
        self.on_turns: Any = None  # called with the sessions whose turns succeeded in a batch
        # Held while a batch is handled: whoever changes the runtime (a republish) waits for it.
        self.busy = threading.Lock()
        self._stop_event = threading.Event()
        arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
        self.queue_arn = arn["Attributes"]["QueueArn"]

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.poll_once(wait_seconds=1)
            except Exception:  # keep polling: the next batch may succeed (and the demo says so)
                log.exception("local worker invocation failed")
                time.sleep(0.5)

    def poll_once(self, wait_seconds: int = 0) -> int:
        """Receive one batch and invoke the worker on it; returns the number of records."""
        from functions import worker
        from infra.aws.lambda_routing import LocalLambdaContext

        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            AttributeNames=["All"],
            WaitTimeSeconds=wait_seconds,
        ).get("Messages", [])
        if not messages:
            return 0
        event = {"Records": queue_records(messages, self.queue_arn)}
        with self.busy:
            try:
                response = worker.handler(event, LocalLambdaContext("waypoint-local-worker"))
            except Exception as exc:  # the whole invocation failed: every record comes back
                self._record_invocation_failure(messages, exc)
                self._retry_soon(messages)
                raise
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        self.batches += 1
        self.failed_records += len(failed)
        self._record_failures(messages, failed, worker.processor)
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                ],
            )
        self._retry_soon([m for m in messages if m["MessageId"] in failed])
        if self.on_turns is not None and done:
            self.on_turns(sorted({m["Attributes"]["MessageGroupId"] for m in done}))
        return len(messages)

    def _record_failures(
        self, messages: Sequence[Mapping[str, Any]], failed: set[str], processor: Any
    ) -> None:
        """Keep, per session, why each failed record failed (the worker's own exception)."""
        from waypoint.agent_source import failure_summary

        reasons: dict[str, str] = {}
        for record, info in zip(processor.fail_messages, processor.exceptions, strict=False):
            message_id = getattr(record, "message_id", None) or dict(record).get("messageId")
            if message_id and info and info[1] is not None:
                reasons[str(message_id)] = failure_summary(info[1])
        for m in messages:
            if m["MessageId"] in failed:
                group = m["Attributes"]["MessageGroupId"]
                reason = reasons.get(m["MessageId"], "the turn worker failed")
                self.failures.setdefault(group, []).append(reason)

    def _retry_soon(self, messages: Sequence[Mapping[str, Any]]) -> None:
        for m in messages:
            self.sqs.change_message_visibility(
                QueueUrl=self.queue_url,
                ReceiptHandle=m["ReceiptHandle"],
                VisibilityTimeout=self.retry_after,
            )

    def _record_invocation_failure(
        self, messages: Sequence[Mapping[str, Any]], exc: Exception
    ) -> None:
        from waypoint.agent_source import failure_summary

        for m in messages:
            group = m["Attributes"]["MessageGroupId"]
            self.failures.setdefault(group, []).append(failure_summary(exc))

    def failures_of(self, session_id: str) -> list[str]:
        return list(self.failures.get(session_id, ()))


@dataclass
class ReplyInbox:
    """Replies the generic channel POSTs back (signed), per conversation."""

    secret: str
    _queues: dict[str, queue.Queue[dict[str, Any]]] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _queue(self, conversation_id: str) -> queue.Queue[dict[str, Any]]:
        with self._lock:
            return self._queues.setdefault(conversation_id, queue.Queue())

    def put(self, payload: dict[str, Any]) -> bool:
        """Queue a reply; False (and nothing queued) when its `id` was already received — the
        worker re-sends a reply whose delivery it could not confirm (a timeout, say)."""
        reply_id = payload.get("id")
        if isinstance(reply_id, str) and reply_id:
            with self._lock:
                if reply_id in self._seen:
                    return False
                self._seen.add(reply_id)
        self._queue(str(payload.get("conversation_id"))).put(payload)
        return True

    def poll(self, conversation_id: str, timeout: float) -> dict[str, Any] | None:
        """The next reply to a conversation, or None if none came within `timeout`."""
        try:
            return self._queue(conversation_id).get(timeout=timeout)
        except queue.Empty:
            return None

    def wait(self, conversation_id: str, timeout: float) -> dict[str, Any]:
        """The next reply to a conversation; raises TimeoutError with what to check."""
        try:
            return self._queue(conversation_id).get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(
                f"no reply within {timeout:.0f} s; the worker's log above says why"
            ) from None


class LocalServer:
    """Start with `start()` (or as a context manager); see the module docstring."""

    def __init__(
        self,
        agent: AgentSnapshot,
        *,
        tools_module: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        management_api_key: str | None = None,
        generic_secret: str | None = None,
        data_dir: Path | None = None,
        log_line: Callable[[str], None] | None = None,
    ) -> None:
        self.agent = agent
        # One line per HTTP request and per turn (`waypoint serve`); None: quiet.
        self.log_line = log_line
        self.progress = TurnProgress()
        self.data_dir = data_dir
        self.tools_module = tools_module
        self.host = host
        self.port = port
        self.management_api_key = management_api_key or secrets.token_urlsafe(24)
        self.generic_secret = generic_secret or secrets.token_urlsafe(24)
        self.replies = ReplyInbox(self.generic_secret)
        self.stack: Any = None
        self.poller: QueuePoller | None = None
        self._http: Any = None
        self._http_thread: threading.Thread | None = None
        self._saved_env: dict[str, str | None] = {}

    # ---- lifecycle

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        from infra.aws.local_stack import LocalStack
        from infra.runtime import current_runtime, reset_runtime

        env = {**LOCAL_DEFAULTS, **{k: v for k, v in os.environ.items() if k in LOCAL_DEFAULTS}}
        env.update(
            {
                "WAYPOINT_AGENT_ID": self.agent.id,
                "WAYPOINT_GENERIC_SECRET": self.generic_secret,
                # Replies go to this server's own inbox: its host, allowed explicitly (an IP
                # literal is the one way to allow a loopback callback; infra.channels.callbacks).
                "WAYPOINT_CALLBACK_HOSTS": self.host,
                "WAYPOINT_MANAGEMENT_API_KEY": self.management_api_key,
            }
        )
        if self.tools_module:
            env["WAYPOINT_TOOLS_MODULE"] = self.tools_module
        self._set_env(env)
        self.stack = LocalStack(server=True, data_dir=self.data_dir)
        self.stack.start()
        self.stack.create_resources()
        reset_runtime()
        runtime = current_runtime()
        self._instrument(runtime)
        if not self._already_published(runtime):
            runtime.run(runtime.publish_agent(self.agent))
        self._start_http()
        self.poller = QueuePoller(self.stack.client("sqs"), self.stack.queue_url)
        if self.log_line is not None:
            self.poller.on_turns = self._log_turns
        self.poller.start()

    def _instrument(self, runtime: Any) -> None:
        """The runtime's model and tools, reporting the turn's stage to `self.progress`. Set the
        way `Runtime(llm=…, tools=…)` sets its parts; the engine is rebuilt on its next use."""
        runtime.__dict__["llm"] = ReportingLLM(runtime.llm, self.progress)
        tools = runtime.tools
        if tools is not None:
            runtime.__dict__["tools"] = ReportingDispatcher(tools, self.progress)
        runtime.__dict__.pop("engine", None)

    def republish(self, agent: AgentSnapshot, tools_module: str | None) -> str:
        """Publish an edited agent (and use its reloaded tools module) on the running stack;
        returns the new version. Call between turns (`waypoint chat`'s /reload)."""
        from engine.memory import versioned
        from infra.runtime import current_runtime

        with self.poller.busy if self.poller is not None else contextlib.nullcontext():
            if tools_module:
                self._set_env({"WAYPOINT_TOOLS_MODULE": tools_module})
            runtime = current_runtime()
            runtime.settings = type(runtime.settings).from_env()
            for part in ("tools", "llm", "engine"):
                runtime.__dict__.pop(part, None)
            self._instrument(runtime)
            runtime.run(runtime.publish_agent(agent))
            self.agent = agent
        return versioned(agent).version

    def _already_published(self, runtime: Any) -> bool:
        """On a restored stack, an agent version stored before is not published again: a newer
        version published to the running stack (`waypoint publish`) stays the published one."""
        from engine.memory import versioned

        if not self.stack.restored:
            return False
        version = versioned(self.agent).version
        return version in runtime.run(runtime.agents.versions(self.agent.id))

    def stop(self) -> None:
        from infra.runtime import reset_runtime

        if self.poller is not None:
            self.poller.stop()
            self.poller.join(timeout=5)
        if self._http is not None:
            self._http.should_exit = True
            if self._http_thread is not None:
                self._http_thread.join(timeout=5)
        reset_runtime()
        if self.stack is not None:
            self.stack.stop()
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _set_env(self, values: Mapping[str, str]) -> None:
        for name, value in values.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            os.environ[name] = value

    # ---- HTTP

    def asgi_app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Mount, Route

        from functions import management, webhook
        from infra.channels.signing import constant_time_equals, sign_generic

        async def local_replies(request: Request) -> JSONResponse:
            body = await request.body()
            timestamp = request.headers.get("x-waypoint-timestamp", "")
            signature = request.headers.get("x-waypoint-signature", "")
            expected = sign_generic(self.generic_secret, body, timestamp)
            if not constant_time_equals(signature, expected):
                return JSONResponse({"error": "bad signature"}, status_code=401)
            payload = json.loads(body)
            new = self.replies.put(payload)
            return JSONResponse({"id": str(payload.get("id") or ""), "duplicate": not new})

        app = Starlette(
            routes=[
                Route("/local/replies", local_replies, methods=["POST"]),
                Mount("/api", app=management.app),
                Mount("/", app=webhook.app),
            ]
        )
        if self.log_line is None:
            return app
        return RequestLog(app, self.log_line, api_turns=self._log_turns)

    def _start_http(self) -> None:
        import uvicorn

        config = uvicorn.Config(
            self.asgi_app(), host=self.host, port=self.port, log_level="warning", lifespan="off"
        )
        self._http = uvicorn.Server(config)
        self._http_thread = threading.Thread(
            target=self._http.run, name="waypoint-http", daemon=True
        )
        self._http_thread.start()
        deadline = time.monotonic() + 10
        while not self._http.started:
            if time.monotonic() > deadline or not self._http_thread.is_alive():
                raise RuntimeError(
                    f"the local HTTP server did not start on {self.host}:{self.port}"
                )
            time.sleep(0.02)
        self.port = self._http.servers[0].sockets[0].getsockname()[1]

    # ---- what clients need

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def webhook_url(self, channel: str) -> str:
        return f"{self.base_url}/webhooks/{channel}"

    @property
    def replies_url(self) -> str:
        return f"{self.base_url}/local/replies"

    def client_env(self) -> dict[str, str]:
        """What `waypoint publish` (or boto3) needs to talk to this stack from another shell."""
        keys = ("WAYPOINT_AWS_ENDPOINT_URL", "WAYPOINT_TABLE", "WAYPOINT_BUCKET",
                "WAYPOINT_QUEUE_URL", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY")  # fmt: skip
        return {k: os.environ[k] for k in keys if k in os.environ}

    def _log_turns(self, session_ids: Sequence[str]) -> None:
        """One line per session whose turn the worker just finished (`waypoint serve`)."""
        assert self.log_line is not None
        for session_id in session_ids:
            try:
                trace = self.trace_of_last_turn(session_id)
            except Exception as exc:  # a log line must never stop the worker
                self.log_line(f"turn    {session_id}: trace unreadable ({exc})")
                continue
            if trace is not None:
                self.log_line(turn_line(trace, self.agent))

    def trace_of_last_turn(self, session_id: str) -> TurnTrace | None:
        """The trace of the newest turn of a session (for the demo's per-turn summary)."""
        from infra.runtime import current_runtime

        # The runtime's loop belongs to the queue poller; the stores are loop-agnostic.
        sessions = current_runtime().sessions
        session = asyncio.run(sessions.load(session_id))
        turn_ids = [e.turn_id for e in session.events if e.turn_id] if session else []
        if not turn_ids:
            return None
        raw = asyncio.run(sessions.trace(session_id, turn_ids[-1]))
        return TurnTrace.model_validate(raw) if raw else None


def turn_line(trace: TurnTrace, agent: AgentSnapshot | None = None) -> str:
    """`turn <session> version <v> matched=[…] tools=[…] <ms> ms`: one finished turn, its
    guidelines and journeys by title."""
    names = TraceTitles(agent)
    matched = [names.guideline(m.guideline_id) for m in trace.matches if m.matched]
    tools = [f"{c.tool}:{c.status}" for c in trace.tool_calls]
    ms = sum(s.ms for s in trace.stages)
    return (
        f"turn    {trace.session_id} version {trace.agent_version} "
        f"matched=[{', '.join(matched)}] tools=[{', '.join(tools)}] {ms:.0f} ms"
    )


class RequestLog:
    """ASGI middleware: `METHOD path status ms`, one line per HTTP request (`waypoint serve`).
    The query string is left out: it may carry a token."""

    def __init__(
        self,
        app: Any,
        log_line: Callable[[str], None],
        *,
        api_turns: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.app = app
        self.log_line = log_line
        self.api_turns = api_turns  # logs the turn a management API call ran, by session

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client sees when the app raises before answering

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            ms = (time.perf_counter() - started) * 1000
            self.log_line(f"request {scope['method']} {scope['path']} {status} {ms:.0f} ms")
        ran = _API_TURN.fullmatch(scope["path"])
        if ran and status == 200 and scope["method"] == "POST" and self.api_turns is not None:
            # a turn the management API ran in the request (not queued: that one is 202)
            await asyncio.to_thread(self.api_turns, [ran["session"]])


# POST /api/sessions/{session}/messages or …/interrupts/{call}: answered with a turn's reply
_API_TURN = re.compile(r"/api/sessions/(?P<session>[^/]+)/(?:messages|interrupts/[^/]+)")


class GenericChatClient:
    """A customer on the generic channel: signed webhook requests in, signed callbacks out."""

    def __init__(self, server: LocalServer, conversation_id: str, customer_id: str) -> None:
        import httpx

        self.server = server
        self.conversation_id = conversation_id
        self.customer_id = customer_id
        self._http = httpx.Client(timeout=30)
        self._n = 0

    def send(self, text: str, *, choice: str | None = None, timeout: float = 60) -> dict[str, Any]:
        """Post one message through the webhook and wait for the agent's reply."""
        self.post(text, choice=choice)
        return self.server.replies.wait(self.conversation_id, timeout)

    def post(self, text: str, *, choice: str | None = None) -> None:
        """Post one message through the webhook (the reply comes to `server.replies`)."""
        from infra.channels.signing import generic_headers

        self._n += 1
        payload = {
            "event_id": f"{self.conversation_id}-{self._n}-{secrets.token_hex(4)}",
            "conversation_id": self.conversation_id,
            "customer_id": self.customer_id,
            "text": text,
            "callback_url": self.server.replies_url,
            **({"choice": choice} if choice else {}),
        }
        body = json.dumps(payload).encode()
        headers = generic_headers(self.server.generic_secret, body, int(time.time()))
        response = self._http.post(
            self.server.webhook_url("generic"), content=body, headers=headers
        )
        if response.status_code != 200:
            raise RuntimeError(f"webhook answered {response.status_code}: {response.text[:200]}")

    @property
    def session_id(self) -> str:
        from infra.runtime import session_id_for

        # The generic channel's conversation key (infra/channels/generic.py).
        return session_id_for(self.server.agent.id, "generic", f"generic:{self.conversation_id}")

    def close(self) -> None:
        self._http.close()


@contextlib.contextmanager
def local_server(agent: AgentSnapshot, **kwargs: Any) -> Iterator[LocalServer]:
    server = LocalServer(agent, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
