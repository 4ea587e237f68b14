"""The whole deployment in one process, for `waypoint demo | chat | serve`.

- moto's threaded server stands in for DynamoDB, S3 and SQS, with the table, bucket and queues
  created from `template.yaml`;
- the webhook and management Lambda apps are served on one local HTTP port (webhooks under
  `/webhooks/{channel}`, the management API under `/api`), with the studio page at `/`
  (`waypoint.studio`);
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
import errno
import json
import os
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model import AgentSnapshot
from engine.trace import TurnTrace
from waypoint.queue_poller import QueuePoller, queue_records
from waypoint.serve_log import RequestLog, turn_line
from waypoint.turn_progress import ReportingDispatcher, ReportingLLM, TurnProgress

__all__ = [
    "GenericChatClient",
    "LocalServer",
    "PortInUse",
    "QueuePoller",
    "ReplyInbox",
    "listening_socket",
    "port_is_free",
    "queue_records",
]

# Quiet, offline-friendly defaults; anything already set in the environment wins.
LOCAL_DEFAULTS: Mapping[str, str] = {
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_DISABLED": "1",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_SERVICE_NAME": "waypoint-local",
    "POWERTOOLS_METRICS_NAMESPACE": "WaypointLocal",
}


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


class PortInUse(Exception):
    """Another process listens on the port the local HTTP server was to use."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(f"port {port} on {host} is in use")
        self.host = host
        self.port = port


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port for the HTTP server (port 0: any free one); `PortInUse`
    when another process holds it. Bound the way uvicorn binds (SO_REUSEADDR: a port left in
    TIME_WAIT by a stopped server is free, one that is listened on is not)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    bound = socket.socket(family, kind, proto)
    bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        bound.bind(address)
    except OSError as exc:
        bound.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port) from None
        raise
    return bound


def port_is_free(host: str, port: int) -> bool:
    """Whether host:port could be bound now (a look, not a reservation)."""
    try:
        listening_socket(host, port).close()
    except (PortInUse, OSError):
        return False
    return True


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
        secret_digest_key: str | None = None,
        data_dir: Path | None = None,
        log_line: Callable[[str], None] | None = None,
        cors_origins: Sequence[str] = (),
        http_socket: socket.socket | None = None,
        aws_port: int = 0,
        aws_credentials: Any = None,
    ) -> None:
        from functions.management_cors import parse_origins

        self.agent = agent
        # Pages on these origins may call the management API (a studio page served elsewhere);
        # WAYPOINT_CORS_ORIGINS already set counts too, checked now rather than on each request.
        parse_origins(os.environ.get("WAYPOINT_CORS_ORIGINS", ""))
        self.cors_origins = parse_origins(",".join(cors_origins))
        # One line per HTTP request and per turn (`waypoint serve`); None: quiet.
        self.log_line = log_line
        self.progress = TurnProgress()
        self.data_dir = data_dir
        self.tools_module = tools_module
        self.host = host
        self.port = port
        self.management_api_key = management_api_key or secrets.token_urlsafe(24)
        self.generic_secret = generic_secret or secrets.token_urlsafe(24)
        # The key of the digests sessions keep of their secrets (engine.privacy.digests); `serve`
        # keeps it with the data: a new one would not recognise the stored sessions' secrets.
        self.secret_digest_key = secret_digest_key or secrets.token_hex(32)
        self.replies = ReplyInbox(self.generic_secret)
        # The HTTP port, bound before anything else starts (`listening_socket`): a port in use
        # fails at once, with nothing started or written. Given by `serve`, which binds it even
        # before its data directory is made.
        self._socket = http_socket
        # The local AWS endpoint's port and credentials (moto_access.LocalCredentials): `serve`
        # keeps them across restarts, so the exports it printed stay valid; else new ones.
        self.aws_port = aws_port
        self.aws_credentials = aws_credentials
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

        if self._socket is None:
            self._socket = listening_socket(self.host, self.port)
        self.port = self._socket.getsockname()[1]
        env = {**LOCAL_DEFAULTS, **{k: v for k, v in os.environ.items() if k in LOCAL_DEFAULTS}}
        env.update(
            {
                "WAYPOINT_AGENT_ID": self.agent.id,
                "WAYPOINT_GENERIC_SECRET": self.generic_secret,
                # Replies go to this server's own inbox: its host, allowed explicitly (an IP
                # literal is the one way to allow a loopback callback; infra.channels.callbacks).
                "WAYPOINT_CALLBACK_HOSTS": self.host,
                "WAYPOINT_MANAGEMENT_API_KEY": self.management_api_key,
                "WAYPOINT_SECRET_DIGEST_KEY": self.secret_digest_key,
            }
        )
        if self.tools_module:
            env["WAYPOINT_TOOLS_MODULE"] = self.tools_module
        if self.cors_origins:
            env["WAYPOINT_CORS_ORIGINS"] = ",".join(self.cors_origins)
        self._set_env(env)
        self.stack = LocalStack(
            server=True,
            data_dir=self.data_dir,
            port=self.aws_port,
            credentials=self.aws_credentials,
        )
        self.stack.start()
        self.stack.create_resources()
        reset_runtime()
        runtime = current_runtime()
        self._instrument(runtime)
        if not self._already_published(runtime):
            runtime.run(runtime.publish_agent(self.agent))
        if self.stack.restored:  # the process that was sending them is gone
            runtime.run(runtime.outbox.release_leases_of_a_stopped_process())
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
        from engine.memory.stores import versioned
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
        from engine.memory.stores import versioned

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
        elif self._socket is not None:  # bound, never served: the port is free again
            self._socket.close()
        self._socket = None  # uvicorn closed the one it served
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
        from waypoint.studio import studio_routes

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
                *studio_routes(),  # the page at `/` (waypoint/studio), reading `/api`
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
        sockets = [self._socket] if self._socket is not None else None
        self._http_thread = threading.Thread(
            target=self._http.run, kwargs={"sockets": sockets}, name="waypoint-http", daemon=True
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
        from infra.turn_queue import session_id_for

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
