"""The cold turn through the real worker handler: what a customer waits for on a cold container.

`measure_cold_handler` runs `bench.cold_worker` in fresh processes, each a cold Lambda container
of the turn worker (`functions.worker.handler`), against what this process serves:

- a threaded moto server with the published banking agent (DynamoDB, S3, the SQS FIFO queue the
  events are received from, as the event source mapping receives them);
- a fake OpenAI-compatible server (`tests.fakes.openai_server`) answering every chat completion
  with the benchmark's prompt-reading fake (`bench.fake_llm`, zero latency) and every embedding
  request with its deterministic vectors: the real `openai` client, imported and connected in
  the worker, talks to it over HTTP. Its own time is the model time, reported apart: the union of
  the intervals in which it was busy with a request during the invocation;
- the generic channel's callback receiver, where the worker POSTs the signed reply.

Reported: Lambda's init phase (the import of `functions.worker`, and what it runs at import) and
the first invocation, the model time left out; then warm turns' CPU with and without the init
phase's `gc.freeze()` (each full garbage-collection pass timed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.lambda_package import refused_env
from bench.results import ColdHandlerRow
from bench.stats import median, p95

Progress = Callable[[str], None]
ROOT = Path(__file__).resolve().parents[1]

AGENT_ID = "bank"
# The first is the cold turn's message (the engine-path cold turn's too); the warm turns cycle.
MESSAGES = (
    "What is the price of Apple stock?",
    "I want to check my balance",
    "Hi, what can you do?",
    "How much is Microsoft trading at?",
)
GENERIC_SECRET = "bench-generic-secret-0123456789abcdef"
DIGEST_KEY = "bench-secret-digest-key-0123456789abcdef"
FUNCTION_NAME = "waypoint-bench-worker"


@dataclass
class ColdHandlerRun:
    """One fresh worker process (ms)."""

    init_ms: float
    invoke_ms: float
    model_ms: float  # the fake model server's busy time during the invocation
    init_cpu_ms: float  # this process's CPU in each (the model server's is another process's)
    invoke_cpu_ms: float
    frozen_objects: int
    modules_in_invocation: int
    openai_in_invocation: bool
    warm_cpu_ms: list[float] = field(default_factory=list)
    full_gc_ms: list[float] = field(default_factory=list)
    full_pass_ms: float = 0.0

    @property
    def first_turn_ms(self) -> float:
        return self.invoke_ms - self.model_ms


class BusyTimer:
    """The intervals in which a server was handling a request (perf_counter, CLOCK_MONOTONIC:
    comparable with another process's on the same machine)."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def add(self, start: float, end: float) -> None:
        with self._lock:
            self.intervals.append((start, end))

    def busy_ms(self, start: float, end: float) -> float:
        """How long, within [start, end], at least one request was being handled."""
        with self._lock:
            clipped = sorted((max(a, start), min(b, end)) for a, b in self.intervals)
        total, reach = 0.0, start
        for a, b in clipped:
            if b <= max(a, reach):  # outside the window, or already counted
                continue
            total += b - max(a, reach)
            reach = b
        return total * 1000


@contextmanager
def model_server() -> Iterator[tuple[str, BusyTimer]]:
    """The fake OpenAI-compatible server, answering like `bench.fake_llm`, its busy time timed."""
    from bench.fake_llm import ANSWERS
    from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, Reply

    timer = BusyTimer()

    class TimedServer(FakeOpenAIServer):
        def _app(self) -> Any:
            app = super()._app()

            @app.middleware("http")
            async def timed(request: Any, call_next: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await call_next(request)
                finally:
                    timer.add(started, time.perf_counter())

            return app

    def answer(request: RecordedRequest) -> Reply:
        schema = request.response_format["json_schema"]["name"]
        return Reply(ANSWERS[schema](request.prompt), prompt_tokens=len(request.prompt) // 4)

    with TimedServer() as server:
        server.answer_chat_with(answer)
        yield server.base_url, timer


class _Callbacks(BaseHTTPRequestHandler):
    """The generic channel's callback URL: accepts every reply, counts them."""

    received = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).received += 1
        body = json.dumps({"id": f"r{type(self).received}"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def callback_receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Callbacks)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/replies"
    finally:
        server.shutdown()
        server.server_close()


def _queued(session_id: str, n: int, text: str, callback_url: str) -> Any:
    from infra.channels.base import NormalizedMessage
    from infra.turn_queue import QueuedMessage

    conversation = session_id
    return QueuedMessage(
        session_id=session_id,
        agent_id=AGENT_ID,
        message=NormalizedMessage(
            channel="generic",
            account_id="generic",
            event_id=f"{session_id}-m{n}",
            conversation_key=f"generic:{conversation}",
            customer_id=f"c-{session_id}",
            text=text,
            reply_to={
                "conversation_id": conversation,
                "event_id": f"{session_id}-m{n}",
                "callback_url": callback_url,
            },
            raw_type="message",
            received_at=datetime.now(UTC),
        ),
    )


def sqs_events(runtime: Any, prefix: str, turns: int, callback_url: str) -> list[dict[str, Any]]:
    """One SQS event per turn, each a new session's first message (created as the webhook
    creates it), sent to the moto FIFO queue and received from it as the event source mapping
    does (`waypoint.queue_poller.queue_records`)."""
    from engine.sessions.session import SessionState
    from waypoint.queue_poller import queue_records

    sent: dict[str, str] = {}
    for n in range(turns):
        session_id = f"{prefix}-s{n}"
        queued = _queued(session_id, n, MESSAGES[n % len(MESSAGES)], callback_url)
        runtime.run(
            runtime.sessions.create(
                SessionState(
                    id=session_id,
                    agent_id=AGENT_ID,
                    customer_id=queued.message.customer_id,
                    channel="generic",
                )
            )
        )
        sent[runtime.enqueue(queued)] = session_id
    received: dict[str, dict[str, Any]] = {}
    while len(received) < len(sent):
        batch = runtime.sqs.receive_message(
            QueueUrl=runtime.queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            WaitTimeSeconds=1,
        ).get("Messages", [])
        received.update((m["MessageId"], m) for m in batch if m["MessageId"] in sent)
    arn = "arn:aws:sqs:us-east-1:123456789012:" + runtime.queue_url.rsplit("/", 1)[-1]
    ordered = [received[message_id] for message_id in sent]  # sending order
    return [{"Records": queue_records([message], arn)} for message in ordered]


def _publish(base_url: str) -> Any:
    from examples import banking
    from infra.llm.openai_embedder import OpenAIEmbedder
    from infra.runtime import Runtime

    embedder = OpenAIEmbedder(base_url=base_url, api_key="sk-bench")
    runtime = Runtime(embedder=embedder)
    runtime.run(runtime.publish_agent(banking.load()))
    return runtime


def worker_env(stack_env: dict[str, str], base_url: str, cache: str) -> dict[str, str]:
    """A Lambda container's environment for the worker, pointed at the local servers."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(stack_env)
    env.update(
        {
            "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
            "AWS_LAMBDA_FUNCTION_NAME": FUNCTION_NAME,
            "WAYPOINT_AWS_CALL_BUDGET": "worker",
            "OPENAI_API_KEY": "sk-bench",
            "OPENAI_BASE_URL": base_url,
            "WAYPOINT_AGENT_ID": AGENT_ID,
            "WAYPOINT_TOOLS_MODULE": "examples.banking.tools",
            "WAYPOINT_GENERIC_SECRET": GENERIC_SECRET,
            "WAYPOINT_CALLBACK_HOSTS": "127.0.0.1",
            "WAYPOINT_SECRET_DIGEST_KEY": DIGEST_KEY,
            "WAYPOINT_CACHE_DIR": cache,
            "POWERTOOLS_SERVICE_NAME": "waypoint-worker",
            # Lambda's level, whatever the caller's environment says: a CLI command run in the
            # same process earlier (`waypoint serve`'s quiet default) would otherwise hide the
            # init's error lines the tests read.
            "POWERTOOLS_LOG_LEVEL": "INFO",
        }
    )
    env.update(refused_env())  # only what the Lambda layer ships (bench.lambda_package)
    for name in ("WAYPOINT_LLM_PROVIDER", "WAYPOINT_XRAY_SDK", "WAYPOINT_REPLY_PER_MESSAGE"):
        env.pop(name, None)
    return env


def run_cold_worker(
    events: Sequence[dict[str, Any]], env: dict[str, str], timer: BusyTimer, *, unfrozen: bool
) -> ColdHandlerRun:
    """One fresh worker process over `events`; its JSON line read back."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(list(events), file)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.cold_worker", file.name]
            + (["--unfrozen"] if unfrozen else []),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        os.unlink(file.name)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise RuntimeError(last[:300])
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return ColdHandlerRun(
        init_ms=out["init_ms"],
        invoke_ms=out["invoke_ms"],
        model_ms=timer.busy_ms(out["invoked_at"], out["invoke_done_at"]),
        init_cpu_ms=out["init_cpu_ms"],
        invoke_cpu_ms=out["invoke_cpu_ms"],
        frozen_objects=out["frozen_objects"],
        modules_in_invocation=out["modules_in_invocation"],
        openai_in_invocation=out["openai_in_invocation"],
        warm_cpu_ms=out["warm_cpu_ms"],
        full_gc_ms=out["full_gc_ms"],
        full_pass_ms=out["full_pass_ms"],
    )


@dataclass
class ColdHandlerResult:
    frozen: list[ColdHandlerRun]
    unfrozen: list[ColdHandlerRun]


def measure_cold_handler(
    runs: int, warm_turns: int, progress: Progress, *, warmup: bool = True
) -> ColdHandlerResult:
    """`runs` cold containers with the init phase's `gc.freeze()`, and `runs` without it (after
    the cold invocation, for the warm turns' CPU), interleaved; one unmeasured warm-up first."""
    from infra.aws.local_stack import LocalStack

    frozen: list[ColdHandlerRun] = []
    unfrozen: list[ColdHandlerRun] = []
    with (
        LocalStack(server=True) as stack,
        model_server() as (base_url, timer),
        callback_receiver() as callback_url,
    ):
        runtime = _publish(base_url)
        try:
            plan = [("warm-up", False)] if warmup else []
            for n in range(runs):
                plan += [(f"f{n}", False), (f"u{n}", True)]
            for label, without_freeze in plan:
                events = sqs_events(runtime, f"cold-{label}", 1 + warm_turns, callback_url)
                with tempfile.TemporaryDirectory(prefix="waypoint-cold-") as cache:
                    env = worker_env(dict(stack.env), base_url, cache)
                    run = run_cold_worker(events, env, timer, unfrozen=without_freeze)
                if label == "warm-up":
                    continue
                (unfrozen if without_freeze else frozen).append(run)
                progress(
                    f"cold worker {label}: init {run.init_ms:.0f} ms, first invocation "
                    f"{run.invoke_ms:.0f} ms (model {run.model_ms:.0f} ms); CPU "
                    f"{run.init_cpu_ms:.0f} + {run.invoke_cpu_ms:.0f} ms"
                )
        finally:
            runtime.close()
    return ColdHandlerResult(frozen, unfrozen)


def handler_row(result: ColdHandlerResult, warm_turns: int) -> ColdHandlerRow:
    """Medians of the cold runs (with the freeze, as deployed); the warm turns' CPU of every
    container, with and without it."""
    runs = result.frozen

    def pooled(
        runs: list[ColdHandlerRun], pick: Callable[[ColdHandlerRun], list[float]]
    ) -> list[float]:
        return [value for run in runs for value in pick(run)] or [0.0]

    frozen_cpu = pooled(result.frozen, lambda r: r.warm_cpu_ms)
    unfrozen_cpu = pooled(result.unfrozen, lambda r: r.warm_cpu_ms)
    return ColdHandlerRow(
        runs=len(runs),
        init_ms=median(r.init_ms for r in runs),
        invocation_ms=median(r.invoke_ms for r in runs),
        model_ms=median(r.model_ms for r in runs),
        total_ms=median(r.init_ms + r.first_turn_ms for r in runs),
        init_cpu_ms=median(r.init_cpu_ms for r in runs),
        invocation_cpu_ms=median(r.invoke_cpu_ms for r in runs),
        openai_in_invocation=any(r.openai_in_invocation for r in runs),
        warm_turns=warm_turns,
        turn_cpu_p50_ms=median(frozen_cpu),
        turn_cpu_p95_ms=p95(frozen_cpu),
        unfrozen_turn_cpu_p50_ms=median(unfrozen_cpu),
        unfrozen_turn_cpu_p95_ms=p95(unfrozen_cpu),
        full_pass_ms=median(r.full_pass_ms for r in result.frozen),
        unfrozen_full_pass_ms=median(r.full_pass_ms for r in result.unfrozen),
        full_collections=sum(len(r.full_gc_ms) for r in result.frozen),
        unfrozen_full_collections=sum(len(r.full_gc_ms) for r in result.unfrozen),
    )


if __name__ == "__main__":
    warm = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    measured = measure_cold_handler(
        int(sys.argv[1]) if len(sys.argv) > 1 else 3,
        warm,
        lambda line: print(line, file=sys.stderr),
    )
    print(json.dumps(asdict(handler_row(measured, warm)), indent=1))
