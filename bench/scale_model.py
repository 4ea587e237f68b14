"""A discrete-event model of a Waypoint deployment under load: webhook → SQS FIFO → turn workers
→ model → channel. `python -m bench scale` runs it (bench/scale.py); docs/capacity.md explains
every parameter and what the results mean.

What it models, each as the deployment behaves (template.yaml, functions/worker.py):

- **customers**: each conversation sends its first message at a uniformly random moment of the
  ramp, the next one a think time (exponential) after the reply to the previous one;
- **the webhook API**: API Gateway's stage throttle (token bucket: rate and burst); a throttled
  request is a 429 to the chat platform, which retries on its own schedule (`retry_after_s`);
  one that is still refused after the last retry is *lost* (the platform gave up);
- **Lambda**: the account's concurrency, shared by the webhook and the workers (a request
  over it is throttled like an API throttle); a worker container that is new pays a cold start;
- **the turn queue**: SQS FIFO, one message group per session: a group with a message in
  flight is locked, so a session's messages are never worked on concurrently or out of order;
- **the event source mapping**: at most `worker_max_concurrency` concurrent worker
  invocations, each a batch of up to `batch_size` messages from unlocked groups, oldest first;
  the messages of one session in a batch are answered by one turn (bursts), the turns of a batch
  one after another;
- **a turn**: the engine's own time, then its model rounds (the calls of a round run at once;
  a round lasts as long as its slowest call), then the reply sent through the channel;
- **the model's rate limit**: requests and tokens per minute (token buckets refilled
  continuously). A call over it is a 429. With `backpressure="defer"` the turn is given back to
  the queue (a batch item failure with a visibility back-off that doubles per receive), the
  session's later messages wait behind it, and the customer sees the typing indicator and at
  most one "one moment" line per message once it has waited `one_moment_after_s`; after
  `max_receives` the message goes to the dead-letter queue (*lost*). With
  `backpressure="fallback"` the turn answers with the fallback reply at once — no message is
  lost, but the customer gets no answer to what they asked (counted);
- **the channel's send rate** (e.g. a Telegram bot's messages per second): a reply waits for it.

What it leaves out: network latency between AWS services (a few ms), DynamoDB and SQS request
latencies (folded into the engine's time per turn), throttling inside DynamoDB (on-demand tables
adapt; docs/capacity.md computes their ceilings), tool calls (folded into the turn's time), and
any variation of the model's latency with load.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Backpressure = Literal["defer", "fallback"]


@dataclass(frozen=True)
class Quotas:
    """Limits of the account and the template. Defaults: the template's and AWS's defaults."""

    api_rate: float = 100.0  # template.yaml WebhookApi ThrottlingRateLimit (requests/s)
    api_burst: float = 200.0  # ThrottlingBurstLimit
    lambda_concurrency: int = 1_000  # the account's default concurrent executions per region
    worker_max_concurrency: int = 50  # the worker's event source mapping MaximumConcurrency
    batch_size: int = 10  # its BatchSize
    model_rpm: float = 10_000.0  # requests per minute at the model provider (assumed)
    model_tpm: float = 10_000_000.0  # tokens per minute (assumed)
    # Replies per second the channel accepts: a WhatsApp Cloud API number's 80 messages/s count
    # the inbound half too (docs/capacity.md, "Chat platforms").
    send_rate: float = 40.0


@dataclass(frozen=True)
class Service:
    """How long things take, and what a turn asks of the model."""

    webhook_ms: float = 60.0  # verify, dedupe, enqueue (4 DynamoDB writes + SendMessage)
    engine_ms: float = 150.0  # a turn's own work: session read, engine, commit, reply POST
    cold_start_ms: float = 1_200.0  # a new worker container's init (docs/BENCHMARKS.md)
    rounds: tuple[int, ...] = (2, 1)  # model calls per sequential round (2.8 calls per turn)
    tokens_per_call: float = 1_500.0  # prompt + completion
    model_median_ms: float = 700.0  # the model's latency per call: lognormal
    model_sigma: float = 0.45  # its shape (p95 ≈ 2.1 × the median)
    retry_after_s: tuple[float, ...] = (1.0, 60.0, 300.0)  # a platform's retries of a 429
    backpressure: Backpressure = "defer"
    defer_s: float = 2.0  # the first visibility back-off after a 429; doubles per receive
    defer_cap_s: float = 60.0
    max_receives: int = 8  # the queue's maxReceiveCount
    one_moment_after_s: float = 8.0
    # Measured instead of modelled (bench/scale_check.py): the worker's whole time per message
    # of the conversation, by the message's place in it; `engine_ms` and `rounds` then unused.
    turn_s_by_index: tuple[float, ...] = ()


@dataclass(frozen=True)
class Workload:
    conversations: int
    messages: int = 5  # per conversation
    ramp_s: float = 60.0  # first messages spread over this long
    think_s: float = 20.0  # mean time a customer takes to answer a reply
    seed: int = 7


@dataclass
class Result:
    """What customers saw and what each limit did."""

    workload: Workload
    replies: int = 0
    fallback_replies: int = 0
    lost_webhook: int = 0  # the platform gave up after its retries
    dead_lettered: int = 0
    out_of_order: int = 0
    waits_s: list[float] = field(default_factory=list)  # customer's message → its reply
    webhook_retries: int = 0
    model_429s: int = 0
    deferrals: int = 0
    one_moment_lines: int = 0
    cold_starts: int = 0
    peak_queue: int = 0
    peak_workers: int = 0
    peak_lambda: int = 0
    peak_model_rpm: float = 0.0
    # Where customers' waiting went, summed over messages (s): what each limit cost them.
    send_waits_s: float = 0.0  # replies waiting for the channel's send rate
    webhook_retry_waits_s: float = 0.0  # a throttled webhook waiting for the platform's retry
    queue_waits_s: float = 0.0  # a message waiting in the queue for a worker (or its session)
    defer_waits_s: float = 0.0  # a turn given back after a model 429, waiting to be visible
    turns: int = 0
    model_calls: int = 0
    model_tokens: float = 0.0
    end_s: float = 0.0

    sent: int = 0  # messages customers wrote (a conversation whose message was lost stops)

    @property
    def lost(self) -> int:
        return self.lost_webhook + self.dead_lettered

    def percentile(self, q: float) -> float:
        if not self.waits_s:
            return math.nan
        ordered = sorted(self.waits_s)
        return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


class Bucket:
    """A token bucket refilled continuously (`rate` per second, at most `burst`)."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.level, self.at = burst, 0.0

    def _refill(self, now: float) -> None:
        self.level = min(self.burst, self.level + (now - self.at) * self.rate)
        self.at = now

    def take(self, now: float, amount: float = 1.0) -> bool:
        self._refill(now)
        if self.level >= amount:
            self.level -= amount
            return True
        return False

    def ready_at(self, now: float, amount: float = 1.0) -> float:
        """When `amount` can be taken (reserving it: the caller takes it then)."""
        self._refill(now)
        self.level -= amount
        return now if self.level >= 0 else now - self.level / self.rate


@dataclass
class _Message:
    conversation: int
    index: int
    sent_at: float
    attempts: int = 0  # webhook attempts
    enqueued_at: float = 0.0
    receives: int = 0
    one_moment: bool = False


class Simulation:
    """One run: `Simulation(workload, quotas, service).run()`."""

    def __init__(self, workload: Workload, quotas: Quotas, service: Service) -> None:
        self.w, self.q, self.s = workload, quotas, service
        self.rng = random.Random(workload.seed)
        self.result = Result(workload)
        self._events: list[tuple[float, int, Callable[[float], None]]] = []
        self._seq = 0
        self.api = Bucket(quotas.api_rate, quotas.api_burst)
        self.rpm = Bucket(quotas.model_rpm / 60, quotas.model_rpm / 60)  # a second's worth
        self.tpm = Bucket(quotas.model_tpm / 60, quotas.model_tpm / 60)
        self.send = Bucket(quotas.send_rate, max(1.0, quotas.send_rate))
        self.groups: dict[int, deque[_Message]] = {}
        self.ready: deque[int] = deque()  # unlocked groups with messages, oldest first
        self.locked: set[int] = set()
        self.queued = 0
        self.workers = 0
        self.warm_containers = 0
        self.webhooks = 0
        self.replied: dict[int, int] = {}  # conversation → messages answered so far
        self._model_minute: deque[float] = deque()

    # -- the event loop -------------------------------------------------------------------------

    def at(self, time: float, action: Callable[[float], None]) -> None:
        self._seq += 1
        heapq.heappush(self._events, (time, self._seq, action))

    def run(self) -> Result:
        for conversation in range(self.w.conversations):
            start = self.rng.uniform(0.0, self.w.ramp_s)
            self.at(start, self._sender(_Message(conversation, 0, start)))
        while self._events:
            now, _seq, action = heapq.heappop(self._events)
            action(now)
            self.result.end_s = now
        return self.result

    def _sender(self, message: _Message) -> Callable[[float], None]:
        if message.attempts == 0:
            self.result.sent += 1
        return lambda now: self._webhook(now, message)

    # -- webhook ------------------------------------------------------------------------------

    def _webhook(self, now: float, message: _Message) -> None:
        message.attempts += 1
        lambda_full = self.workers + self.webhooks >= self.q.lambda_concurrency
        if lambda_full or not self.api.take(now):
            retries = self.s.retry_after_s
            if message.attempts > len(retries):
                self.result.lost_webhook += 1
                return
            self.result.webhook_retries += 1
            self.result.webhook_retry_waits_s += retries[message.attempts - 1]
            self.at(now + retries[message.attempts - 1], self._sender(message))
            return
        self.webhooks += 1
        self._peak_lambda()
        self.at(now + self.s.webhook_ms / 1000, lambda t: self._enqueued(t, message))

    def _enqueued(self, now: float, message: _Message) -> None:
        self.webhooks -= 1
        group = self.groups.setdefault(message.conversation, deque())
        message.enqueued_at = now
        group.append(message)
        self.queued += 1
        self.result.peak_queue = max(self.result.peak_queue, self.queued)
        if len(group) == 1 and message.conversation not in self.locked:
            self.ready.append(message.conversation)
        self._poll(now)

    # -- the event source mapping and the worker ---------------------------------------------

    def _poll(self, now: float) -> None:
        while (
            self.ready
            and self.workers < self.q.worker_max_concurrency
            and self.workers + self.webhooks < self.q.lambda_concurrency
        ):
            batch: list[list[_Message]] = []
            room = self.q.batch_size
            while self.ready and room > 0:
                conversation = self.ready.popleft()
                group = self.groups[conversation]
                take = [group.popleft() for _ in range(min(room, len(group)))]
                self.result.queue_waits_s += sum(now - m.enqueued_at for m in take)
                room -= len(take)
                self.queued -= len(take)
                self.locked.add(conversation)
                batch.append(take)
            self.workers += 1
            self.result.peak_workers = max(self.result.peak_workers, self.workers)
            self._peak_lambda()
            start = now
            if self.warm_containers > 0:
                self.warm_containers -= 1
            else:
                self.result.cold_starts += 1
                start += self.s.cold_start_ms / 1000
            self.at(start, self._batch_starter(batch))

    def _batch_starter(self, batch: list[list[_Message]]) -> Callable[[float], None]:
        return lambda now: self._next_turn(now, batch)

    def _next_turn(self, now: float, batch: list[list[_Message]]) -> None:
        if not batch:
            self.workers -= 1
            self.warm_containers += 1
            self._poll(now)
            return
        burst, rest = batch[0], batch[1:]
        for message in burst:
            message.receives += 1
        self.result.turns += 1
        if self.s.turn_s_by_index:
            index = min(burst[-1].index, len(self.s.turn_s_by_index) - 1)
            done = now + self.s.turn_s_by_index[index]
            self.at(done, lambda t: self._reply(t, burst, rest, fallback=False))
            return
        self._turn(now + self.s.engine_ms / 1000, burst, rest, round_index=0)

    def _turn(
        self, now: float, burst: list[_Message], rest: list[list[_Message]], round_index: int
    ) -> None:
        if round_index == len(self.s.rounds):
            self._reply(now, burst, rest, fallback=False)
            return
        calls = self.s.rounds[round_index]
        tokens = calls * self.s.tokens_per_call
        if not (self.rpm.take(now, calls) and self.tpm.take(now, tokens)):
            self.result.model_429s += 1
            if self.s.backpressure == "fallback":
                self._reply(now, burst, rest, fallback=True)
            else:
                self._defer(now, burst, rest)
            return
        self.result.model_calls += calls
        self.result.model_tokens += tokens
        self._count_minute(now, calls)
        latency = max(
            self.s.model_median_ms / 1000 * math.exp(self.rng.gauss(0.0, self.s.model_sigma))
            for _ in range(calls)
        )
        self.at(now + latency, lambda t: self._turn(t, burst, rest, round_index + 1))

    def _defer(self, now: float, burst: list[_Message], rest: list[list[_Message]]) -> None:
        """A batch item failure: the burst goes back to the queue with a visibility back-off;
        the session stays locked until it is visible again."""
        self.result.deferrals += 1
        first = burst[0]
        conversation = first.conversation
        if first.receives >= self.s.max_receives:
            self.result.dead_lettered += len(burst)
            self._release(now, conversation)
            self.at(now, lambda t: self._next_turn(t, rest))
            return
        delay = min(self.s.defer_cap_s, self.s.defer_s * 2 ** (first.receives - 1))
        for message in burst:
            if (
                not message.one_moment
                and now + delay - message.sent_at >= self.s.one_moment_after_s
            ):
                message.one_moment = True  # sent once, when the wait reaches the threshold
                self.result.one_moment_lines += 1
        self.result.defer_waits_s += delay * len(burst)
        for message in burst:
            message.enqueued_at = now + delay  # its queue wait starts when it is visible again
        group = self.groups[conversation]
        group.extendleft(reversed(burst))
        self.queued += len(burst)
        self.at(now + delay, lambda t: self._release(t, conversation))
        self.at(now, lambda t: self._next_turn(t, rest))

    def _release(self, now: float, conversation: int) -> None:
        self.locked.discard(conversation)
        if self.groups.get(conversation):
            self.ready.append(conversation)
        self._poll(now)

    def _reply(
        self, now: float, burst: list[_Message], rest: list[list[_Message]], *, fallback: bool
    ) -> None:
        sent = self.send.ready_at(now)
        self.result.send_waits_s += sent - now
        self.at(sent, lambda t: self._delivered(t, burst, rest, fallback))

    def _delivered(
        self, now: float, burst: list[_Message], rest: list[list[_Message]], fallback: bool
    ) -> None:
        conversation = burst[0].conversation
        for message in burst:
            self.result.replies += 1
            self.result.fallback_replies += fallback
            self.result.waits_s.append(now - message.sent_at)
            expected = self.replied.get(conversation, 0)
            self.result.out_of_order += message.index != expected
            self.replied[conversation] = message.index + 1
        last = burst[-1]
        if last.index + 1 < self.w.messages:
            think = self.rng.expovariate(1.0 / self.w.think_s) if self.w.think_s > 0 else 0.0
            self.at(now + think, self._sender(_Message(conversation, last.index + 1, now + think)))
        self._release(now, conversation)
        self._next_turn(now, rest)

    # -- peaks --------------------------------------------------------------------------------

    def _peak_lambda(self) -> None:
        self.result.peak_lambda = max(self.result.peak_lambda, self.workers + self.webhooks)

    def _count_minute(self, now: float, calls: int) -> None:
        minute = self._model_minute
        minute.extend([now] * calls)
        while minute and minute[0] < now - 60.0:
            minute.popleft()
        self.result.peak_model_rpm = max(self.result.peak_model_rpm, float(len(minute)))


def simulate(
    workload: Workload, quotas: Quotas | None = None, service: Service | None = None
) -> Result:
    return Simulation(workload, quotas or Quotas(), service or Service()).run()


def waits_by_limit(result: Result) -> dict[str, float]:
    """Customers' waiting (s, summed over messages) that each limit caused."""
    return {
        "the webhook API's throttle or Lambda's concurrency": result.webhook_retry_waits_s,
        "the workers' concurrency (queue)": result.queue_waits_s,
        "the model's rate limit (deferred turns)": result.defer_waits_s,
        "the channel's send rate": result.send_waits_s,
    }


def binding(result: Result) -> str:
    """The limit that binds first: the one that cost customers the most waiting ("none" when
    no message waited more than a second in all, on average below 10 ms)."""
    waits = waits_by_limit(result)
    name, seconds = max(waits.items(), key=lambda item: item[1])
    if seconds <= max(1.0, 0.01 * max(1, result.replies)):
        return "none"
    return name


def summary(result: Result) -> dict[str, Any]:
    return {
        "conversations": result.workload.conversations,
        "messages": result.sent,
        "replies": result.replies,
        "lost": result.lost,
        "p50_s": result.percentile(0.50),
        "p99_s": result.percentile(0.99),
        "out_of_order": result.out_of_order,
    }


__all__ = [
    "Backpressure",
    "Bucket",
    "Quotas",
    "Result",
    "Service",
    "Simulation",
    "Workload",
    "binding",
    "simulate",
    "summary",
    "waits_by_limit",
]
