"""Load with faults through the served stack over real HTTP: many concurrent conversations with
the banking concierge on the generic channel (signed webhooks in, signed callbacks out), the
offline model, and faults injected at random — LLM calls failing (and some crashing the turn),
reply callbacks answering 503, workers dying right after the commit, the channel re-sending
webhooks.

Customers type in bursts (they do not wait for each reply). Both reply modes run: with
`WAYPOINT_REPLY_PER_MESSAGE=1` every message is its own turn and gets exactly one reply; by
default the worker answers the messages a session has queued together, one reply per burst.
Asserted for every session:

- every message is stored exactly once, in the order it was sent;
- per-message mode: as many turns as messages;
- every turn holding customer messages has exactly one agent reply, delivered exactly once, in
  turn order, naming the burst's last message (`in_reply_to`);
- journey paths are consistent: each recorded transition starts where the previous one ended
  (at a turn's start, where the session stored it), the stored path is where the last one ended,
  compacted as a session stores it, and every step the transitions took follows an edge of the
  journey;
- nothing is left on the turn queue or its dead-letter queue.

The default run is small (10 sessions × 5 messages); `make soak` runs 100 × 10 in both modes.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.blocks import read_block, update_block
from bench.document import DOC as BENCHMARKS_DOC
from bench.document import LOAD_BLOCK, LOAD_HEADING
from engine.matching.journey_graph import Path as JourneyPath
from engine.matching.journey_graph import compact_path
from engine.model import AgentSnapshot, NodeKind
from engine.sessions.session import Event, EventKind, EventSource, SessionState
from examples.banking import bank
from examples.banking import load as load_bank
from tests.reliability.faults import record_llm_backoff
from tests.reliability.served_stack import Faults, ServedStack

pytestmark = pytest.mark.long(50)  # about that many seconds: scheduled first (tests/conftest.py)

SCRIPTS = (
    (
        "hi",
        "what is the price of AAPL",
        "apple",
        "thanks",
        "what is the price of MSFT",
        "microsoft",
        "what is the price of NVDA",
        "nvidia",
        "thanks",
        "bye",
    ),
    (
        "hello",
        "I want to log in",
        "seldo",
        "monkey",
        "what is my balance",
        "checking",
        "thanks",
        "I want to log in",
        "seldo",
        "bye",
    ),
    (
        "I want to transfer money",
        "seldo",
        "monkey",
        "checking",
        "1234324",
        "5",
        "thanks",
        "hi",
        "what is the price of AMZN",
        "amazon",
    ),
)
FAULTS = Faults(llm=0.05, llm_crash_share=0.1, delivery=0.1, crash_after_commit=0.03, seed=8)
GENERIC_PREFIX = "generic:generic:"  # channel and account in the engine's event ids


@dataclass(frozen=True)
class LoadShape:
    sessions: int
    messages: int
    duplicate_rate: float = 0.1  # the channel re-sends a webhook it already delivered
    think_seconds: float = 0.05  # up to this long between a customer's messages
    timeout: float = 120.0


SMALL = LoadShape(sessions=10, messages=5)
SOAK = LoadShape(sessions=100, messages=10, timeout=1500.0)


@dataclass
class Conversation:
    id: str
    texts: Sequence[str]
    sent: list[tuple[str, float]] = field(default_factory=list)  # (event id, when)


@dataclass
class LoadReport:
    messages: int
    turns: int
    seconds: float
    webhook_duplicates: int
    webhook_retries: int
    llm_errors: int
    llm_crashes: int
    delivery_failures: int
    crashes_after_commit: int
    repeated_replies: int  # re-sent after an unconfirmed delivery; the front end dropped them by id
    latencies: list[float]

    def summary(self) -> str:
        p50 = statistics.median(self.latencies)
        p95 = statistics.quantiles(self.latencies, n=20)[-1]
        return (
            f"{self.messages} messages in {self.turns} turns in {self.seconds:.1f} s: "
            f"{self.messages / self.seconds:.1f} messages/s, {self.turns / self.seconds:.1f} "
            f"turns/s; reply latency p50 {p50:.2f} s, p95 {p95:.2f} s; faults injected: "
            f"{self.llm_errors} LLM errors, {self.llm_crashes} LLM crashes, "
            f"{self.delivery_failures} failed callbacks, {self.crashes_after_commit} crashes "
            f"after commit, {self.webhook_duplicates} duplicate webhooks "
            f"({self.webhook_retries} 5xx retried); {self.repeated_replies} replies re-sent "
            "after an unconfirmed delivery (dropped by reply id)"
        )


# -- driving the load -------------------------------------------------------------------------


async def _post(client: httpx.AsyncClient, served: ServedStack, body: bytes) -> int:
    """POST like a platform: re-send on 5xx until accepted. Returns the retries needed."""
    for attempt in range(10):
        response = await client.post(
            served.url("generic"), content=body, headers=served.generic_headers(body)
        )
        if response.status_code == 200:
            return attempt
        assert response.status_code >= 500, response.text
        await asyncio.sleep(0.05 * (attempt + 1))
    raise AssertionError("the webhook kept refusing a genuine message")


async def _drive(
    served: ServedStack, conversations: list[Conversation], shape: LoadShape, rng: random.Random
) -> tuple[int, int]:
    duplicates = retries = 0
    limits = httpx.Limits(max_connections=50, max_keepalive_connections=50)

    async def converse(client: httpx.AsyncClient, conversation: Conversation) -> None:
        nonlocal duplicates, retries
        for n, text in enumerate(conversation.texts):
            event_id = f"{conversation.id}-m{n}"
            body = served.generic_body(conversation.id, event_id, text)
            conversation.sent.append((event_id, time.monotonic()))
            retries += await _post(client, served, body)
            if rng.random() < shape.duplicate_rate:
                duplicates += 1
                retries += await _post(client, served, body)
            await asyncio.sleep(rng.uniform(0, shape.think_seconds))

    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        await asyncio.gather(*(converse(client, c) for c in conversations))
    return duplicates, retries


def run_load(
    served: ServedStack, shape: LoadShape, progress: Callable[[str], None] | None = None
) -> LoadReport:
    rng = random.Random(FAULTS.seed)
    conversations = [
        Conversation(f"load-{n:03d}", SCRIPTS[n % len(SCRIPTS)][: shape.messages])
        for n in range(shape.sessions)
    ]
    started = time.monotonic()
    with _reporting(served, conversations, started, progress):
        duplicates, retries = asyncio.run(_drive(served, conversations, shape, rng))
        quiet_at = served.wait_until_quiet(timeout=shape.timeout)

    agent = load_bank()
    latencies: list[float] = []
    turns = 0
    for conversation in conversations:
        turns += _check_conversation(served, agent, conversation, latencies)
    assert served.queue_depth() == 0
    assert served.queue_depth(dead_letters=True) == 0
    assert served.llm is not None and served.delivery is not None
    assert served.crash_after_commit is not None
    return LoadReport(
        messages=sum(len(c.texts) for c in conversations),
        turns=turns,
        seconds=quiet_at - started,
        webhook_duplicates=duplicates,
        webhook_retries=retries,
        llm_errors=served.llm.transient_errors,
        llm_crashes=served.llm.crashes,
        delivery_failures=served.delivery.failed,
        crashes_after_commit=served.crash_after_commit.crashes,
        repeated_replies=served.repeated_replies,
        latencies=latencies,
    )


@contextlib.contextmanager
def _reporting(
    served: ServedStack,
    conversations: list[Conversation],
    started: float,
    progress: Callable[[str], None] | None,
    every: float = 15.0,
) -> Iterator[None]:
    """Every `every` seconds, tell `progress` how far the run is (a long run shows it is alive)."""
    if progress is None:
        yield
        return
    done = threading.Event()
    total = sum(len(c.texts) for c in conversations)

    def report() -> None:
        while not done.wait(every):
            sent = sum(len(c.sent) for c in conversations)
            replies = sum(len(r) for r in served.received.values())
            progress(
                f"  {time.monotonic() - started:5.0f} s: {sent}/{total} messages sent, "
                f"{replies} replies received, {served.queue_depth()} queued"
            )

    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


# -- the invariants -----------------------------------------------------------------------------


def _check_conversation(
    served: ServedStack, agent: AgentSnapshot, conversation: Conversation, latencies: list[float]
) -> int:
    """Assert every invariant for one conversation; returns its number of turns."""
    session_id = served.session_id("generic", f"generic:{conversation.id}")
    state = served.session(session_id)
    assert state is not None, conversation.id
    messages = [e for e in state.events if e.kind is EventKind.MESSAGE]
    customer = [e for e in messages if e.source is EventSource.CUSTOMER]
    sent_ids = [event_id for event_id, _ in conversation.sent]

    # Every message stored once, in the order it was sent.
    stored_ids = [str(e.data["channel_event_id"]).removeprefix(GENERIC_PREFIX) for e in customer]
    assert stored_ids == sent_ids, conversation.id

    # One agent reply per turn, delivered once, in order, answering the burst's last message.
    turns = list(dict.fromkeys(e.turn_id for e in customer))
    if served.reply_per_message:  # every message its own turn, so its own reply
        assert len(turns) == len(customer), conversation.id
    replies = {e.turn_id: e for e in messages if e.source is EventSource.AGENT}
    assert len([e for e in messages if e.source is EventSource.AGENT]) == len(turns)
    assert set(replies) == set(turns), conversation.id
    last_of_turn = {e.turn_id: e for e in customer}  # the last customer message of each turn
    expected = [
        (
            str(last_of_turn[t].data["channel_event_id"]).removeprefix(GENERIC_PREFIX),
            replies[t].text,
        )
        for t in turns
    ]
    received = served.received.get(conversation.id, [])
    got = [(r["in_reply_to"], r["text"]) for r in received]
    assert got == expected, (conversation.id, got, expected)

    sent_at = dict(conversation.sent)
    for reply in received:
        answered = [e for e in customer if e.turn_id == _turn_of(customer, reply["in_reply_to"])]
        latencies.extend(reply["received_at"] - sent_at[_raw_id(e)] for e in answered)

    _check_journey_paths(served, agent, state, turns)
    return len(turns)


def _raw_id(event: Event) -> str:
    return str(event.data["channel_event_id"]).removeprefix(GENERIC_PREFIX)


def _turn_of(customer: list[Event], raw_event_id: str) -> str | None:
    return next(e.turn_id for e in customer if _raw_id(e) == raw_event_id)


def _check_journey_paths(
    served: ServedStack, agent: AgentSnapshot, state: SessionState, turns: list[str | None]
) -> None:
    """Each recorded transition starts where the journey stood: where the turn's previous one
    ended, or, at the turn's start, where the session stored it — the last transition's path
    compacted (`compact_path`: a session stores the last run, each step's last two entries; a
    turn extends the stored path and traces it whole). Within a turn a path only grows. The
    stored path is where the last transition ended, compacted. Every step of every run the
    transitions took follows an edge (or backtracks within the run)."""
    stored: dict[str, JourneyPath] = {}
    taken: dict[str, list[str | None]] = {}  # every entry the transitions appended, in order
    for turn_id in turns:
        trace = served.trace(state.id, turn_id or "")
        assert trace is not None, turn_id
        where = dict(stored)
        for record in trace["journeys"]:
            journey = record["journey_id"]
            previous, new = tuple(record["previous_path"]), tuple(record["new_path"])
            assert previous == where.get(journey, ()), (turn_id, record)
            assert new[: len(previous)] == previous, (turn_id, record)
            taken.setdefault(journey, []).extend(new[len(previous) :])
            where[journey] = new
        stored = {journey: compact_path(path) for journey, path in where.items()}
    assert {j: p for j, p in state.journey_paths.items() if p} == {
        j: p for j, p in stored.items() if p
    }
    for journey_id, path in state.journey_paths.items():
        nodes = {node.id: node for node in agent.journey(journey_id).nodes}
        assert all(node is None or node in nodes for node in path), (journey_id, path)
        if path and path[-1] is not None:
            assert nodes[path[-1]].kind is not NodeKind.FORK, f"{journey_id} stopped on a fork"
    for journey_id, entries in taken.items():
        _check_runs_follow_edges(agent, journey_id, entries)


def _check_runs_follow_edges(
    agent: AgentSnapshot, journey_id: str, entries: Sequence[str | None]
) -> None:
    journey = agent.journey(journey_id)
    nodes = {node.id: node for node in journey.nodes}
    successors: dict[str, set[str | None]] = {}
    for edge in journey.edges:
        successors.setdefault(edge.source, set()).add(edge.target)
    run: list[str] = []
    for previous, node in zip((None, *entries), entries, strict=False):
        if node is None:
            assert previous is not None, f"{journey_id}: two ends in a row in {entries}"
            run = []
            continue
        assert node in nodes, f"{journey_id}: unknown step {node!r}"
        if run:
            assert node in successors.get(run[-1], set()) or node in run, (journey_id, entries)
        else:
            assert node in successors.get(journey.root_id, set()) or node == journey.root_id
        run.append(node)


# -- the runs -----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def environment() -> None:
    """Replaces the Lambda tests' environment fixture: the served stack sets its own."""


MODES = {"per-message": True, "per-burst": False}  # WAYPOINT_REPLY_PER_MESSAGE on / off


@pytest.fixture(params=list(MODES))
def served(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    record_llm_backoff(monkeypatch)  # retried LLM calls back off without sleeping
    bank.reset_bank()
    per_message = MODES[request.param]
    with ServedStack(
        faults=FAULTS, reply_per_message=per_message, cache_dir=tmp_path / "cache"
    ) as stack:
        yield stack


def _report(shape: LoadShape, served: ServedStack, report: LoadReport) -> str:
    return f"{shape.sessions}x{shape.messages}, {_mode(served)}: {report.summary()}"


def test_load_with_faults_keeps_order_and_answers_every_message_once(
    served: ServedStack, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_load(served, SMALL)

    assert report.messages == SMALL.sessions * SMALL.messages
    if served.reply_per_message:
        assert report.turns == report.messages
    assert report.llm_errors + report.delivery_failures + report.crashes_after_commit > 0
    with capsys.disabled():
        print(f"\nload {_report(SMALL, served, report)}")


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_soak_100_sessions_x_10_messages_with_faults(
    served: ServedStack, capsys: pytest.CaptureFixture[str]
) -> None:
    def progress(line: str) -> None:
        with capsys.disabled():  # past pytest's capture, which holds the handlers' JSON logs
            print(line, flush=True)

    progress(f"\nsoak {SOAK.sessions}x{SOAK.messages}, {_mode(served)}: running")
    report = run_load(served, SOAK, progress)

    assert report.messages == SOAK.sessions * SOAK.messages
    if served.reply_per_message:
        assert report.turns == report.messages
    assert min(report.llm_errors, report.delivery_failures, report.crashes_after_commit) > 0
    with capsys.disabled():
        print(f"\nsoak {_report(SOAK, served, report)}")
    record_soak(_mode(served), report)


RELIABILITY_DOC = BENCHMARKS_DOC.parent / "RELIABILITY.md"
SOAK_BLOCK = "soak"
_TABLE_HEAD = (
    "| run | messages | turns | wall time | throughput | reply latency p50 / p95 | faults injected |\n"
    "|---|---|---|---|---|---|---|"
)


def record_soak(mode: str, report: LoadReport) -> None:
    """Write this run's row into docs/RELIABILITY.md and docs/BENCHMARKS.md (the other mode's
    row from an earlier run is kept)."""
    p50 = statistics.median(report.latencies)
    p95 = statistics.quantiles(report.latencies, n=20)[-1]
    row = (
        f"| soak, {mode} | {report.messages} ({SOAK.sessions} × {SOAK.messages}) | "
        f"{report.turns} | {report.seconds:.0f} s | {report.messages / report.seconds:.1f} "
        f"messages/s, {report.turns / report.seconds:.1f} turns/s | {p50:.1f} s / {p95:.1f} s | "
        f"{report.llm_errors} LLM errors ({report.llm_crashes} crashing the turn), "
        f"{report.delivery_failures} failed callbacks, {report.crashes_after_commit} crashes "
        f"after commit, {report.webhook_duplicates} duplicate webhooks; "
        f"{report.repeated_replies} replies re-sent after an unconfirmed delivery |"
    )
    for path, name, heading in (
        (RELIABILITY_DOC, SOAK_BLOCK, "## Soak results"),
        (BENCHMARKS_DOC, LOAD_BLOCK, LOAD_HEADING),
    ):
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        old = read_block(text, name) or ""
        rows = [
            line
            for line in old.splitlines()
            if line.startswith("| soak, ") and not line.startswith(f"| soak, {mode} |")
        ]
        body = "\n".join([_TABLE_HEAD, *sorted([*rows, row])])
        if name == LOAD_BLOCK:
            body += (
                f"\n\n_{_SOAK_NOTE} Every message stored once in order, one reply per message "
                "or per burst, journey paths consistent, no dead letters — see "
                "[RELIABILITY.md](RELIABILITY.md)._"
            )
        update_block(path, name, body, heading=heading)


_SOAK_NOTE = (
    "`make soak` (tests/reliability/test_load.py): 100 concurrent customers × 10 messages "
    "through the local HTTP server, offline model, faults injected at random; one poller feeds "
    "one worker, like a single Lambda instance."
)


def _mode(served: ServedStack) -> str:
    return "one reply per message" if served.reply_per_message else "one reply per burst"
